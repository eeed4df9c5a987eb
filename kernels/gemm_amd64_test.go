//go:build amd64

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// TestAsmDotQ8_0 compares the assembly Q8_0 row kernel with the plain-Go one (the same
// lane arithmetic) on rows whose block scales include f16 subnormals, bit for bit.
func TestAsmDotQ8_0(t *testing.T) {
	if !useAsmQ8 {
		t.Skip("no AVX2/FMA/F16C")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const cols = 32 * 13
	for r := range 500 {
		row := make([]byte, cols/32*34)
		for b := 0; b < len(row); b += 34 {
			scale := float32(rng.ExpFloat64() * 0.01)
			if r%3 == 0 {
				scale *= 1e-3 // subnormal in f16
			}
			h := tensor.F32ToF16(scale)
			row[b], row[b+1] = byte(h), byte(h>>8)
			for i := range 32 {
				row[b+2+i] = byte(int8(rng.IntN(255) - 127))
			}
		}
		var a qact
		a.quantize(randVec(rng, cols), false)
		got, ok := asmDotQ8_0(row, a.d8, a.q)
		if !ok {
			t.Fatal("assembly kernel did not run")
		}
		if want := dotQ8_0Act(row, a.d, a.q); got != want {
			t.Fatalf("row %d: assembly %g, Go %g", r, got, want)
		}
	}
}

// TestAsmDotF16BothOrders: the F16C key-dot gives dotF16Lanes' bits in both of ggml's lane
// orders (AVX-512 and AVX2 builds), tails included.
func TestAsmDotF16BothOrders(t *testing.T) {
	if !useAsmQ8 {
		t.Skip("no AVX2/FMA/F16C")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for _, n := range []int{32, 64, 100, 128, 200} {
		q, k := make([]float32, n), make([]uint16, n)
		for i := range q {
			q[i] = tensor.F16ToF32(tensor.F32ToF16(float32(rng.NormFloat64())))
			k[i] = tensor.F32ToF16(float32(rng.NormFloat64() * 1e-3))
		}
		for _, lanes16 := range []bool{false, true} {
			got, ok := asmDotF16(q, k, lanes16)
			if !ok {
				if n >= 64 || (!lanes16 && n >= 32) {
					t.Fatalf("n=%d lanes16=%v: assembly did not run", n, lanes16)
				}
				continue
			}
			if want := dotF16Lanes(q, k, lanes16); got != want {
				t.Fatalf("n=%d lanes16=%v: assembly %g, Go %g", n, lanes16, got, want)
			}
		}
	}
}

// TestTile4x4F32Z: the AVX-512 prefill tile gives dotLanes16's bits for every row and token,
// for token counts that leave partial tiles and column counts from one step of 16 up.
func TestTile4x4F32Z(t *testing.T) {
	if !useAVX512Tile {
		t.Skip("no AVX-512 on this CPU (or TOKENWISE_NO_ASM)")
	}
	rng := rand.New(rand.NewPCG(31, 32))
	defer func(c int) { tileCols = c }(tileCols)
	// Rows taken whole, and in chunks of 32 or 48 columns (the last one shorter where 48
	// does not divide the row) with the accumulators parked in between; without room to
	// park them (acc nil) rows are taken whole.
	for _, chunk := range []int{1024, 32, 48} {
		tileCols = chunk
		for _, cols := range []int{16, 48, 1024, 1040} {
			for _, n := range []int{1, 3, 4, 9} {
				for _, park := range []bool{true, false} {
					const rows = 8
					w, x := randVec(rng, 4*cols), randVec(rng, n*cols)
					out := make([]float32, n*rows)
					var acc []float32
					if park {
						acc = make([]float32, tileAccLen(n))
					}
					if !asmTiles4x4(out, w, x, n, cols, rows, 4, 4, acc) {
						t.Fatal("asmTiles4x4 declined a multiple of 16 columns")
					}
					for tk := range n {
						for k := range 4 {
							want := dotLanes16(w[k*cols:(k+1)*cols], x[tk*cols:(tk+1)*cols])
							if g := out[tk*rows+4+k]; math.Float32bits(g) != math.Float32bits(want) {
								t.Fatalf("chunks of %d, cols %d n %d, acc %v: token %d row %d: %g, want %g", chunk, cols, n, park, tk, k, g, want)
							}
						}
					}
				}
			}
		}
	}
}

// TestWidenRowsAllValues: Mat.Row widens every bf16 bit pattern and every non-NaN f16 one
// exactly (the assembly widening against the scalar definitions), with a tail past the
// vector loop.
func TestWidenRowsAllValues(t *testing.T) {
	const n = 1<<16 + 5
	src := make([]uint16, n)
	for i := range src {
		src[i] = uint16(i)
	}
	data := tensor.Bytes(src)
	for _, dt := range []tensor.DType{tensor.BF16, tensor.F16} {
		m, err := NewMat(dt, 1, n, data)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, n)
		if err := m.Row(0, got); err != nil {
			t.Fatal(err)
		}
		for i, h := range src {
			want := bf16(h)
			if dt == tensor.F16 {
				if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
					continue // NaN payloads: F16C quiets them
				}
				want = f16Table[h]
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("%v %#04x: %v, want %v", dt, h, got[i], want)
			}
		}
	}
}

// TestMatVecF16RowOrder: with the batch-invariant mode off, the f16 matrix×vector product
// gives DotF16's bits (ggml_vec_dot_f16) for every row, in both of ggml's lane orders.
func TestMatVecF16RowOrder(t *testing.T) {
	if !useAsmQ8 || !useF16RowDot {
		t.Skip("no F16C assembly (or TOKENWISE_NO_ASM / TOKENWISE_F16_DECODE=rows4)")
	}
	defer SetBatchInvariant(SetBatchInvariant(false))
	defer func(v bool) { ggmlAVX512 = v }(ggmlAVX512)
	rng := rand.New(rand.NewPCG(51, 52))
	const rows, cols = 37, 192
	w, _ := randMat(t, rng, tensor.F16, rows, cols)
	x := randVec(rng, cols)
	RoundF16(x)
	p := NewPool(2)
	defer p.Close()
	s := NewScratch(2)
	for _, lanes16 := range []bool{false, true} {
		ggmlAVX512 = lanes16
		out := make([]float32, rows)
		MatVec(p, out, &w, x, s)
		for r := range rows {
			if want := DotF16(x, w.u16[r*cols:(r+1)*cols]); math.Float32bits(out[r]) != math.Float32bits(want) {
				t.Fatalf("lanes16 %v row %d: %g, want %g", lanes16, r, out[r], want)
			}
		}
	}
}

// TestMatVecBF16RowOrder: with the batch-invariant mode off, on AVX-512 CPUs the bf16
// matrix×vector product gives dotBF16Lanes16's bits for every row.
func TestMatVecBF16RowOrder(t *testing.T) {
	if !useAVX512Attn || !useF16RowDot {
		t.Skip("no AVX-512 (or TOKENWISE_NO_ASM / NO_AVX512 / F16_DECODE=rows4)")
	}
	defer SetBatchInvariant(SetBatchInvariant(false))
	rng := rand.New(rand.NewPCG(71, 72))
	const rows, cols = 37, 192
	w, _ := randMat(t, rng, tensor.BF16, rows, cols)
	x := randVec(rng, cols)
	for i := range x {
		x[i] = bf16Round(x[i])
	}
	p := NewPool(2)
	defer p.Close()
	s := NewScratch(2)
	out := make([]float32, rows)
	MatVec(p, out, &w, x, s)
	for r := range rows {
		if want := dotBF16Lanes16(w.u16[r*cols:(r+1)*cols], x); math.Float32bits(out[r]) != math.Float32bits(want) {
			t.Fatalf("row %d: %g, want %g", r, out[r], want)
		}
	}
}

// TestSumWordsAVX2: the AVX2 read probe, on a CPU that would take the AVX-512 one.
func TestSumWordsAVX2(t *testing.T) {
	defer func(v bool) { useAVX512Attn = v }(useAVX512Attn)
	useAVX512Attn = false
	checkSumWords(t, "avx2")
}

// TestMatVecQ8_0Stream: the Q8_0 decode product (one call over the rows, matVecQ8_0AVX2)
// gives the Go reference's bits (dotQ8_0Act, ggml's lane order) row by row, with VPDPBUSD
// and with VPMADDUBSW/VPMADDWD, for weights of -128 too, and leaves the rows outside
// [lo,hi) alone.
func TestMatVecQ8_0Stream(t *testing.T) {
	if !useAsmQ8 {
		t.Skip("no F16C/AVX2 assembly")
	}
	defer func(v bool) { useVNNI = v }(useVNNI)
	rng := rand.New(rand.NewPCG(91, 92))
	for _, cols := range []int{32, 96, 1024} {
		const rows = 13
		w, _ := randMat(t, rng, tensor.Q8_0, rows, cols)
		for b := 0; b < len(w.Data); b += 34 * 5 { // a few -128 quants (a GGUF may hold them)
			w.Data[b+2+b%32] = 0x80
		}
		x := randVec(rng, cols)
		var a qact
		a.quantize(x, false)
		nb := cols / 32
		for _, vnni := range []bool{false, useVNNI} {
			useVNNI = vnni
			out := make([]float32, rows)
			const lo, hi = 2, 11
			out[lo-1], out[hi] = -7, -7
			if !asmMatVecQ8_0(out, &w, &a, lo, hi) {
				t.Fatal("asmMatVecQ8_0 did not run")
			}
			for r := lo; r < hi; r++ {
				want := dotQ8_0Act(w.Data[r*w.rowBytes:(r+1)*w.rowBytes], a.d[:nb], a.q[:nb*32])
				if math.Float32bits(out[r]) != math.Float32bits(want) {
					t.Fatalf("cols %d vnni %v row %d: %g, want %g", cols, vnni, r, out[r], want)
				}
			}
			if out[lo-1] != -7 || out[hi] != -7 {
				t.Fatalf("cols %d vnni %v: rows outside [%d,%d) written", cols, vnni, lo, hi)
			}
		}
	}
}
