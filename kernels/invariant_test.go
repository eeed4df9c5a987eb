package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// withBatchInvariant runs f with the batch-invariant mode set to on, then puts it back.
func withBatchInvariant(on bool, f func()) {
	defer SetBatchInvariant(SetBatchInvariant(on))
	f()
}

// invariantShapes are rows × cols for dt: rows around the four-row groups and the
// 64-row decode chunks, columns around the kernels' vector widths (8, 16, 64), the
// AVX-512 tile's 1024-column chunks, and odd lengths with tails.
func invariantShapes(dt tensor.DType) [][2]int {
	if bs := dt.BlockSize(); bs > 1 {
		// 96 rows: a multiple of 32, so GGMLAMX's kernels take the quantized dtypes.
		return [][2]int{{1, bs}, {7, 3 * bs}, {70, 4 * bs}, {131, (1088 + bs - 1) / bs * bs}, {96, 2 * max(bs, 32)}}
	}
	return [][2]int{{1, 1}, {3, 7}, {5, 17}, {6, 48}, {13, 100}, {70, 512}, {67, 1040}, {9, 2064}, {131, 320}}
}

// TestBatchInvariant: with the batch-invariant mode on, every row of MatMul for n tokens
// has the bits of MatVec of that token alone (and of MatMulMany's fused product), for every
// weight dtype, under every ISA and every ggml build, with one and with three workers.
func TestBatchInvariant(t *testing.T) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAVX2))
	rng := rand.New(rand.NewPCG(23, 24))
	for _, build := range []GGMLBuild{GGMLAVX2, GGMLAVX512, GGMLAMX} {
		SetGGMLBuild(build)
		for _, threads := range []int{1, 3} {
			pool := NewPool(threads)
			defer pool.Close()
			s := NewScratch(threads)
			for _, dt := range matDTypes {
				for _, sh := range invariantShapes(dt) {
					rows, cols := sh[0], sh[1]
					w, _ := randMat(t, rng, dt, rows, cols)
					w2, _ := randMat(t, rng, dt, rows+5, cols)
					const maxN = 33
					x := randVec(rng, maxN*cols)
					for _, i := range SupportedISAs() {
						name := fmt.Sprintf("%v build/%d threads/%v/%v/%dx%d", build, threads, i, dt, rows, cols)
						withISA(t, i, func() {
							withBatchInvariant(true, func() {
								checkInvariant(t, name, pool, s, &w, &w2, x, maxN)
							})
						})
					}
				}
			}
		}
	}
}

func checkInvariant(t *testing.T, name string, pool *Pool, s *Scratch, w, w2 *Mat, x []float32, maxN int) {
	t.Helper()
	cols := w.Cols
	alone := make([]float32, maxN*w.Rows)
	alone2 := make([]float32, maxN*w2.Rows)
	for tk := range maxN {
		xt := x[tk*cols : (tk+1)*cols]
		MatVec(pool, alone[tk*w.Rows:(tk+1)*w.Rows], w, xt, s)
		MatMulMany(pool, []Product{{W: w2, Out: alone2[tk*w2.Rows : (tk+1)*w2.Rows]}, {W: w, Out: make([]float32, w.Rows)}}, xt, 1, s)
	}
	for _, n := range []int{2, 3, 4, 5, 7, 16, 17, maxN} {
		for _, t0 := range []int{0, maxN - n} { // the same tokens at other places of the batch
			out := make([]float32, n*w.Rows)
			MatMul(pool, out, w, x[t0*cols:(t0+n)*cols], n, s)
			out2 := make([]float32, n*w2.Rows)
			MatMulMany(pool, []Product{{W: w, Out: make([]float32, n*w.Rows)}, {W: w2, Out: out2}}, x[t0*cols:(t0+n)*cols], n, s)
			for tk := range n {
				for r := range w.Rows {
					got, want := out[tk*w.Rows+r], alone[(t0+tk)*w.Rows+r]
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%s: MatMul n=%d, token %d row %d: %g, alone %g", name, n, t0+tk, r, got, want)
					}
				}
				for r := range w2.Rows {
					got, want := out2[tk*w2.Rows+r], alone2[(t0+tk)*w2.Rows+r]
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("%s: MatMulMany n=%d, token %d row %d of the second matrix: %g, alone %g", name, n, t0+tk, r, got, want)
					}
				}
			}
		}
	}
}
