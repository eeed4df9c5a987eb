// Package hugemem allocates memory that the kernel may back with transparent huge pages:
// where tokenwise keeps model weights (formats' resident readers) and where it measures
// streaming them (cost's calibration), so both see the same pages. A decode step streams
// every weight once; in 4 KiB pages it takes a TLB miss every 4 KiB, which on this machine
// class costs 10-20% of the step.
package hugemem

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Alloc returns n zeroed bytes of private anonymous memory advised as huge pages
// (MADV_HUGEPAGE; transparent huge pages in "madvise" mode honour it, "never" leaves 4 KiB
// pages). Free releases it; the Go collector does not.
func Alloc(n int) ([]byte, error) {
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("allocating %d bytes: %w", n, err)
	}
	_ = unix.Madvise(m, unix.MADV_HUGEPAGE) // advice only: without it the pages are 4 KiB
	return m, nil
}

// ReadOnly makes memory from Alloc read-only, so a stray write faults instead of changing
// weights.
func ReadOnly(m []byte) error { return unix.Mprotect(m, unix.PROT_READ) }

// Free releases memory from Alloc.
func Free(m []byte) error { return unix.Munmap(m) }
