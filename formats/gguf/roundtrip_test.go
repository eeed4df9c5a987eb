package gguf

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/tensor"
)

// HF → GGUF → HF keeps every tensor bit-exact at the same dtype, and the final safetensors
// file is byte-identical to the first.
func TestSafetensorsGGUFRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	dir := t.TempDir()
	var ts []tensor.Info
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		for _, shape := range [][]int{{7, 5}, {3}, {2, 3, 4}, {1, 1, 1, 9}} {
			n := 1
			for _, s := range shape {
				n *= s
			}
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64() * math.Exp(r.NormFloat64()*4))
			}
			x[0] = float32(math.Inf(-1))
			if n > 2 {
				x[1] = float32(math.Copysign(0, -1))
				x[2] = float32(math.NaN())
			}
			size, _ := dt.BytesFor(n)
			b := make([]byte, size)
			if err := tensor.Quantize(dt, x, b); err != nil {
				t.Fatal(err)
			}
			ts = append(ts, tensor.Info{Name: "model.layers." + dt.String() + "." + string(rune('a'+len(shape))) + ".weight", DType: dt, Shape: shape, Data: b})
		}
	}
	st1 := filepath.Join(dir, "a.safetensors")
	if err := safetensors.Write(st1, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	sf, err := safetensors.Open(st1)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	gp := filepath.Join(dir, "m.gguf")
	if err := Write(gp, []KV{{"general.architecture", String("llama")}}, sf.Tensors(), 0); err != nil {
		t.Fatal(err)
	}
	gf, err := Open(gp)
	if err != nil {
		t.Fatal(err)
	}
	defer gf.Close()
	for _, w := range ts {
		g, ok := gf.Tensor(w.Name)
		if !ok || g.DType != w.DType || !reflect.DeepEqual(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
			t.Fatalf("GGUF tensor %s: %s%v differs from %s%v", w.Name, g.DType, g.Shape, w.DType, w.Shape)
		}
	}
	st2 := filepath.Join(dir, "b.safetensors")
	if err := safetensors.Write(st2, gf.Tensors(), map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(st1)
	b, _ := os.ReadFile(st2)
	if !bytes.Equal(a, b) {
		t.Fatal("safetensors → GGUF → safetensors changed the file")
	}
}

// WriteStream (both formats) converts tensor by tensor through one reused buffer and gives
// the same file as Write with every converted tensor in memory.
func TestWriteStream(t *testing.T) {
	dir := t.TempDir()
	src := []tensor.Info{
		{Name: "b", DType: tensor.F32, Shape: []int{2, 4}, Data: tensor.Bytes([]float32{1, 2, 3, 4, 5, 6, 7, 8})},
		{Name: "a", DType: tensor.F32, Shape: []int{3}, Data: tensor.Bytes([]float32{-1, 0.5, 1e-3})},
	}
	conv := make([]tensor.Info, len(src)) // F16 versions, Data left nil for streaming
	full := make([]tensor.Info, len(src)) // F16 versions with Data, for Write
	for i, s := range src {
		conv[i] = tensor.Info{Name: s.Name, DType: tensor.F16, Shape: s.Shape}
		full[i] = conv[i]
		f, _ := tensor.Float32s(s.Data)
		full[i].Data = make([]byte, 2*len(f))
		tensor.Quantize(tensor.F16, f, full[i].Data)
	}
	buf := make([]byte, 64)
	var calls []int
	data := func(i int) ([]byte, error) {
		calls = append(calls, i)
		f, _ := tensor.Float32s(src[i].Data)
		b := buf[:2*len(f)]
		return b, tensor.Quantize(tensor.F16, f, b)
	}
	type writer struct {
		name          string
		stream, whole func(path string) error
	}
	for _, w := range []writer{
		{"gguf", func(p string) error { return WriteStream(p, nil, conv, 0, data) }, func(p string) error { return Write(p, nil, full, 0) }},
		{"safetensors", func(p string) error { return safetensors.WriteStream(p, conv, nil, data) }, func(p string) error { return safetensors.Write(p, full, nil) }},
	} {
		calls = nil
		a, b := filepath.Join(dir, w.name+".stream"), filepath.Join(dir, w.name+".whole")
		if err := w.stream(a); err != nil {
			t.Fatal(err)
		}
		if err := w.whole(b); err != nil {
			t.Fatal(err)
		}
		x, _ := os.ReadFile(a)
		y, _ := os.ReadFile(b)
		if !bytes.Equal(x, y) || len(calls) != 2 {
			t.Errorf("%s: streamed file differs (%d calls)", w.name, len(calls))
		}
	}
	if len(calls) != 2 || calls[0] != 1 {
		t.Errorf("safetensors streams in file order (a before b): calls %v", calls)
	}
	short := func(i int) ([]byte, error) { return make([]byte, 2), nil }
	if err := WriteStream(filepath.Join(dir, "x.gguf"), nil, conv, 0, short); err == nil || !bytes.Contains([]byte(err.Error()), []byte(`tensor "b": F16[2 4] needs 16 bytes, got 2`)) {
		t.Errorf("gguf short data: %v", err)
	}
	if err := safetensors.WriteStream(filepath.Join(dir, "x.st"), conv, nil, short); err == nil || !bytes.Contains([]byte(err.Error()), []byte(`tensor "a": F16[3] needs 6 bytes, got 2`)) {
		t.Errorf("safetensors short data: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.gguf")); !os.IsNotExist(err) {
		t.Error("failed write left a file behind")
	}
}
