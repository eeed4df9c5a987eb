package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// TestKQuantRowsEveryISA: the k-quant products (Q4_K, Q5_K, Q6_K) give the Go reference's
// bits (dotQ4_KAct, dotQ5_KAct, dotQ6_KAct) under every ISA, on row counts that are not a
// multiple of the kernels' row blocks, token counts on both sides of a kernel call's
// kqTokens, and row lengths of 1 to 12 super-blocks; and each value is the exact product
// of the dequantized weights and the Q8_K activations within float32 rounding.
func TestKQuantRowsEveryISA(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for _, isa := range SupportedISAs() {
		prev, err := SetISA(isa)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
			for _, shape := range [][2]int{{37, 256}, {5, 768}, {19, 3072}} {
				rows, cols := shape[0], shape[1]
				w, deq := randMat(t, rng, dt, rows, cols)
				decoded := map[int]bool{}
				for _, n := range []int{1, 1, 3, 3, 7, 7, 8, 9, 17, 17} {
					// 1, 3, 7 and 17 tokens twice: the second time laid out for the decode
					// and few-token kernels (prepDecode, as a product does where they take it), the
					// first for the row kernels.
					dec := decoded[n]
					decoded[n] = true
					t.Run(fmt.Sprintf("%v/%v/%dx%d/n%d/dec=%v", isa, dt, rows, cols, n, dec), func(t *testing.T) {
						x := randVec(rng, n*cols)
						var a qactK
						a.quantize(x)
						if dec {
							a.prepDecode()
						}
						got := make([]float32, n*rows)
						ran := asmKQuantRows(got, &w, &a, n, 0, rows)
						if want := isa != ISAGo && pathSwitches()["asmF16C"]; ran != want {
							t.Fatalf("assembly ran: %v, want %v", ran, want)
						}
						if !ran {
							kQuantRows(got, &w, &a, n, 0, rows)
						}
						nb := cols / 256
						for tk := range n {
							d, q, bs := a.d[tk*nb:(tk+1)*nb], a.q[tk*nb*256:(tk+1)*nb*256], a.bsums[tk*nb*16:(tk+1)*nb*16]
							for r := range rows {
								row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
								var want float32
								switch dt {
								case tensor.Q4_K:
									want = dotQ4_KAct(row, d, q, bs)
								case tensor.Q5_K:
									want = dotQ5_KAct(row, d, q, bs)
								default:
									want = dotQ6_KAct(row, d, q, bs)
								}
								g := got[tk*rows+r]
								if math.Float32bits(g) != math.Float32bits(want) {
									t.Fatalf("token %d row %d: %g (%#x), Go reference %g (%#x)", tk, r, g, math.Float32bits(g), want, math.Float32bits(want))
								}
								checkProduct(t, dt, fmt.Sprintf("token %d row %d", tk, r), g, deq[r*cols:(r+1)*cols], x[tk*cols:(tk+1)*cols], row)
							}
						}
					})
				}
			}
		}
		if _, err := SetISA(prev); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkKQuant: one 3072×1024 matrix (Qwen3-0.6B's gate) times 1 token (decode; MB/s is
// weight bytes per second) and 128 tokens (prefill; the GMAC/s metric), two workers, for the
// k-quants beside Q8_0.
//
//	GOEXPERIMENT=simd go test ./kernels -run '^$' -bench KQuant
func BenchmarkKQuant(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	p := NewPool(2)
	defer p.Close()
	s := NewScratch(p.Threads())
	const rows, cols = 3072, 1024
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		w, _ := randMat(b, rng, dt, rows, cols)
		for _, n := range []int{1, 128} {
			x := randVec(rng, n*cols)
			out := make([]float32, n*rows)
			b.Run(fmt.Sprintf("%v/n%d", dt, n), func(b *testing.B) {
				b.SetBytes(int64(len(w.Data)))
				for b.Loop() {
					MatMul(p, out, &w, x, n, s)
				}
				b.ReportMetric(float64(rows*cols*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
			})
		}
	}
}

// TestKQuantRowsAllocate: a k-quant product allocates nothing per call (its accumulators
// once escaped to the heap through a func value, and the collector took half a decode step).
func TestKQuantRowsAllocate(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		w, _ := randMat(t, rng, dt, 64, 512)
		x := randVec(rng, 9*512)
		var a qactK
		a.quantize(x)
		out := make([]float32, 9*64)
		if n := testing.AllocsPerRun(10, func() { kQuantRows(out, &w, &a, 9, 0, 64) }); n != 0 {
			t.Errorf("%v: %v allocations per product", dt, n)
		}
	}
}
