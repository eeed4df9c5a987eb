package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

func sampleMeta() []KV {
	return []KV{
		{"general.architecture", String("llama")},
		{"general.name", String("tiny ünïcode")},
		{"llama.block_count", Uint32(2)},
		{"llama.rope.freq_base", Float32(10000)},
		{"u8", Uint8(200)}, {"i8", Int8(-5)}, {"u16", Uint16(60000)}, {"i16", Int16(-30000)},
		{"i32", Int32(-7)}, {"u64", Uint64(1 << 40)}, {"i64", Int64(-1 << 40)}, {"f64", Float64(math.Pi)},
		{"yes", Bool(true)}, {"no", Bool(false)},
		{"tokenizer.ggml.tokens", Array([]string{"<s>", "a", "", "ü b"})},
		{"tokenizer.ggml.token_type", Array([]int32{3, 1, 1, 1})},
		{"tokenizer.ggml.scores", Array([]float32{0, -1.5, -2, -3})},
		{"bools", Array([]bool{true, false, true})},
		{"u64s", Array([]uint64{1, 1 << 63})},
		{"f64s", Array([]float64{0.5})},
		{"bytes", Array([]uint8{1, 2, 3})},
		{"empty", Array([]string{})},
		{"nested", Arrays([]Value{Array([]string{"x", "y"}), Array([]string{}), Array([]string{"z"})})},
		{"nested2", Arrays([]Value{Arrays([]Value{Array([]int32{1, 2})})})},
	}
}

func sampleTensors() []tensor.Info {
	emb := make([]float32, 4*8)
	for i := range emb {
		emb[i] = float32(i) - 3.5
	}
	q := make([]byte, 2*34)
	tensor.Quantize(tensor.Q8_0, append(emb, emb...), q)
	h := make([]byte, 6)
	tensor.Quantize(tensor.F16, []float32{1, 2, 3}, h)
	return []tensor.Info{
		{Name: "token_embd.weight", DType: tensor.F32, Shape: []int{4, 8}, Data: tensor.Bytes(emb)},
		{Name: "blk.0.attn_q.weight", DType: tensor.Q8_0, Shape: []int{2, 32}, Data: q},
		{Name: "output_norm.weight", DType: tensor.F16, Shape: []int{3}, Data: h},
		{Name: "blk.0.x", DType: tensor.BF16, Shape: []int{1, 1, 1, 1}, Data: []byte{0x80, 0x3f}},
	}
}

func TestWriteOpenRoundTrip(t *testing.T) {
	for _, align := range []int{0, 64} {
		p := filepath.Join(t.TempDir(), "m.gguf")
		meta, ts := sampleMeta(), sampleTensors()
		if err := Write(p, meta, ts, align); err != nil {
			t.Fatal(err)
		}
		f, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		wantAlign := max(align, 32)
		if f.Version != 3 || f.Alignment != wantAlign || f.DataOffset%int64(wantAlign) != 0 {
			t.Errorf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
		}
		wantMeta := meta
		if align == 64 {
			wantMeta = append(wantMeta, KV{"general.alignment", Uint32(64)})
		}
		if !reflect.DeepEqual(f.Meta, wantMeta) {
			t.Errorf("metadata differs:\n got %v\nwant %v", f.Meta, wantMeta)
		}
		if len(f.Tensors()) != len(ts) {
			t.Fatalf("%d tensors", len(f.Tensors()))
		}
		for i, w := range ts {
			g := f.Tensors()[i]
			if g.Name != w.Name || g.DType != w.DType || !reflect.DeepEqual(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
				t.Errorf("tensor %d: got %s %s%v, want %s %s%v", i, g.Name, g.DType, g.Shape, w.Name, w.DType, w.Shape)
			}
		}
		f.Close()
	}
}

func TestDimsReversed(t *testing.T) {
	var buf bytes.Buffer
	ts := []tensor.Info{{Name: "w", DType: tensor.F32, Shape: []int{3, 2}, Data: make([]byte, 24)}}
	if err := Encode(&buf, nil, ts, 0); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// header 24 + name (8+1) + n_dims 4 -> ne[0] at byte 37 must be the row length 2.
	if nd := binary.LittleEndian.Uint32(b[33:]); nd != 2 {
		t.Fatalf("n_dims %d", nd)
	}
	if ne0, ne1 := binary.LittleEndian.Uint64(b[37:]), binary.LittleEndian.Uint64(b[45:]); ne0 != 2 || ne1 != 3 {
		t.Fatalf("ne = [%d %d], want [2 3]", ne0, ne1)
	}
}

func TestGetters(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, sampleMeta(), nil, 0); err != nil {
		t.Fatal(err)
	}
	f, err := Parse("m.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if s, err := f.GetString("general.architecture"); err != nil || s != "llama" {
		t.Errorf("GetString: %q %v", s, err)
	}
	if n, err := f.GetUint32("llama.block_count"); err != nil || n != 2 {
		t.Errorf("GetUint32: %d %v", n, err)
	}
	for key, want := range map[string]int{"llama.block_count": 2, "i8": -5, "u64": 1 << 40, "i64": -1 << 40, "u16": 60000} {
		if n, err := f.GetInt(key); err != nil || n != want {
			t.Errorf("GetInt(%s) = %d, %v", key, n, err)
		}
	}
	if x, err := f.GetFloat32("llama.rope.freq_base"); err != nil || x != 10000 {
		t.Errorf("GetFloat32: %g %v", x, err)
	}
	if x, err := f.GetFloat("f64"); err != nil || x != math.Pi {
		t.Errorf("GetFloat: %g %v", x, err)
	}
	if b, err := f.GetBool("yes"); err != nil || !b {
		t.Errorf("GetBool: %v %v", b, err)
	}
	if s, err := f.GetStrings("tokenizer.ggml.tokens"); err != nil || len(s) != 4 || s[3] != "ü b" {
		t.Errorf("GetStrings: %q %v", s, err)
	}
	if s, err := f.GetInts("tokenizer.ggml.token_type"); err != nil || !reflect.DeepEqual(s, []int{3, 1, 1, 1}) {
		t.Errorf("GetInts: %v %v", s, err)
	}
	if s, err := f.GetFloats("tokenizer.ggml.scores"); err != nil || s[1] != -1.5 {
		t.Errorf("GetFloats: %v %v", s, err)
	}
	errs := []struct {
		err  error
		want string
	}{
		{second(f.GetString("llama.block_count")), `"llama.block_count": want string, have uint32`},
		{second(f.GetUint32("i32")), `"i32": want uint32, have int32`},
		{second(f.GetInt("general.name")), `want integer, have string`},
		{second(f.GetStrings("tokenizer.ggml.token_type")), `want array[string], have array[int32]`},
		{second(f.GetInts("tokenizer.ggml.tokens")), `have array[string]`},
		{second(f.GetFloat32("missing.key")), `"missing.key" not found`},
		{second(f.GetStrings("nested")), `have array[array[string]]`},
	}
	for _, e := range errs {
		if e.err == nil || !strings.Contains(e.err.Error(), e.want) || !strings.HasPrefix(e.err.Error(), "m.gguf: ") {
			t.Errorf("error %v, want %q", e.err, e.want)
		}
	}
	u64s, _ := f.Get("u64s")
	f.Meta[f.meta["u64s"]].Value = u64s
	if _, err := f.GetInts("u64s"); err == nil {
		t.Error("GetInts accepted 1<<63")
	}
}

func second[T any](_ T, err error) error { return err }

func TestEncodeErrors(t *testing.T) {
	long := strings.Repeat("x", 64)
	cases := []struct {
		meta []KV
		ts   []tensor.Info
		want string
	}{
		{[]KV{{"a", Uint32(1)}, {"a", Uint32(2)}}, nil, "duplicate metadata"},
		{[]KV{{"a", Value{Type: TypeUint32, Data: "x"}}}, nil, "holds Go string"},
		{nil, []tensor.Info{{Name: long, DType: tensor.F32, Shape: []int{1}, Data: make([]byte, 4)}}, "name must be"},
		{nil, []tensor.Info{{Name: "q", DType: tensor.Q8_0, Shape: []int{32, 2}, Data: make([]byte, 68)}}, "row length 2"},
		{nil, []tensor.Info{{Name: "s", DType: tensor.F32, Shape: []int{1, 1, 1, 1, 1}, Data: make([]byte, 4)}}, "5 dimensions"},
		{nil, []tensor.Info{{Name: "s", DType: tensor.F32, Shape: []int{2}, Data: make([]byte, 4)}}, "needs 8 bytes"},
		{[]KV{{"general.alignment", Uint32(48)}}, nil, "power of two"},
		{[]KV{{"general.alignment", Int32(32)}}, nil, "must be a uint32"},
	}
	for _, c := range cases {
		if err := Encode(&bytes.Buffer{}, c.meta, c.ts, 0); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err %v, want %q", err, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, sampleMeta(), sampleTensors(), 0); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	mutate := func(fn func(b []byte) []byte) []byte { return fn(append([]byte(nil), good...)) }
	le := binary.LittleEndian
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"magic", mutate(func(b []byte) []byte { b[0] = 'X'; return b }), "bad magic"},
		{"version 1", mutate(func(b []byte) []byte { le.PutUint32(b[4:], 1); return b }), "unsupported GGUF version 1"},
		{"big-endian", mutate(func(b []byte) []byte { le.PutUint32(b[4:], 3<<24); return b }), "big-endian"},
		{"absurd tensor count", mutate(func(b []byte) []byte { le.PutUint64(b[8:], 1<<60); return b }), "tensor count"},
		{"absurd kv count", mutate(func(b []byte) []byte { le.PutUint64(b[16:], 1<<40); return b }), "metadata count"},
		{"absurd string length", mutate(func(b []byte) []byte { le.PutUint64(b[24:], 1<<62); return b }), "metadata 0 key"},
		{"bad value type", mutate(func(b []byte) []byte { le.PutUint32(b[24+8+20:], 77); return b }), `"general.architecture": unknown value type 77`},
		{"truncated data", good[:len(good)-40], "runs past the end"},
	}
	for _, c := range cases {
		_, err := Parse("bad.gguf", c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "bad.gguf: ") {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
	// Every truncation up to the end of the last tensor fails cleanly, never panics (only
	// the last tensor's padding is optional).
	f, _ := Parse("x", good)
	dataEnd := int(f.DataOffset)
	for i, ti := range f.Tensors() {
		if i == len(f.Tensors())-1 {
			dataEnd += len(ti.Data)
		} else {
			dataEnd += int(pad(uint64(len(ti.Data)), 32))
		}
	}
	for n := 0; n < dataEnd; n++ {
		if _, err := Parse("t", good[:n]); err == nil {
			t.Fatalf("truncated to %d bytes (last tensor ends at %d): no error", n, dataEnd)
		}
	}
	if _, err := Parse("t", good[:dataEnd]); err != nil {
		t.Errorf("file without the final padding: %v", err)
	}
	// Unknown ggml tensor type.
	var b2 bytes.Buffer
	Encode(&b2, nil, []tensor.Info{{Name: "w", DType: tensor.F32, Shape: []int{1}, Data: make([]byte, 4)}}, 0)
	bad := b2.Bytes()
	le.PutUint32(bad[24+8+1+4+8:], 42) // no such ggml type
	if _, err := Parse("t", bad); err == nil || !strings.Contains(err.Error(), `tensor "w": unsupported ggml type id 42`) {
		t.Errorf("unknown tensor type: %v", err)
	}
	le.PutUint32(bad[24+8+1+4+8:], 0)
	le.PutUint64(bad[24+8+1+4+8+4:], 8) // misaligned offset
	if _, err := Parse("t", bad); err == nil || !strings.Contains(err.Error(), "not a multiple of the alignment") {
		t.Errorf("misaligned offset: %v", err)
	}
}

func FuzzOpen(f *testing.F) {
	var buf bytes.Buffer
	Encode(&buf, sampleMeta(), sampleTensors(), 0)
	f.Add(buf.Bytes())
	buf.Reset()
	Encode(&buf, []KV{{"a", Arrays([]Value{Array([]string{"x"})})}}, nil, 0)
	f.Add(buf.Bytes())
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse("fuzz", b)
		if err != nil {
			return
		}
		for _, ti := range file.Tensors() {
			if err := ti.Check(); err != nil {
				t.Fatalf("parsed tensor fails Check: %v", err)
			}
		}
		// What parses re-encodes and parses to the same content.
		var out bytes.Buffer
		if err := Encode(&out, file.Meta, file.Tensors(), 0); err != nil {
			return // e.g. names too long for llama.cpp are readable but not writable
		}
		again, err := Parse("again", out.Bytes())
		if err != nil {
			t.Fatalf("re-encoded file does not parse: %v", err)
		}
		if !reflect.DeepEqual(again.Meta, file.Meta) && !hasNaN(file.Meta) {
			t.Fatalf("metadata changed on re-encode")
		}
		for i, ti := range file.Tensors() {
			g := again.Tensors()[i]
			if g.Name != ti.Name || !bytes.Equal(g.Data, ti.Data) || !reflect.DeepEqual(g.Shape, ti.Shape) {
				t.Fatalf("tensor %q changed on re-encode", ti.Name)
			}
		}
	})
}

func hasNaN(meta []KV) bool {
	for _, kv := range meta {
		switch d := kv.Value.Data.(type) {
		case float32:
			if d != d {
				return true
			}
		case float64:
			if d != d {
				return true
			}
		case []float32, []float64, []Value:
			return true // DeepEqual treats NaN != NaN; skip the check
		}
	}
	return false
}

func TestLimits(t *testing.T) {
	// An array claiming 2^25 uint8 elements in a file that really has that many bytes is
	// still refused: no real metadata array is that long.
	var buf bytes.Buffer
	Encode(&buf, []KV{{"a", Array([]uint8{1})}}, nil, 0)
	b := append(buf.Bytes(), make([]byte, 1<<25)...)
	binary.LittleEndian.PutUint64(b[24+8+1+4+4:], 1<<25)
	if _, err := Parse("big", b); err == nil || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Errorf("huge array: %v", err)
	}
	if _, err := Open(t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
}

// GGUF v2 has the v3 layout for little-endian files; it must read the same.
func TestVersion2(t *testing.T) {
	var buf bytes.Buffer
	if err := Encode(&buf, sampleMeta(), sampleTensors(), 0); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	binary.LittleEndian.PutUint32(b[4:], 2)
	f, err := Parse("v2.gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || len(f.Tensors()) != len(sampleTensors()) || !reflect.DeepEqual(f.Meta, sampleMeta()) {
		t.Errorf("v2: version %d, %d tensors", f.Version, len(f.Tensors()))
	}
}

// A tensor of a type we can size but not dequantize (IQ4_XS) still lets the file open.
func TestSizeOnlyType(t *testing.T) {
	var buf bytes.Buffer
	ts := []tensor.Info{{Name: "w", DType: tensor.IQ4_XS, Shape: []int{2, 256}, Data: make([]byte, 2*136)}}
	if err := Encode(&buf, []KV{{"general.architecture", String("llama")}}, ts, 0); err != nil {
		t.Fatal(err)
	}
	f, err := Parse("iq.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	w, _ := f.Tensor("w")
	if w.DType != tensor.IQ4_XS || len(w.Data) != 272 {
		t.Fatalf("%s %d bytes", w.DType, len(w.Data))
	}
	if err := tensor.Dequantize(w.DType, w.Data, make([]float32, 512)); err == nil || !strings.Contains(err.Error(), "unsupported dtype IQ4_XS") {
		t.Errorf("Dequantize(IQ4_XS): %v", err)
	}
}
