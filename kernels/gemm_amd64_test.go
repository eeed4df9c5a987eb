//go:build amd64

package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// TestAsmDotQ8_0 compares the assembly Q8_0 row kernel with the plain-Go one (the same
// lane arithmetic) on rows whose block scales include f16 subnormals, bit for bit.
func TestAsmDotQ8_0(t *testing.T) {
	if !useAsmQ8 {
		t.Skip("no AVX2/FMA/F16C")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const cols = 32 * 13
	for r := range 500 {
		row := make([]byte, cols/32*34)
		for b := 0; b < len(row); b += 34 {
			scale := float32(rng.ExpFloat64() * 0.01)
			if r%3 == 0 {
				scale *= 1e-3 // subnormal in f16
			}
			h := tensor.F32ToF16(scale)
			row[b], row[b+1] = byte(h), byte(h>>8)
			for i := range 32 {
				row[b+2+i] = byte(int8(rng.IntN(255) - 127))
			}
		}
		var a qact
		a.quantize(randVec(rng, cols), false)
		got, ok := asmDotQ8_0(row, a.d8, a.q)
		if !ok {
			t.Fatal("assembly kernel did not run")
		}
		if want := dotQ8_0Act(row, a.d, a.q); got != want {
			t.Fatalf("row %d: assembly %g, Go %g", r, got, want)
		}
	}
}

// TestAsmDotF16BothOrders: the F16C key-dot gives dotF16Lanes' bits in both of ggml's lane
// orders (AVX-512 and AVX2 builds), tails included.
func TestAsmDotF16BothOrders(t *testing.T) {
	if !useAsmQ8 {
		t.Skip("no AVX2/FMA/F16C")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{32, 64, 100, 128, 200} {
		q, k := make([]float32, n), make([]uint16, n)
		for i := range q {
			q[i] = tensor.F16ToF32(tensor.F32ToF16(float32(rng.NormFloat64())))
			k[i] = tensor.F32ToF16(float32(rng.NormFloat64() * 1e-3))
		}
		for _, lanes16 := range []bool{false, true} {
			got, ok := asmDotF16(q, k, lanes16)
			if !ok {
				if n >= 64 || (!lanes16 && n >= 32) {
					t.Fatalf("n=%d lanes16=%v: assembly did not run", n, lanes16)
				}
				continue
			}
			if want := dotF16Lanes(q, k, lanes16); got != want {
				t.Fatalf("n=%d lanes16=%v: assembly %g, Go %g", n, lanes16, got, want)
			}
		}
	}
}
