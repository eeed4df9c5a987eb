package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/tensor"
)

// randMat makes a rows×cols matrix of dtype dt with values near N(0,1) and returns it with
// its float64 values as the reference sees them (dequantized by the tensor package, which
// is written independently of the kernels' direct quantized dot products).
func randMat(t testing.TB, rng *rand.Rand, dt tensor.DType, rows, cols int) (Mat, []float64) {
	t.Helper()
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	nb, err := dt.BytesFor(rows * cols)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, nb)
	switch dt {
	case tensor.F32:
		copy(data, tensor.Bytes(src))
	case tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_1:
		if err := tensor.Quantize(dt, src, data); err != nil {
			t.Fatal(err)
		}
	case tensor.Q4_K, tensor.Q5_K, tensor.Q6_K:
		// No quantizer for k-quants: random blocks with small, finite super-block scales.
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		bb := dt.BlockBytes()
		for b := 0; b < len(data); b += bb {
			d := tensor.F32ToF16(float32(0.01 + 0.02*rng.Float64()))
			if dt != tensor.Q6_K { // Q4_K, Q5_K: d and dmin lead the block
				m := tensor.F32ToF16(float32(0.01 * rng.Float64()))
				data[b], data[b+1], data[b+2], data[b+3] = byte(d), byte(d>>8), byte(m), byte(m>>8)
			} else {
				data[b+bb-2], data[b+bb-1] = byte(d), byte(d>>8)
			}
		}
	}
	m, err := NewMat(dt, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	deq := make([]float32, rows*cols)
	if err := tensor.Dequantize(dt, data, deq); err != nil {
		t.Fatal(err)
	}
	ref := make([]float64, len(deq))
	for i, v := range deq {
		ref[i] = float64(v)
	}
	return m, ref
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// checkDot compares a float32 dot product against float64. A float32 sum of n products
// is off by at most about n·2⁻²⁴·Σ|wᵢxᵢ| (Higham's bound); an indexing or scaling bug is off
// by O(Σ|wᵢxᵢ|).
func checkDot(t *testing.T, what string, got float32, w []float64, x []float32) {
	t.Helper()
	var want, abs float64
	for i, wv := range w {
		want += wv * float64(x[i])
		abs += math.Abs(wv * float64(x[i]))
	}
	if tol := float64(len(w)+4) * 0x1p-24 * abs; math.Abs(float64(got)-want) > tol {
		t.Fatalf("%s: got %g, want %g (tolerance %g)", what, got, want, tol)
	}
}

var matDTypes = []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_1, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K}

func shapesFor(dt tensor.DType) [][2]int {
	if dt.BlockSize() == 1 {
		return [][2]int{{1, 1}, {7, 3}, {13, 17}, {5, 67}, {33, 130}}
	}
	bs := dt.BlockSize()
	return [][2]int{{1, bs}, {7, bs}, {13, 3 * bs}, {6, 2 * bs}}
}

func TestMatVecMatMul(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, threads := range []int{1, 3} {
		pool := NewPool(threads)
		s := NewScratch(threads)
		for _, dt := range matDTypes {
			for _, sh := range shapesFor(dt) {
				rows, cols := sh[0], sh[1]
				name := fmt.Sprintf("%v/%dx%d/threads=%d", dt, rows, cols, threads)
				w, ref := randMat(t, rng, dt, rows, cols)
				x := randVec(rng, cols)
				out := make([]float32, rows)
				MatVec(pool, out, &w, x, s)
				for r := range rows {
					checkProduct(t, dt, fmt.Sprintf("MatVec %s row %d", name, r), out[r], ref[r*cols:(r+1)*cols], x, w.Data[r*w.rowBytes:])
				}
				for _, n := range []int{2, 5, 9} {
					xs := randVec(rng, n*cols)
					outs := make([]float32, n*rows)
					MatMul(pool, outs, &w, xs, n, s)
					for tk := range n {
						for r := range rows {
							checkProduct(t, dt, fmt.Sprintf("MatMul %s n=%d token %d row %d", name, n, tk, r),
								outs[tk*rows+r], ref[r*cols:(r+1)*cols], xs[tk*cols:(tk+1)*cols], w.Data[r*w.rowBytes:])
						}
					}
				}
				row := make([]float32, cols)
				if err := w.Row(rows-1, row); err != nil {
					t.Fatal(err)
				}
				for i, v := range row {
					if float64(v) != ref[(rows-1)*cols+i] {
						t.Fatalf("Row %s [%d]: got %g, want %g", name, i, v, ref[(rows-1)*cols+i])
					}
				}
			}
		}
		pool.Close()
	}
}

func TestNewMatErrors(t *testing.T) {
	if _, err := NewMat(tensor.F32, 2, 3, make([]byte, 20)); err == nil {
		t.Error("short data accepted")
	}
	if _, err := NewMat(tensor.Q8_0, 2, 31, make([]byte, 68)); err == nil {
		t.Error("row not a multiple of the block size accepted")
	}
	if _, err := NewMat(tensor.I32, 2, 3, make([]byte, 24)); err == nil {
		t.Error("integer dtype accepted")
	}
}

func TestPoolCoversRange(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for _, n := range []int{1, 2, 5, 12, 13, 100} {
		for _, align := range []int{1, 4} {
			hits := make([]int, n)
			p.Run(n, align, func(worker, lo, hi int) {
				if worker < 0 || worker >= 3 {
					t.Errorf("worker %d", worker)
				}
				if lo%align != 0 {
					t.Errorf("n=%d align=%d: chunk starts at %d", n, align, lo)
				}
				for i := lo; i < hi; i++ {
					hits[i]++ // disjoint chunks: no race
				}
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("n=%d align=%d: index %d done %d times", n, align, i, h)
				}
			}
		}
	}
}

// TestPoolRunChunks: every index is done exactly once, in ranges of at most chunk, by
// workers in [0, Threads()), however the counter hands them out.
func TestPoolRunChunks(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for _, n := range []int{1, 2, 5, 12, 13, 100, 1000} {
		for _, chunk := range []int{1, 4, 16, 2000} {
			hits := make([]int32, n)
			var mu sync.Mutex
			p.RunChunks(n, chunk, func(worker, lo, hi int) {
				if worker < 0 || worker >= 3 || hi-lo > chunk || lo >= hi {
					t.Errorf("n=%d chunk=%d: worker %d range [%d,%d)", n, chunk, worker, lo, hi)
				}
				mu.Lock()
				for i := lo; i < hi; i++ {
					hits[i]++
				}
				mu.Unlock()
			})
			for i, h := range hits {
				if h != 1 {
					t.Fatalf("n=%d chunk=%d: index %d done %d times", n, chunk, i, h)
				}
			}
		}
	}
}

func TestRMSNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 5, 67} {
		x, w := randVec(rng, n), randVec(rng, n)
		out := make([]float32, n)
		RMSNorm(out, x, w, 1e-5)
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		scale := 1 / math.Sqrt(ss/float64(n)+1e-5)
		for i := range x {
			want := float64(x[i]) * scale * float64(w[i])
			if math.Abs(float64(out[i])-want) > 1e-6*(1+math.Abs(want)) {
				t.Fatalf("n=%d [%d]: got %g want %g", n, i, out[i], want)
			}
		}
	}
}

func TestSoftmaxSiLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := randVec(rng, 11)
	x[3] = 80 // exp(80) overflows float32 without the max shift
	orig := append([]float32(nil), x...)
	Softmax(x)
	var den float64
	for _, v := range orig {
		den += math.Exp(float64(v) - 80)
	}
	for i, v := range orig {
		want := math.Exp(float64(v)-80) / den
		if math.Abs(float64(x[i])-want) > 1e-6 {
			t.Fatalf("softmax[%d]: got %g want %g", i, x[i], want)
		}
	}
	g, u := randVec(rng, 9), randVec(rng, 9)
	g0 := append([]float32(nil), g...)
	SiLUMul(g, u)
	for i := range g {
		a := float64(g0[i])
		want := a / (1 + math.Exp(-a)) * float64(u[i])
		if math.Abs(float64(g[i])-want) > 1e-6*(1+math.Abs(want)) {
			t.Fatalf("silu[%d]: got %g want %g", i, g[i], want)
		}
	}
}

// TestRope checks both layouts against a float64 rotation, and that the interleaved layout
// on llama.cpp's permuted rows equals the rotate_half layout on the original rows.
func TestRope(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const d = 10
	freqs := RopeFreqs(d, 10000)
	cos, sin := make([]float32, d/2), make([]float32, d/2)
	for _, pos := range []int{0, 1, 17, 4095} {
		RopeAngles(cos, sin, pos, freqs)
		x := randVec(rng, d)
		half := append([]float32(nil), x...)
		RopeHalf(half, cos, sin)
		for i := range d / 2 {
			a := float64(pos) * math.Pow(10000, -float64(2*i)/d)
			x0, x1 := float64(x[i]), float64(x[i+d/2])
			w0, w1 := x0*math.Cos(a)-x1*math.Sin(a), x0*math.Sin(a)+x1*math.Cos(a)
			if math.Abs(float64(half[i])-w0) > 1e-5 || math.Abs(float64(half[i+d/2])-w1) > 1e-5 {
				t.Fatalf("pos %d pair %d: got %g,%g want %g,%g", pos, i, half[i], half[i+d/2], w0, w1)
			}
		}
		// llama.cpp's converter reorders each head's rows so that HF element i goes to 2i and
		// element i+d/2 to 2i+1.
		perm := make([]float32, d)
		for i := range d / 2 {
			perm[2*i], perm[2*i+1] = x[i], x[i+d/2]
		}
		RopeInterleaved(perm, cos, sin)
		for i := range d / 2 {
			if perm[2*i] != half[i] || perm[2*i+1] != half[i+d/2] {
				t.Fatalf("pos %d pair %d: interleaved %g,%g, rotate_half %g,%g", pos, i, perm[2*i], perm[2*i+1], half[i], half[i+d/2])
			}
		}
	}
}

// TestPoolParksAndWakes exercises both hand-over paths of the spinning pool: calls in quick
// succession (workers still spinning) and calls after a pause longer than spinFor (workers
// parked on their channels), from several goroutines at once (Run serializes them).
func TestPoolParksAndWakes(t *testing.T) {
	p := NewPool(4)
	defer p.Close()
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				if i%10 == g {
					time.Sleep(2 * spinFor)
				}
				n := 7 + i
				hits := make([]int, n)
				p.Run(n, 1, func(worker, lo, hi int) {
					for j := lo; j < hi; j++ {
						hits[j]++
					}
				})
				for j, h := range hits {
					if h != 1 {
						t.Errorf("goroutine %d call %d: index %d done %d times", g, i, j, h)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

// TestMatMulMany: a fused product gives bit-identical results to one product per matrix (the
// same activations, the same row kernels), for matrices whose row counts split unevenly
// across workers, for decode (n=1) and prefill (n=5), and falls back cleanly when the
// matrices' dtypes differ.
func TestMatMulMany(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	pool := NewPool(3)
	defer pool.Close()
	s := NewScratch(pool.Threads())
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_1, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		cols := 64
		if dt.BlockSize() == 256 {
			cols = 512
		}
		var mats []Mat
		for _, rows := range []int{9, 4, 13} {
			m, _ := randMat(t, rng, dt, rows, cols)
			mats = append(mats, m)
		}
		if dt == tensor.Q4_1 { // mixed dtypes take the one-by-one path
			m, _ := randMat(t, rng, tensor.Q8_0, 6, cols)
			mats = append(mats, m)
		}
		for _, n := range []int{1, 5} {
			x := randVec(rng, n*cols)
			var ps []Product
			var want [][]float32
			for i := range mats {
				ps = append(ps, Product{&mats[i], make([]float32, n*mats[i].Rows)})
				w := make([]float32, n*mats[i].Rows)
				MatMul(pool, w, &mats[i], x, n, s)
				want = append(want, w)
			}
			MatMulMany(pool, ps, x, n, s)
			for i, pr := range ps {
				for j := range pr.Out {
					if pr.Out[j] != want[i][j] {
						t.Fatalf("%v n=%d matrix %d [%d]: fused %g, alone %g", dt, n, i, j, pr.Out[j], want[i][j])
					}
				}
			}
		}
	}
}

// RMSNormRowsGGML gives each row RMSNormGGML's bits, for every count of rows around its
// groups of four, values over a wide range.
func TestRMSNormRows(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, d := range []int{1, 8, 576, 1000} {
		w := make([]float32, d)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		for n := 1; n <= 9; n++ {
			x := make([]float32, n*d)
			for i := range x {
				x[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(9)-4)))
			}
			got, want := make([]float32, n*d), make([]float32, n*d)
			RMSNormRowsGGML(got, x, w, 1e-5)
			for row := range n {
				var sum float64
				for _, v := range x[row*d : (row+1)*d] {
					sum += float64(v * v)
				}
				mean := float32(sum / float64(d))
				scale := 1 / float32(math.Sqrt(float64(mean+float32(1e-5))))
				for i, v := range x[row*d : (row+1)*d] {
					want[row*d+i] = v * scale * w[i]
				}
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("d %d rows %d: out[%d] = %v, ggml's formula %v", d, n, i, got[i], want[i])
				}
			}
		}
	}
}

// Add (32 values at a time in the AVX2 assembly, then a Go tail) is y[i] += x[i].
func TestAddTails(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 31, 32, 33, 576, 1000} {
		y, x := make([]float32, n), make([]float32, n)
		for i := range y {
			y[i], x[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		want := make([]float32, n)
		for i := range want {
			want[i] = y[i] + x[i]
		}
		Add(y, x)
		for i := range want {
			if math.Float32bits(y[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n %d: y[%d] = %v, want %v", n, i, y[i], want[i])
			}
		}
	}
}

// BenchmarkRMSNormRows: five rows of SmolLM2's 576, in one call against one call a row.
func BenchmarkRMSNormRows(b *testing.B) {
	const d, n = 576, 5
	x, w, out := make([]float32, n*d), make([]float32, d), make([]float32, n*d)
	for i := range x {
		x[i] = float32(i%31) * 0.1
	}
	for i := range w {
		w[i] = 1
	}
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			RMSNormRowsGGML(out, x, w, 1e-5)
		}
	})
	b.Run("each", func(b *testing.B) {
		for b.Loop() {
			for r := range n {
				RMSNormGGML(out[r*d:(r+1)*d], x[r*d:(r+1)*d], w, 1e-5)
			}
		}
	})
}
