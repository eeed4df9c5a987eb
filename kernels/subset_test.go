package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMatVecSubsetEqualsMatVec: the rows MatVecSubset computes have MatVec's bits and every
// MatMul token's (the verify pass's logits), under every ISA, with the batch-invariant mode
// on and off, and every other row is -Inf; under the build this CPU defaults to and under
// GGMLAMX (whose kernels compute 16-row groups: the 64-row matrices).
func TestMatVecSubsetEqualsMatVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	defer SetGGMLBuild(SetGGMLBuild(CurrentGGMLBuild()))
	for _, build := range []GGMLBuild{CurrentGGMLBuild(), GGMLAMX} {
		SetGGMLBuild(build)
		for _, isa := range SupportedISAs() {
			prev, err := SetISA(isa)
			if err != nil {
				t.Fatal(err)
			}
			for _, inv := range []bool{true, false} {
				prevInv := SetBatchInvariant(inv)
				for _, threads := range []int{1, 2} {
					pool := NewPool(threads)
					s := NewScratch(threads)
					for _, dt := range matDTypes {
						bs := dt.BlockSize()
						cols := 2 * max(bs, 32)
						for _, rows := range []int{1, 6, 37, 64, 517} {
							w, _ := randMat(t, rng, dt, rows, cols)
							n := 3
							xs := randVec(rng, n*cols)
							batched := make([]float32, n*rows)
							MatMul(pool, batched, &w, xs, n, s)
							for _, density := range []float64{0, 0.01, 0.3, 1} {
								var ids []int32
								for r := range rows {
									if rng.Float64() < density {
										ids = append(ids, int32(r))
									}
								}
								name := fmt.Sprintf("%v/%v/invariant=%v/threads=%d/%v/%dx%d/%d rows", build, isa, inv, threads, dt, rows, cols, len(ids))
								for tk := range n {
									x := xs[tk*cols : (tk+1)*cols]
									full := make([]float32, rows)
									MatVec(pool, full, &w, x, s)
									got := make([]float32, rows)
									for i := range got {
										got[i] = float32(rng.NormFloat64()) // garbage to overwrite
									}
									MatVecSubset(pool, got, &w, x, ids, s)
									k := 0
									for r := range rows {
										if k < len(ids) && int(ids[k]) == r {
											k++
											if math.Float32bits(got[r]) != math.Float32bits(full[r]) {
												t.Fatalf("%s token %d row %d: subset %v, MatVec %v", name, tk, r, got[r], full[r])
											}
											if inv && math.Float32bits(got[r]) != math.Float32bits(batched[tk*rows+r]) {
												t.Fatalf("%s token %d row %d: subset %v, MatMul %v", name, tk, r, got[r], batched[tk*rows+r])
											}
										} else if !math.IsInf(float64(got[r]), -1) {
											t.Fatalf("%s token %d row %d not allowed: %v, want -Inf", name, tk, r, got[r])
										}
									}
								}
							}
						}
					}
					pool.Close()
				}
				SetBatchInvariant(prevInv)
			}
			if _, err := SetISA(prev); err != nil {
				t.Fatal(err)
			}
		}
	}
}
