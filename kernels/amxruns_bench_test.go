package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/tensor"
)

// BenchmarkAMXRowsRuns: prefill products in GGMLAMX's rows kernels with the repack taken in
// runs of amxRowsRunBytes through all the tokens, against no runs (each eight-token call
// streaming all of a worker's rows), alternating in one process; medians in µs per run size
// (KiB, 0: none). Q4_K runs with the AMX tile off, so that the rows kernels take it too.
//
//	GOEXPERIMENT=simd go test ./kernels -run '^$' -bench AMXRowsRuns -benchtime 10x
func BenchmarkAMXRowsRuns(b *testing.B) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAMX))
	defer SetAMX(SetAMX(false))
	sizes := []int{0, 256, 1024}
	cases := []struct {
		dt         tensor.DType
		rows, cols int
	}{
		{tensor.Q6_K, 2048, 8192}, {tensor.Q6_K, 8192, 2048}, {tensor.Q6_K, 1024, 3072}, // Llama-3.2-1B down, gate/up; Qwen3-0.6B down
		{tensor.Q4_K, 8192, 2048}, {tensor.Q5_K, 8192, 2048},
		{tensor.Q4_1, 1536, 576}, {tensor.Q8_0, 8192, 2048},
	}
	for _, c := range cases {
		var m *Mat
		for _, n := range []int{128, 512} {
			b.Run(fmt.Sprintf("%v/%dx%d/t=2/n=%d", c.dt, c.rows, c.cols, n), func(b *testing.B) {
				if m == nil {
					mm := benchMat(b, c.dt, c.rows, c.cols)
					m = &mm
				}
				x := randVec(rand.New(rand.NewPCG(5, 6)), n*c.cols)
				p := NewPool(2)
				defer p.Close()
				s := NewScratch(2)
				out := make([]float32, n*c.rows)
				was := amxRowsRunBytes
				defer func() { amxRowsRunBytes = was }()
				times := make([][]time.Duration, len(sizes))
				for b.Loop() {
					for k, kb := range sizes {
						amxRowsRunBytes = kb << 10
						t0 := time.Now()
						MatMul(p, out, m, x, n, s)
						times[k] = append(times[k], time.Since(t0))
					}
				}
				for k, kb := range sizes {
					b.ReportMetric(medianMicros(times[k]), fmt.Sprintf("%dK-µs", kb))
				}
			})
		}
	}
}
