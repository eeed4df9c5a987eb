//go:build goexperiment.simd && amd64

package kernels

import (
	"math/rand/v2"
	"testing"
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
