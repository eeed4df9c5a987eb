package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// BenchmarkSmallN: the quantized products of a few tokens (a speculative verify pass of k
// drafts is n = k+1 tokens) on the matrices of SmolLM2-135M and Qwen3-0.6B, single-threaded
// and with a pool of two. A product that loads each weight block once for all n tokens costs
// little more at n = 4 than at n = 1 (decode is bound by the weight reads); one that
// re-reads or recomputes per token costs ~n times. Each case runs with the small-n kernels
// (new) and without them (old) back to back, so the two are measured in the same sitting:
//
//	go test ./kernels -run '^$' -bench 'SmallN/Q8_0/576x576' -benchtime 200ms
//	scripts/smalln-table.sh < bench.txt   (time per pass as a multiple of n = 1)
func BenchmarkSmallN(b *testing.B) {
	shapes := [][2]int{ // rows × cols
		{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}, // SmolLM2-135M: q/o, gate/up, down, head
		{2048, 1024}, {1024, 2048}, {3072, 1024}, {1024, 3072}, // Qwen3-0.6B: q, o, gate/up, down
	}
	ns := []int{1, 2, 3, 4, 5, 8, 16}
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_1} {
		for _, sh := range shapes {
			rows, cols := sh[0], sh[1]
			var m *Mat
			mat := func(b *testing.B) *Mat {
				if m == nil {
					mm := benchMat(b, dt, rows, cols)
					m = &mm
				}
				return m
			}
			x := randVec(rand.New(rand.NewPCG(5, 6)), 16*cols)
			for _, threads := range []int{1, 2} {
				for _, n := range ns {
					for _, kern := range []string{"old", "new"} {
						name := fmt.Sprintf("%v/%dx%d/t=%d/n=%d/%s", dt, rows, cols, threads, n, kern)
						b.Run(name, func(b *testing.B) {
							w := mat(b)
							defer setSmallN(setSmallN(kern == "new"))
							p := NewPool(threads)
							defer p.Close()
							s := NewScratch(threads)
							out := make([]float32, n*rows)
							b.SetBytes(int64(len(w.Data)))
							for b.Loop() {
								MatMul(p, out, w, x[:n*cols], n, s)
							}
						})
					}
				}
			}
		}
	}
}
