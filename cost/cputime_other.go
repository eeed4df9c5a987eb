//go:build !unix

package cost

import "time"

// processCPU is not available here: CPU-time rates are left out.
func processCPU() (time.Duration, bool) { return 0, false }
