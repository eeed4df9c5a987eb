package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// TestKQuantAMX: under GGMLAMX, for Q4_K, Q5_K and Q6_K: the element values the AMX
// references read (q6Value, q5Value, Q4_K's nibbles) times the super-block's scales are what
// tensor.Dequantize gives; each reference (dotQ4_KAMX, dotQ5_KAMX, dotQ6_KAMX) is within its
// rounding of the float64 sum of those dequantized weights times the quantized activations;
// and the rows-interleaved kernels give every row and token the reference's bits for 1 to 17
// tokens, row ranges that cut 16-row groups, and rows of random bytes (any scales, d and
// dmin), under every ISA this CPU runs (the kernels where AVX-512 VNNI is on, the reference
// elsewhere). A matrix whose row count is not a multiple of 32 keeps the AVX-512 build's
// arithmetic. That the references are llama.cpp's order is TestKQuantsMatchLlamaCpp's and
// TestSmolLM2MatchesLlamaCpp's to show, against the sapphirerapids library.
func TestKQuantAMX(t *testing.T) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAMX))
	rng := rand.New(rand.NewPCG(45, 46))
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		for _, sh := range []struct{ rows, cols int }{{32, 256}, {64, 512}, {96, 256 * 5}, {40, 256}} {
			w, _ := randMat(t, rng, dt, sh.rows, sh.cols)
			size := w.rowBytes / (sh.cols / 256)
			for r := 1; r < sh.rows; r += 3 { // random scales and d of any size too
				row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
				for b := 0; b < len(row); b += size {
					h1 := tensor.F32ToF16(float32(rng.NormFloat64()) * float32(math.Pow(2, float64(rng.IntN(16)-8))))
					h2 := tensor.F32ToF16(float32(rng.NormFloat64()) * float32(math.Pow(2, float64(rng.IntN(16)-8))))
					if dt == tensor.Q6_K {
						for j := 192; j < 208; j++ {
							row[b+j] = byte(rng.IntN(256))
						}
						row[b+208], row[b+209] = byte(h1), byte(h1>>8)
						continue
					}
					for j := 4; j < 16; j++ {
						row[b+j] = byte(rng.IntN(256))
					}
					row[b], row[b+1], row[b+2], row[b+3] = byte(h1), byte(h1>>8), byte(h2), byte(h2>>8)
				}
			}
			deq := make([]float32, sh.rows*sh.cols)
			if err := tensor.Dequantize(dt, w.Data, deq); err != nil {
				t.Fatal(err)
			}
			nb := sh.cols / 256
			for r := range sh.rows {
				for b := range nb {
					blk := w.Data[r*w.rowBytes+size*b:][:size]
					for e := range 256 {
						want := deq[r*sh.cols+256*b+e]
						if got := amxTestValue(dt, blk, e); got != want {
							t.Fatalf("%v row %d super-block %d element %d: the reference reads %g, Dequantize gives %g", dt, r, b, e, got, want)
						}
					}
				}
			}
			x := randVec(rng, 33*sh.cols)
			ref := dotKAMXFor(dt)
			// Every rows kernel (T = 1..8 tokens a call); where the AMX tile runs, Q6_K's
			// 16-token tiles alone and with the rows kernels' rest (Q4_K's from 32 tokens).
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 16, 17, 33} {
				var a qactK
				a.quantize(x[:n*sh.cols])
				for tk := range n {
					for r := range sh.rows {
						got := ref(w.Data[r*w.rowBytes:(r+1)*w.rowBytes], a.d[tk*nb:(tk+1)*nb], a.q[tk*nb*256:(tk+1)*nb*256], a.bsums[tk*nb*16:(tk+1)*nb*16])
						var want, mag float64
						for e := range sh.cols {
							v := float64(deq[r*sh.cols+e]) * float64(a.q[tk*sh.cols+e]) * float64(a.d[tk*nb+e/256])
							want += v
							mag += math.Abs(v)
						}
						if math.Abs(float64(got)-want) > 1e-5*mag+1e-30 {
							t.Fatalf("%v %d×%d token %d row %d: reference %g, float64 sum %g", dt, sh.rows, sh.cols, tk, r, got, want)
						}
					}
				}
				for _, isa := range SupportedISAs() {
					withISA(t, isa, func() {
						prepKAMX(&a, &w, n)
						for i, rg := range [][2]int{{0, sh.rows}, {3, sh.rows - 5}, {17, 30}, {5, 11}, {16, 32}, {3, sh.rows - 5}} {
							lo, hi := rg[0], rg[1]
							if i == 5 { // again in runs of one 16-row group through the tokens (amxRowsRunBytes)
								defer func(b int) { amxRowsRunBytes = b }(amxRowsRunBytes)
								amxRowsRunBytes = 1
							}
							amx := sh.rows%32 == 0
							if amx && amxRowsRun() && !asmKAMX(make([]float32, n*sh.rows), &w, &a, 0, n, lo, hi) {
								t.Fatalf("%v %v %d×%d n=%d rows %d..%d: the kernels did not run", dt, isa, sh.rows, sh.cols, n, lo, hi)
							}
							out := make([]float32, n*sh.rows)
							tiles := AMXBlocks()
							kQuantRows(out, &w, &a, n, lo, hi)
							if whole := hi/16 - (lo+15)/16; q6TileRuns(&w, n) && whole > 0 &&
								AMXBlocks()-tiles != int64(whole*(n/16)) {
								t.Fatalf("%v %v %d×%d n=%d rows %d..%d: the AMX tile multiplied %d blocks of 16 rows, want %d", dt, isa, sh.rows, sh.cols, n, lo, hi, AMXBlocks()-tiles, whole*(n/16))
							}
							for tk := range n {
								for r := lo; r < hi; r++ {
									row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
									d, q, bs := a.d[tk*nb:(tk+1)*nb], a.q[tk*nb*256:(tk+1)*nb*256], a.bsums[tk*nb*16:(tk+1)*nb*16]
									want := ref(row, d, q, bs)
									if !amx {
										want = map[tensor.DType]func([]byte, []float32, []int8, []int16) float32{
											tensor.Q4_K: dotQ4_KAct, tensor.Q5_K: dotQ5_KAct, tensor.Q6_K: dotQ6_KAct}[dt](row, d, q, bs)
									}
									if g := out[tk*sh.rows+r]; math.Float32bits(g) != math.Float32bits(want) {
										t.Fatalf("%v %v %d×%d n=%d rows %d..%d: token %d row %d: %g, reference %g", dt, isa, sh.rows, sh.cols, n, lo, hi, tk, r, g, want)
									}
								}
							}
						}
					})
				}
			}
		}
	}
}

// amxTestValue is element e of the k-quant super-block blk dequantized from the values the
// AMX references read, in tensor.Dequantize's arithmetic.
func amxTestValue(dt tensor.DType, blk []byte, e int) float32 {
	if dt == tensor.Q6_K {
		b := (*[210]byte)(blk)
		dw := tensor.F16ToF32(uint16(blk[208]) | uint16(blk[209])<<8)
		return dw * float32(int8(blk[192+e/16])) * float32(int(q6Value(b, e))-32)
	}
	var v byte
	if dt == tensor.Q5_K {
		v = q5Value((*[176]byte)(blk), e)
	} else {
		v = blk[16+32*(e/64)+e%32]
		if e%64 >= 32 {
			v >>= 4
		}
		v &= 15
	}
	sc, mn := q4KScales((*[12]byte)(blk[4:16]))
	dw := tensor.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
	dm := tensor.F16ToF32(uint16(blk[2]) | uint16(blk[3])<<8)
	return float32(dw*float32(sc[e/32])*float32(v)) - dm*float32(mn[e/32])
}

// amxDTypes are the dtypes GGMLAMX multiplies in the AMX backend's arithmetic.
var amxDTypes = []tensor.DType{tensor.Q4_0, tensor.Q4_1, tensor.Q8_0, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K}

// TestOutsideAMX: under GGMLAMX a quantized matrix marked SetOutsideAMX (an expert) is
// multiplied in the AVX-512 build's arithmetic, as llama.cpp's sapphirerapids
// library does outside its AMX buffer, and an unmarked copy of it in the AMX one.
func TestOutsideAMX(t *testing.T) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAMX))
	rng := rand.New(rand.NewPCG(47, 48))
	p := NewPool(2)
	defer p.Close()
	s := NewScratch(2)
	for _, dt := range amxDTypes {
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

// TestAMXMatMulMany: under GGMLAMX, one MatMulMany call over matrices of one dtype of which
// some take the AMX arithmetic and some do not (a row count that is not a multiple of 32, a
// matrix marked SetOutsideAMX), in either order, gives each the bits of its own MatMul: the
// activation layouts are made for the call, not for its first matrix only.
func TestAMXMatMulMany(t *testing.T) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAMX))
	rng := rand.New(rand.NewPCG(49, 50))
	p := NewPool(2)
	defer p.Close()
	s := NewScratch(2)
	for _, dt := range amxDTypes {
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

// TestQ6Values: the repack's run-by-run decoding of a Q6_K super-block gives every element
// q6Value gives it (the reference products read elements through q6Value).
func TestQ6Values(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	for range 50 {
		var blk [210]byte
		for i := range blk {
			blk[i] = byte(rng.Uint32())
		}
		var vals [256]byte
		q6Values(&vals, &blk)
		for e, v := range vals {
			if want := q6Value(&blk, e); v != want {
				t.Fatalf("element %d: %d, q6Value %d", e, v, want)
			}
		}
	}
}
