//go:build unix

package cost

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used so far, all threads.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

// peakRSS is the largest resident set this process has had, in bytes (Linux reports
// ru_maxrss in KiB).
func peakRSS() (int64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return int64(ru.Maxrss) * 1024, true
}
