package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.bin")
	if err := Write(path, func(w io.Writer) error { _, err := w.Write([]byte("abc")); return err }); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
	if b, _ := os.ReadFile(path); string(b) != "abc" {
		t.Errorf("content %q", b)
	}
	// A failing fill leaves the existing file as it was and no temporary behind.
	boom := errors.New("boom")
	if err := Write(path, func(w io.Writer) error { w.Write([]byte("partial")); return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "abc" {
		t.Errorf("after failed write: %q", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d entries left in dir, want 1", len(ents))
	}
}
