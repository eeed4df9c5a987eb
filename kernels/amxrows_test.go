package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// TestQ6KAMX: under GGMLAMX, q6Value reads ggml's Q6_K layout (each element, less 32, times
// d_w and its sub-block's scale, is what tensor.Dequantize gives); dotQ6_KAMX is one exact
// integer per super-block (checked against the sum computed from those dequantized values in
// float64, within its rounding); and the rows-interleaved kernels give every row and token
// dotQ6_KAMX's bits for 1 to 17 tokens, row ranges that cut 16-row groups, and rows of random
// bytes beside randMat's, under every ISA this CPU runs (the kernels where AVX-512 VNNI is
// on, the reference elsewhere). A matrix whose row count is not a multiple of 32 keeps the
// AVX-512 build's arithmetic (dotQ6_KAct).
func TestQ6KAMX(t *testing.T) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAMX))
	rng := rand.New(rand.NewPCG(45, 46))
	for _, sh := range []struct{ rows, cols int }{{32, 256}, {64, 512}, {96, 256 * 5}, {40, 256}} {
		w, _ := randMat(t, rng, tensor.Q6_K, sh.rows, sh.cols)
		for r := 1; r < sh.rows; r += 3 { // random scales and d of any size too
			row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
			for b := 0; b < len(row); b += 210 {
				for j := 192; j < 208; j++ {
					row[b+j] = byte(rng.IntN(256))
				}
				h := tensor.F32ToF16(float32(rng.NormFloat64()) * float32(math.Pow(2, float64(rng.IntN(16)-8))))
				row[b+208], row[b+209] = byte(h), byte(h>>8)
			}
		}
		deq := make([]float32, sh.rows*sh.cols)
		if err := tensor.Dequantize(tensor.Q6_K, w.Data, deq); err != nil {
			t.Fatal(err)
		}
		nb := sh.cols / 256
		for r := range sh.rows {
			for b := range nb {
				blk := (*[210]byte)(w.Data[r*w.rowBytes+210*b:])
				dw := tensor.F16ToF32(uint16(blk[208]) | uint16(blk[209])<<8)
				for e := range 256 {
					want := deq[r*sh.cols+256*b+e]
					got := dw * float32(int8(blk[192+e/16])) * float32(int(q6Value(blk, e))-32)
					if got != want {
						t.Fatalf("row %d super-block %d element %d: q6Value gives %g, Dequantize %g", r, b, e, got, want)
					}
				}
			}
		}
		x := randVec(rng, 17*sh.cols)
		for _, n := range []int{1, 2, 8, 9, 17} {
			var a qactK
			a.quantize(x[:n*sh.cols])
			// The reference against the dequantized weights times the quantized activations.
			for tk := range n {
				for r := range sh.rows {
					got := dotQ6_KAMX(w.Data[r*w.rowBytes:(r+1)*w.rowBytes], a.d[tk*nb:(tk+1)*nb], a.q[tk*nb*256:(tk+1)*nb*256], a.bsums[tk*nb*16:(tk+1)*nb*16])
					var want, mag float64
					for e := range sh.cols {
						v := float64(deq[r*sh.cols+e]) * float64(a.q[tk*sh.cols+e]) * float64(a.d[tk*nb+e/256])
						want += v
						mag += math.Abs(v)
					}
					if math.Abs(float64(got)-want) > 1e-5*mag+1e-30 {
						t.Fatalf("%d×%d token %d row %d: dotQ6_KAMX %g, float64 sum %g", sh.rows, sh.cols, tk, r, got, want)
					}
				}
			}
			for _, isa := range SupportedISAs() {
				withISA(t, isa, func() {
					prepQ6KAMX(&a, &w, n)
					for _, rg := range [][2]int{{0, sh.rows}, {3, sh.rows - 5}, {17, 30}, {5, 11}, {16, 32}} {
						lo, hi := rg[0], rg[1]
						amx := sh.rows%32 == 0
						if amx && amxRowsRun() && !asmQ6KAMX(make([]float32, n*sh.rows), &w, &a, n, lo, hi) {
							t.Fatalf("%v %d×%d n=%d rows %d..%d: the kernels did not run", isa, sh.rows, sh.cols, n, lo, hi)
						}
						out := make([]float32, n*sh.rows)
						kQuantRows(out, &w, &a, n, lo, hi)
						for tk := range n {
							for r := lo; r < hi; r++ {
								row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
								d, q, bs := a.d[tk*nb:(tk+1)*nb], a.q[tk*nb*256:(tk+1)*nb*256], a.bsums[tk*nb*16:(tk+1)*nb*16]
								want := dotQ6_KAMX(row, d, q, bs)
								if !amx {
									want = dotQ6_KAct(row, d, q, bs)
								}
								if g := out[tk*sh.rows+r]; math.Float32bits(g) != math.Float32bits(want) {
									t.Fatalf("%v %d×%d n=%d rows %d..%d: token %d row %d: %g, reference %g", isa, sh.rows, sh.cols, n, lo, hi, tk, r, g, want)
								}
							}
						}
					}
				})
			}
		}
	}
}

// TestOutsideAMX: under GGMLAMX a Q4_1 or Q6_K matrix marked SetOutsideAMX (a tied head, an
// expert) is multiplied in the AVX-512 build's arithmetic, as llama.cpp's sapphirerapids
// library does outside its AMX buffer, and an unmarked copy of it in the AMX one.
func TestOutsideAMX(t *testing.T) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAMX))
	rng := rand.New(rand.NewPCG(47, 48))
	p := NewPool(2)
	defer p.Close()
	s := NewScratch(2)
	for _, dt := range []tensor.DType{tensor.Q4_1, tensor.Q6_K} {
		w, _ := randMat(t, rng, dt, 64, 512)
		out := w
		out.SetOutsideAMX()
		x := randVec(rng, 3*512)
		in, outside := make([]float32, 3*64), make([]float32, 3*64)
		MatMul(p, in, &w, x, 3, s)
		MatMul(p, outside, &out, x, 3, s)
		vec := make([]float32, 3*64)
		prev := SetGGMLBuild(GGMLAVX512)
		MatMul(p, vec, &w, x, 3, s)
		SetGGMLBuild(prev)
		differ := 0
		for i := range vec {
			if math.Float32bits(outside[i]) != math.Float32bits(vec[i]) {
				t.Fatalf("%v: value %d outside the AMX backend %g, AVX-512 arithmetic %g", dt, i, outside[i], vec[i])
			}
			if in[i] != vec[i] {
				differ++
			}
		}
		if differ == 0 {
			t.Fatalf("%v: the unmarked matrix gave the AVX-512 arithmetic's values too", dt)
		}
	}
}

// TestAMXMatMulMany: under GGMLAMX, one MatMulMany call over Q4_1 (and Q6_K) matrices of which
// some take the AMX arithmetic and some do not (a row count that is not a multiple of 32, a
// matrix marked SetOutsideAMX), in either order, gives each the bits of its own MatMul: the
// activation layouts are made for the call, not for its first matrix only.
func TestAMXMatMulMany(t *testing.T) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAMX))
	rng := rand.New(rand.NewPCG(49, 50))
	p := NewPool(2)
	defer p.Close()
	s := NewScratch(2)
	for _, dt := range []tensor.DType{tensor.Q4_1, tensor.Q6_K} {
		const cols, n = 512, 3
		a, _ := randMat(t, rng, dt, 40, cols) // vec_dot: 40 rows
		b, _ := randMat(t, rng, dt, 64, cols) // AMX
		c, _ := randMat(t, rng, dt, 32, cols) // vec_dot: outside
		c.SetOutsideAMX()
		x := randVec(rng, n*cols)
		for _, ms := range [][]*Mat{{&a, &b, &c}, {&b, &a, &c}, {&c, &b}} {
			var ps []Product
			for _, m := range ms {
				ps = append(ps, Product{W: m, Out: make([]float32, n*m.Rows)})
			}
			MatMulMany(p, ps, x, n, s)
			for i, pr := range ps {
				alone := make([]float32, n*pr.W.Rows)
				MatMul(p, alone, pr.W, x, n, s)
				for j := range alone {
					if math.Float32bits(pr.Out[j]) != math.Float32bits(alone[j]) {
						t.Fatalf("%v, call of %d matrices, matrix %d (%d rows): value %d %g, alone %g", dt, len(ps), i, pr.W.Rows, j, pr.Out[j], alone[j])
					}
				}
			}
		}
	}
}
