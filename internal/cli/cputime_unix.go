//go:build unix

package cli

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user + system) this process has used so far. On a busy machine it
// measures work more steadily than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
