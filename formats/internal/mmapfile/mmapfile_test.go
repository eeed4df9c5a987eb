package mmapfile

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadMatchesMap: Read gives the file's bytes, as Map does, for sizes around page and
// huge-page boundaries; both refuse a directory and a file shorter than its header.
func TestReadMatchesMap(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{8, 4095, 4097, 2<<20 + 3} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := Map(path, 8, "test")
		if err != nil {
			t.Fatal(err)
		}
		rd, err := Read(path, 8, "test")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(m, data) || !bytes.Equal(rd, data) {
			t.Errorf("%d bytes: Map equal %v, Read equal %v", n, bytes.Equal(m, data), bytes.Equal(rd, data))
		}
		if err := Unmap(path, m); err != nil {
			t.Error(err)
		}
		if err := Unmap(path, rd); err != nil {
			t.Error(err)
		}
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, load := range []func(string, int64, string) ([]byte, error){Map, Read} {
		if _, err := load(short, 8, "test"); err == nil || !strings.Contains(err.Error(), "too small for a test header") {
			t.Errorf("3-byte file: %v, want too small", err)
		}
		if _, err := load(dir, 8, "test"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("directory: %v, want not a regular file", err)
		}
	}
}
