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
