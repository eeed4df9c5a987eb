//go:build goexperiment.simd && amd64

package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// TestAsmTileMatchesArchsimd: the assembly tile and the archsimd tile do the same lane
// arithmetic, so the batched product gives the same bits on either path (column counts
// with and without a tail of fewer than eight).
func TestAsmTileMatchesArchsimd(t *testing.T) {
	if !useAsmGEMM || !useSIMD {
		t.Skip("no AVX2/FMA")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, cols := range []int{8, 67, 576} {
		const n, rows = 6, 4
		w, x := randVec(rng, 4*cols), randVec(rng, n*cols)
		a, b := make([]float32, n*rows), make([]float32, n*rows)
		if got := asmPairs(a, w, x, n, cols, rows, 0); got != n {
			t.Fatalf("asmPairs did %d of %d tokens", got, n)
		}
		simdBlock4(b, w, x, n, cols, rows, 0)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("cols %d [%d]: assembly %g, archsimd %g", cols, i, a[i], b[i])
			}
		}
	}
}

// TestAsmF16MatchesArchsimd: f16 rows times x give the same bits with the F16C assembly
// and with the archsimd widening, and so does the row widening of the batched product.
func TestAsmF16MatchesArchsimd(t *testing.T) {
	if !useAsmQ8 || !useSIMD {
		t.Skip("no AVX2/FMA/F16C")
	}
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{8, 77, 1024} {
		w := make([]uint16, 4*n)
		for i := range w {
			w[i] = tensor.F32ToF16(float32(rng.NormFloat64() * 0.05))
		}
		x := randVec(rng, n)
		var a, b [4]float32
		a[0], a[1], a[2], a[3] = dot4U16x8(w, n, x, true)
		useAsmQ8 = false
		b[0], b[1], b[2], b[3] = dot4U16x8(w, n, x, true)
		wb := make([]float32, n)
		simdWidenRow(wb, w[:n], true)
		useAsmQ8 = true
		wa := make([]float32, n)
		simdWidenRow(wa, w[:n], true)
		if a != b {
			t.Fatalf("n=%d: assembly %v, archsimd %v", n, a, b)
		}
		for i := range wa {
			if wa[i] != wb[i] {
				t.Fatalf("n=%d widen [%d]: assembly %g, archsimd %g", n, i, wa[i], wb[i])
			}
		}
	}
}
