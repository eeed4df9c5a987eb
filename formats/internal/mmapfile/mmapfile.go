// Package mmapfile maps a whole checkpoint file read-only, so tensor data is read straight
// from the page cache and never copied (both readers, safetensors and GGUF, use it).
package mmapfile

import (
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"
)

// Map maps path read-only. A file that is not regular, or shorter than minSize bytes (what
// its header needs), is refused with an error naming path and format.
func Map(path string, minSize int64, format string) ([]byte, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close() // the mapping stays valid after the descriptor is closed
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	size := st.Size()
	if size < minSize {
		return nil, fmt.Errorf("%s: file is %d bytes, too small for a %s header", path, size, format)
	}
	if size > math.MaxInt {
		return nil, fmt.Errorf("%s: file too large to map", path)
	}
	m, err := unix.Mmap(int(fd.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return m, nil
}

// Unmap releases a mapping made by Map; path names the file in the error.
func Unmap(path string, m []byte) error {
	if err := unix.Munmap(m); err != nil {
		return fmt.Errorf("%s: munmap: %w", path, err)
	}
	return nil
}

// Release tells the kernel that the pages wholly inside m[:n] are not needed for now: they
// leave the process's resident set and are read again from the page cache (or the file)
// if touched. For a header that has been parsed into Go values, whose pages would
// otherwise count as resident for as long as the tensor data stays mapped.
func Release(m []byte, n int) error {
	n = n &^ (os.Getpagesize() - 1)
	if n <= 0 {
		return nil
	}
	return unix.Madvise(m[:n], unix.MADV_DONTNEED)
}
