package kernels

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/tensor"
)

// BenchmarkSmallN: the quantized products of a few tokens (a speculative verify pass of k
// drafts is n = k+1 tokens) on the matrices of SmolLM2-135M and Qwen3-0.6B, single-threaded
// (t=1) and with a pool of two (t=2). A product that loads each weight block once for all n
// tokens costs little more at n = 4 than at n = 1 (decode is bound by the weight reads); one
// that re-reads or recomputes per token costs ~n times. Every iteration runs the product
// without the small-n kernels (old) and then with them (new), and the benchmark reports the
// median of each in µs, so the two are compared in the same moments of a shared machine:
//
//	go test ./kernels -run '^$' -bench 'SmallN/Q8_0/576x576' -benchtime 50x
func BenchmarkSmallN(b *testing.B) {
	shapes := [][2]int{ // rows × cols
		{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}, // SmolLM2-135M: q/o, gate/up, down, head
		{2048, 1024}, {1024, 2048}, {3072, 1024}, {1024, 3072}, // Qwen3-0.6B: q, o, gate/up, down
	}
	ns := []int{1, 2, 3, 4, 5, 8, 16}
	// F16 and BF16 have no small-n kernels (old and new are the same path): they are here
	// to show what their products of a few tokens cost against one.
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_1, tensor.F16, tensor.BF16} {
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
					b.Run(fmt.Sprintf("%v/%dx%d/t=%d/n=%d", dt, rows, cols, threads, n), func(b *testing.B) {
						w := mat(b)
						defer setSmallN(setSmallN(true))
						p := NewPool(threads)
						defer p.Close()
						s := NewScratch(threads)
						out := make([]float32, n*rows)
						var times [2][]time.Duration
						for b.Loop() {
							for k := range 2 {
								setSmallN(k == 1)
								t0 := time.Now()
								MatMul(p, out, w, x[:n*cols], n, s)
								times[k] = append(times[k], time.Since(t0))
							}
						}
						b.ReportMetric(medianMicros(times[0]), "old-µs")
						b.ReportMetric(medianMicros(times[1]), "new-µs")
					})
				}
			}
		}
	}
}

// medianMicros is the median of ts in microseconds.
func medianMicros(ts []time.Duration) float64 {
	ts = slices.Clone(ts)
	slices.Sort(ts)
	return float64(ts[len(ts)/2].Nanoseconds()) / 1e3
}
