package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// gemmRef is C (+)= op(A)·B in float64, the reference for GemmNN/GemmTN: A element (i, kk)
// at a[i·ars+kk·aks].
func gemmRef(m, n, k int, a []float32, ars, aks int, b []float32, ldb int, c []float64, ldc int) {
	for i := range m {
		for j := range n {
			var s float64
			for kk := range k {
				s += float64(a[i*ars+kk*aks]) * float64(b[kk*ldb+j])
			}
			c[i*ldc+j] += s
		}
	}
}

func randF32(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// TestGemmTrain checks GemmNN and GemmTN against the float64 reference on odd shapes (row
// counts that are not multiples of 4, widths with 64-, 16- and scalar-column pieces, k past
// one gemmKC block), with padded strides, accumulating and not, serial and on a pool, under
// every ISA. The bound is float32 rounding of a k-term sum: k·2⁻²⁴ times Σ|a·b|.
func TestGemmTrain(t *testing.T) {
	pool := NewPool(3)
	defer pool.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := [][3]int{{1, 1, 1}, {5, 7, 3}, {4, 16, 9}, {13, 83, 300}, {9, 64, 513}, {64, 150, 40}, {3, 200, 20}}
	for _, i := range SupportedISAs() {
		withISA(t, i, func() {
			for _, sh := range shapes {
				m, n, k := sh[0], sh[1], sh[2]
				for _, tn := range []bool{false, true} {
					for _, acc := range []bool{false, true} {
						for _, p := range []*Pool{nil, pool} {
							lda, ldb, ldc := k+3, n+5, n+2
							ars, aks := lda, 1
							la := m * lda
							if tn {
								lda = m + 3
								ars, aks, la = 1, lda, k*lda
							}
							a, b, c := randF32(rng, la), randF32(rng, k*ldb), randF32(rng, m*ldc)
							want := make([]float64, len(c))
							for x := range c {
								if acc || x%ldc >= n {
									want[x] = float64(c[x])
								}
							}
							gemmRef(m, n, k, a, ars, aks, b, ldb, want, ldc)
							absA, absB := make([]float32, len(a)), make([]float32, len(b))
							for x := range a {
								absA[x] = float32(math.Abs(float64(a[x])))
							}
							for x := range b {
								absB[x] = float32(math.Abs(float64(b[x])))
							}
							abs := make([]float64, len(c))
							gemmRef(m, n, k, absA, ars, aks, absB, ldb, abs, ldc)
							name := fmt.Sprintf("%v/%dx%dx%d/tn=%v/acc=%v/pool=%v", i, m, n, k, tn, acc, p != nil)
							if tn {
								GemmTN(p, m, n, k, a, lda, b, ldb, c, ldc, acc)
							} else {
								GemmNN(p, m, n, k, a, lda, b, ldb, c, ldc, acc)
							}
							for x := range c {
								tol := 1e-5 + float64(k+2)*0x1p-24*(abs[x]+math.Abs(want[x]))
								if d := math.Abs(float64(c[x]) - want[x]); d > tol {
									t.Fatalf("%s: c[%d,%d] = %g, want %g", name, x/ldc, x%ldc, c[x], want[x])
								}
							}
						}
					}
				}
			}
		})
	}
}

// TestGemmTrainThreads: the result does not depend on the pool's size (same bits).
func TestGemmTrainThreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m, n, k := 37, 600, 700
	a, b := randF32(rng, m*k), randF32(rng, k*n)
	var first []float32
	for _, threads := range []int{1, 2, 3} {
		p := NewPool(threads)
		c := make([]float32, m*n)
		GemmNN(p, m, n, k, a, k, b, n, c, n, false)
		p.Close()
		if first == nil {
			first = c
			continue
		}
		for x := range c {
			if c[x] != first[x] {
				t.Fatalf("threads %d: c[%d] = %g, with 1 thread %g", threads, x, c[x], first[x])
			}
		}
	}
}

// TestGemmCheck: a too-short slice panics with the shapes, not an index error.
func TestGemmCheck(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || fmt.Sprint(r)[:14] != "kernels.GemmNN" {
			t.Fatalf("recovered %v, want a kernels.GemmNN shape panic", r)
		}
	}()
	GemmNN(nil, 4, 4, 4, make([]float32, 15), 4, make([]float32, 16), 4, make([]float32, 16), 4, false)
}

// BenchmarkGemmTrain times the backward products of SmolLM2-135M's MLP over 256 tokens
// (dX = dY·W with W 1536×576, dW += dYᵀ·X) under each ISA, on one and two threads:
//
//	go test ./kernels -run '^$' -bench GemmTrain
func BenchmarkGemmTrain(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	const tok, rows, cols = 256, 1536, 576
	dy, w, x := randF32(rng, tok*rows), randF32(rng, rows*cols), randF32(rng, tok*cols)
	dx, dw := make([]float32, tok*cols), make([]float32, rows*cols)
	for _, i := range []ISA{BestISA(), ISAGo} {
		for _, threads := range []int{1, 2} {
			p := NewPool(threads)
			for _, tn := range []bool{false, true} {
				name := fmt.Sprintf("%v/threads=%d/dX", i, threads)
				if tn {
					name = fmt.Sprintf("%v/threads=%d/dW", i, threads)
				}
				b.Run(name, func(b *testing.B) {
					prev, _ := SetISA(i)
					defer SetISA(prev)
					for range b.N {
						if tn {
							GemmTN(p, rows, cols, tok, dy, rows, x, cols, dw, cols, true)
						} else {
							GemmNN(p, tok, cols, rows, dy, rows, w, cols, dx, cols, false)
						}
					}
					b.ReportMetric(2*tok*rows*cols*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
			p.Close()
		}
	}
}
