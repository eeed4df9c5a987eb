package gguf

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// DropMetadata empties the metadata, keeps the tensors readable, and takes the header's
// pages out of the resident set (checked in /proc/self/smaps where there is one).
func TestDropMetadata(t *testing.T) {
	// A vocabulary-like header of ~2 MB, then one tensor.
	vocab := make([]string, 100_000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("token-%08d", i)
	}
	data := make([]byte, 4*1024)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	meta := []KV{{"general.architecture", String("llama")}, {"tokenizer.ggml.tokens", Array(vocab)}}
	ts := []tensor.Info{{Name: "w", DType: tensor.F32, Shape: []int{1024}, Data: data}}
	if err := Write(path, meta, ts, 0); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.Get("tokenizer.ggml.tokens"); !ok {
		t.Fatal("tokens missing before DropMetadata")
	}
	before, haveSmaps := mappingRss(t, path)

	f.DropMetadata()
	if len(f.Meta) != 0 {
		t.Fatalf("Meta has %d entries after DropMetadata", len(f.Meta))
	}
	if _, ok := f.Get("general.architecture"); ok {
		t.Fatal("Get still finds general.architecture after DropMetadata")
	}
	if _, err := f.GetString("general.architecture"); err == nil {
		t.Fatal("GetString still succeeds after DropMetadata")
	}
	w, ok := f.Tensor("w")
	if !ok || !bytes.Equal(w.Data, data) {
		t.Fatal("tensor w changed or missing after DropMetadata")
	}
	if haveSmaps {
		after, _ := mappingRss(t, path)
		// The header is ~2.4 MB; all but the page shared with the tensor data must go.
		if header := f.DataOffset; before-after < header-2*int64(os.Getpagesize()) {
			t.Fatalf("resident pages of the mapping: %d kB before, %d kB after; want the %d-byte header gone", before/1024, after/1024, header)
		}
	}
	f.DropMetadata() // twice is harmless
}

// mappingRss sums the Rss of this process's mappings of path, in bytes (false where
// /proc/self/smaps cannot be read).
func mappingRss(t *testing.T, path string) (int64, bool) {
	t.Helper()
	fd, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, false
	}
	defer fd.Close()
	var total int64
	in := false
	sc := bufio.NewScanner(fd)
	for sc.Scan() {
		l := sc.Text()
		if fields := strings.Fields(l); len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && fields[len(fields)-1] == path
			continue
		}
		var kb int64
		if n, _ := fmt.Sscanf(l, "Rss: %d kB", &kb); in && n == 1 {
			total += kb * 1024
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return total, true
}
