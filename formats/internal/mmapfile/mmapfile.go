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
