package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

func sample() []tensor.Info {
	f32 := []float32{1, -2, 3.5, 0, 1e-3, -7}
	f16 := []uint16{tensor.F32ToF16(0.5), tensor.F32ToF16(-1), tensor.F32ToF16(3)}
	bf := []uint16{tensor.F32ToBF16(1.5), tensor.F32ToBF16(-0.25)}
	return []tensor.Info{
		{Name: "model.embed_tokens.weight", DType: tensor.F32, Shape: []int{2, 3}, Data: tensor.Bytes(f32)},
		{Name: "a.f16", DType: tensor.F16, Shape: []int{3}, Data: tensor.Bytes(f16)},
		{Name: "b.bf16", DType: tensor.BF16, Shape: []int{1, 2}, Data: tensor.Bytes(bf)},
		{Name: "scalar", DType: tensor.F32, Shape: []int{}, Data: tensor.Bytes([]float32{42})},
		{Name: "empty", DType: tensor.F16, Shape: []int{0, 4}, Data: nil},
	}
}

func sameTensors(t *testing.T, got []tensor.Info, want []tensor.Info, lookup func(string) (tensor.Info, bool)) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d tensors, want %d", len(got), len(want))
	}
	for _, w := range want {
		g, ok := lookup(w.Name)
		if !ok {
			t.Fatalf("tensor %q missing", w.Name)
		}
		if g.DType != w.DType || !equalShape(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("tensor %q: got %s%v %d bytes, want %s%v %d bytes", w.Name, g.DType, g.Shape, len(g.Data), w.DType, w.Shape, len(w.Data))
		}
	}
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWriteOpenRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.safetensors")
	want := sample()
	meta := map[string]string{"format": "pt", "note": "quote\" backslash\\ nl\n ünï"}
	if err := Write(p, want, meta); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sameTensors(t, f.Tensors(), want, f.Tensor)
	if f.Metadata["format"] != "pt" || f.Metadata["note"] != meta["note"] {
		t.Fatalf("metadata %v", f.Metadata)
	}
	raw, _ := os.ReadFile(p)
	n := binary.LittleEndian.Uint64(raw)
	if n%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", n)
	}
	// Widest dtype first, then by name: the F32 tensors come before BF16, then F16.
	var order []string
	for _, ti := range f.Tensors() {
		order = append(order, ti.Name)
	}
	if got := strings.Join(order, ","); got != "model.embed_tokens.weight,scalar,b.bf16,a.f16,empty" {
		t.Errorf("data order %s", got)
	}
	// Data aliases the mapping and is aligned for zero-copy float views.
	emb, _ := f.Tensor("model.embed_tokens.weight")
	if v, err := tensor.Float32s(emb.Data); err != nil || v[2] != 3.5 {
		t.Errorf("float view: %v %v", v, err)
	}
}

func TestOpenModelSharded(t *testing.T) {
	dir := t.TempDir()
	all := sample()
	if err := Write(filepath.Join(dir, "model-00001-of-00002.safetensors"), all[:2], map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	if err := Write(filepath.Join(dir, "model-00002-of-00002.safetensors"), all[2:], nil); err != nil {
		t.Fatal(err)
	}
	wm := map[string]string{}
	for i, ti := range all {
		wm[ti.Name] = "model-00001-of-00002.safetensors"
		if i >= 2 {
			wm[ti.Name] = "model-00002-of-00002.safetensors"
		}
	}
	writeIndex := func(wm map[string]string) {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 1}, "weight_map": wm})
		if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeIndex(wm)
	m, err := OpenModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := m.Names()
	got := make([]tensor.Info, len(names))
	for i, n := range names {
		got[i], _ = m.Tensor(n)
	}
	sameTensors(t, got, all, m.Tensor)
	m.Close()

	wm["scalar"] = "model-00001-of-00002.safetensors"
	writeIndex(wm)
	if _, err := OpenModel(dir); err == nil || !strings.Contains(err.Error(), `"scalar"`) {
		t.Errorf("wrong shard in index: %v", err)
	}
	wm["scalar"] = "../evil.safetensors"
	writeIndex(wm)
	if _, err := OpenModel(dir); err == nil {
		t.Error("path escaping the folder accepted")
	}
	if _, err := OpenModel(t.TempDir()); err == nil {
		t.Error("empty folder accepted")
	}
}

// build assembles a file from a raw header string and data.
func build(header string, data []byte) []byte {
	b := make([]byte, 8, 8+len(header)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func TestParseErrors(t *testing.T) {
	good := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[2],"data_offsets":[8,12]}}`
	if _, err := Parse("t", build(good, make([]byte, 12))); err != nil {
		t.Fatalf("good file rejected: %v", err)
	}
	cases := []struct {
		name, header string
		data         int
		want         string
	}{
		{"not json", `{"a":`, 0, "header JSON"},
		{"not an object", `[1,2]`, 0, "start with '{'"},
		{"unknown dtype", `{"a":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}}`, 1, `"a": unsupported safetensors dtype`},
		{"size mismatch", `{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, 8, `"a": F32[3] needs 12 bytes`},
		{"past end", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, 4, "run past"},
		{"overlap", `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8, "overlap"},
		{"gap", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8, "gap"},
		{"trailing data", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, 8, "data section has 8"},
		{"duplicate", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, 8, `duplicate entry "a"`},
		{"negative dim", `{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}`, 4, "shape[0]"},
		{"float offset", `{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}}`, 4, "data_offsets[1]"},
		{"reversed offsets", `{"a":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}}`, 4, "end before"},
		{"missing field", `{"a":{"dtype":"F32","shape":[1]}}`, 4, "needs dtype"},
		{"bad metadata", `{"__metadata__":{"a":1}}`, 0, "__metadata__"},
		{"huge shape", `{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}}`, 4, "too large"},
		{"garbage after", `{} x`, 0, "after the header"},
	}
	for _, c := range cases {
		_, err := Parse("bad.safetensors", build(c.header, make([]byte, c.data)))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "bad.safetensors: ") {
			t.Errorf("%s: err = %v, want one containing %q", c.name, err, c.want)
		}
	}
	// Header length beyond the file.
	b := build(good, make([]byte, 12))
	binary.LittleEndian.PutUint64(b, 1<<20)
	if _, err := Parse("t", b); err == nil || !strings.Contains(err.Error(), "past the end") {
		t.Errorf("long header length: %v", err)
	}
	if _, err := Parse("t", []byte{1, 2, 3}); err == nil {
		t.Error("3-byte file accepted")
	}
	// A truncated real file fails cleanly at every length.
	var buf bytes.Buffer
	if err := Encode(&buf, sample(), map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	full := buf.Bytes()
	for n := 0; n < len(full); n++ {
		if _, err := Parse("t", full[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(full))
		}
	}
}

func TestWriteErrors(t *testing.T) {
	bad := [][]tensor.Info{
		{{Name: "x", DType: tensor.F32, Shape: []int{2}, Data: make([]byte, 4)}},
		{{Name: "x", DType: tensor.Q8_0, Shape: []int{32}, Data: make([]byte, 34)}},
		{{Name: "x", DType: tensor.F32, Shape: []int{1}, Data: make([]byte, 4)}, {Name: "x", DType: tensor.F32, Shape: []int{1}, Data: make([]byte, 4)}},
		{{Name: "__metadata__", DType: tensor.F32, Shape: []int{1}, Data: make([]byte, 4)}},
	}
	for i, ts := range bad {
		if err := Encode(&bytes.Buffer{}, ts, nil); err == nil {
			t.Errorf("case %d: no error", i)
		}
	}
}

func FuzzOpen(f *testing.F) {
	var buf bytes.Buffer
	Encode(&buf, sample(), map[string]string{"format": "pt"})
	f.Add(buf.Bytes())
	f.Add(build(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("fuzz", b)
		if err != nil {
			return
		}
		// Whatever parses must be internally consistent and re-encode to a parseable file.
		for _, ti := range file.Tensors() {
			if err := ti.Check(); err != nil {
				t.Fatalf("parsed tensor fails Check: %v", err)
			}
		}
		var out bytes.Buffer
		if err := Encode(&out, file.Tensors(), file.Metadata); err != nil {
			return // e.g. invalid UTF-8 names are readable but not writable
		}
		again, err := Parse("again", out.Bytes())
		if err != nil {
			t.Fatalf("re-encoded file does not parse: %v", err)
		}
		sameTensors(t, again.Tensors(), file.Tensors(), again.Tensor)
	})
}
