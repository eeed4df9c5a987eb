package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/tensor"
)

// BenchmarkKQuantTile: Q6_K's and Q4_K's prompt products on the AMX tile (tile) against the
// 512-bit rows kernels alone (rows), GGMLAMX's arithmetic, two threads, alternating in one
// process; medians in µs, and the tile's multiply-adds per second and core. Where the CPU or
// the kernel has no AMX tile both sides are the rows kernels.
//
//	GOEXPERIMENT=simd go test ./kernels -run '^$' -bench KQuantTile -benchtime 8x
func BenchmarkKQuantTile(b *testing.B) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAMX))
	for _, dt := range []tensor.DType{tensor.Q6_K, tensor.Q4_K} {
		for _, sh := range [][2]int{{8192, 2048}, {2048, 8192}, {1024, 3072}} { // Llama-3.2-1B gate/up, down; Qwen3-0.6B down
			for _, n := range []int{16, 32, 128, 512} {
				b.Run(fmt.Sprintf("%v/%dx%d/n=%d", dt, sh[0], sh[1], n), func(b *testing.B) {
					m := benchMat(b, dt, sh[0], sh[1])
					x := randVec(rand.New(rand.NewPCG(5, 6)), n*sh[1])
					p := NewPool(2)
					defer p.Close()
					s := NewScratch(2)
					out := make([]float32, n*sh[0])
					defer SetAMX(SetAMX(true))
					var times [2][]time.Duration
					for b.Loop() {
						for k := range 2 {
							SetAMX(k == 1)
							t0 := time.Now()
							MatMul(p, out, &m, x, n, s)
							times[k] = append(times[k], time.Since(t0))
						}
					}
					b.ReportMetric(medianMicros(times[0]), "rows-µs")
					b.ReportMetric(medianMicros(times[1]), "tile-µs")
					b.ReportMetric(float64(sh[0]*sh[1]*n)/medianMicros(times[1])/1e3/2, "tile-GMAC/s/core")
				})
			}
		}
	}
}
