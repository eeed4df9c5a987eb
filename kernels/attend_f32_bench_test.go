package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkAttendF32 is one query head of SmolLM2's shape (head dim 64, 3 KV heads) over
// n cached positions of an f32 cache: the attention a decode or verify step does per head.
// asm=false: the archsimd passes instead of the assembly (the same bits).
func BenchmarkAttendF32(b *testing.B) {
	const hd, kvDim = 64, 192
	for _, c := range []struct {
		n   int
		asm bool
	}{{64, true}, {64, false}, {256, true}, {256, false}, {1024, true}, {1024, false}} {
		n := c.n
		b.Run(fmt.Sprintf("%d/asm=%v", n, c.asm), func(b *testing.B) {
			defer attnAsmSwitch(attnAsmSwitch(c.asm))
			r := rand.New(rand.NewPCG(1, 2))
			k, v := make([]float32, n*kvDim), make([]float32, n*kvDim)
			for i := range k {
				k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			q, out := make([]float32, hd), make([]float32, hd)
			for i := range q {
				q[i] = float32(r.NormFloat64())
			}
			rows := make([]int32, n)
			for i := range rows {
				rows[i] = int32(i)
			}
			scores := make([]float32, n)
			b.ResetTimer()
			for range b.N {
				AttendF32(out, q, k, v, rows, hd, kvDim, 0.125, scores)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/position")
		})
	}
}

// BenchmarkAttendF32Shared is the queries of one KV head of SmolLM2's shape over n cached
// positions: three (one token's query heads) or fifteen (a five-token verify pass, whose
// tokens attend n..n+4 rows), through AttendF32Shared (shared) or one AttendF32 call each
// (alone). ns/position is per query and position.
func BenchmarkAttendF32Shared(b *testing.B) {
	const hd, kvDim = 64, 192
	for _, tokens := range []int{1, 5} {
		for _, n := range []int{256, 1024} {
			for _, shared := range []bool{true, false} {
				b.Run(fmt.Sprintf("queries=%d/n=%d/shared=%v", 3*tokens, n, shared), func(b *testing.B) {
					r := rand.New(rand.NewPCG(1, 2))
					m := n + tokens
					k, v := make([]float32, m*kvDim), make([]float32, m*kvDim)
					for i := range k {
						k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
					}
					nq := 3 * tokens
					qs, outs, ns := make([][]float32, nq), make([][]float32, nq), make([]int, nq)
					for i := range qs {
						qs[i], outs[i] = make([]float32, hd), make([]float32, hd)
						for d := range qs[i] {
							qs[i][d] = float32(r.NormFloat64())
						}
						ns[i] = n + i/3 + 1
					}
					rows := make([]int32, m)
					for i := range rows {
						rows[i] = int32(i)
					}
					scratch := make([]float32, nq*(m+hd))
					b.ResetTimer()
					for range b.N {
						if shared {
							AttendF32Shared(outs, qs, ns, k, v, rows, hd, kvDim, 0.125, scratch)
							continue
						}
						for i := range qs {
							AttendF32(outs[i], qs[i], k, v, rows[:ns[i]], hd, kvDim, 0.125, scratch)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(nq*n), "ns/position")
				})
			}
		}
	}
}
