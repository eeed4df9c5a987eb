//go:build !unix

package cost

import "time"

// processCPU is not available here: CPU-time rates are left out.
func processCPU() (time.Duration, bool) { return 0, false }

// peakRSS is not available here.
func peakRSS() (int64, bool) { return 0, false }
