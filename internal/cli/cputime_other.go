//go:build !unix

package cli

import "time"

// cpuTime is not measured on this platform.
func cpuTime() time.Duration { return 0 }
