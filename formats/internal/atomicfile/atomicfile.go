// Package atomicfile writes a file so that readers never see it half-written: the bytes go
// to a temporary file in the same folder, which is renamed over the target only once every
// byte is on disk. Both checkpoint writers (safetensors, GGUF) use it.
package atomicfile

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write creates path with mode 0644 from what fill writes through a 1 MiB buffer. On any
// error the target is left untouched and the temporary file removed; the error names path.
func Write(path string, fill func(w io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	fail := func(err error) error {
		tmp.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	w := bufio.NewWriterSize(tmp, 1<<20)
	if err := fill(w); err != nil {
		return fail(err)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	// CreateTemp makes the file 0600; a checkpoint is meant to be read by other users and
	// tools (a serving container, say), like any file os.Create would make.
	if err := tmp.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.Rename(tmp.Name(), path)
}
