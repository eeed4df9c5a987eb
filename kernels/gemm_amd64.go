//go:build amd64

package kernels

import (
	"os"

	"golang.org/x/sys/cpu"

	"github.com/tokenwise/tokenwise/tensor"
)

// The batched product's inner tile in Go assembly (gemm_amd64.s), used with or without
// GOEXPERIMENT=simd. Measured against the archsimd version of the same tile
// (block4x2F32x8): see BenchmarkMatMulF32/BF16 with TOKENWISE_NO_ASM set and unset. Which
// kernels run is decided in isa_amd64.go (SetISA).

//go:noescape
func block4x2AVX2(w *float32, n int, x *float32, acc *[64]float32)

//go:noescape
func dot4F16AVX2(w *uint16, n int, x *float32, acc *[32]float32)

//go:noescape
func widenF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func roundF16AVX2(dst, src *float32, n int)

//go:noescape
func encodeF16AVX2(dst *uint16, src *float32, n int)

//go:noescape
func widenBF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func madRoundF16AVX2(y *float32, x *uint16, n int, a float32)

//go:noescape
func scaleRoundF16AVX2(y *float32, n int, a float32)

//go:noescape
func dotF16AccAVX2(q *float32, k *uint16, n int, nacc int, acc *[64]float32)

// asmDot4F16 leaves in acc the eight lane sums of each of four f16 rows (w, 4×n) times x
// over the first n&^7 columns, and returns that column count; 0 where it cannot run.
func asmDot4F16(w []uint16, n int, x []float32, acc *[32]float32) int {
	if !useAsmQ8 || n < 8 {
		return 0
	}
	w, x = w[:4*n], x[:n]
	dot4F16AVX2(&w[0], n, &x[0], acc)
	return n &^ 7
}

// asmWidenF16 widens the first len(src)&^7 halves of src into dst and returns how many.
func asmWidenF16(dst []float32, src []uint16) int {
	n := len(src) &^ 7
	if !useAsmQ8 || n == 0 {
		return 0
	}
	dst = dst[:n]
	widenF16AVX2(&dst[0], &src[0], n)
	return n
}

// asmDotQ8_0 is one Q8_0 weight row times one activation row (d8: broadcast block scales,
// q: quants) with ggml's lane order; ok is false where the assembly cannot run.
func asmDotQ8_0(row []byte, d8 []float32, q []int8) (v float32, ok bool) {
	nb := len(row) / 34
	if !useAsmQ8 || nb == 0 {
		return 0, false
	}
	d8, q = d8[:nb*8], q[:nb*32]
	matVecQ8_0AVX2(&row[0], 1, nb, &d8[0], &q[0], &v, useVNNI)
	return v, true
}

// asmPairs multiplies four weight rows (w, 4×cols) by tokens 0..n&^1 of x two at a time,
// writing columns r..r+3 of out, and returns how many tokens it did.
func asmPairs(out, w, x []float32, n, cols, rows, r int) int {
	if !useAsmGEMM || cols < 8 {
		return 0
	}
	w = w[:4*cols]
	x = x[:n*cols]
	var l [64]float32
	t := 0
	for ; t+2 <= n; t += 2 {
		xt := x[t*cols : (t+2)*cols]
		block4x2AVX2(&w[0], cols, &xt[0], &l)
		var c [8]float32
		for k := range c {
			c[k] = lanesSum((*[8]float32)(l[8*k:]))
		}
		tile4x2Tail(&c, w, cols, xt, cols&^7)
		copy(out[t*rows+r:t*rows+r+4], c[:4])
		copy(out[(t+1)*rows+r:(t+1)*rows+r+4], c[4:])
	}
	if t < n { // the last of an odd number, in a pair's arithmetic
		xt := x[t*cols : (t+1)*cols]
		block4x1AVX2(&w[0], cols, &xt[0], (*[32]float32)(l[:32]))
		var c [4]float32
		for k := range c {
			c[k] = lanesSum((*[8]float32)(l[8*k:]))
		}
		tile4x1Tail(&c, w, cols, xt, cols&^7)
		copy(out[t*rows+r:t*rows+r+4], c[:])
		t++
	}
	return t
}

// tile4x1Tail is tile4x2Tail for one token.
func tile4x1Tail(c *[4]float32, w []float32, n int, x []float32, from int) {
	for i := from; i < n; i++ {
		for k := range 4 {
			c[k] += w[k*n+i] * x[i]
		}
	}
}

//go:noescape
func block4x1AVX2(w *float32, n int, x *float32, acc *[32]float32)

//go:noescape
func matVecTileF16Z(x *float32, w *uint16, n, cols int, out *float32)

//go:noescape
func matVecTileBF16Z(x *float32, w *uint16, n, cols int, out *float32)

//go:noescape
func matVecTileF32Z(x *float32, w *float32, n, cols int, out *float32)

// asmMatVecTiled computes rows [lo,hi) (hi−lo a multiple of 4) of a float matrix times
// one token in the arithmetic matMulRows gives them (matVecTiled) and returns where it
// stopped: hi, or lo where no kernel here has that arithmetic.
//   - AVX-512 tile (cols a multiple of 16): dotLanes16, in matVecTile*Z.
//   - AVX2 pairs (asmPairs) for f16 rows: dot4F16AVX2's eight lanes per row are the
//     pairs' FMAs on the widened row, then the same lane sum and scalar tail.
func asmMatVecTiled(out []float32, w *Mat, x []float32, lo, hi int) int {
	cols := w.Cols
	if hi <= lo {
		return lo
	}
	if useAVX512Tile && cols%16 == 0 {
		x = x[:cols]
		switch w.DType {
		case tensor.F16:
			matVecTileF16Z(&x[0], &w.u16[lo*cols : hi*cols][0], hi-lo, cols, &out[lo:hi][0])
		case tensor.BF16:
			matVecTileBF16Z(&x[0], &w.u16[lo*cols : hi*cols][0], hi-lo, cols, &out[lo:hi][0])
		default:
			matVecTileF32Z(&x[0], &w.f32[lo*cols : hi*cols][0], hi-lo, cols, &out[lo:hi][0])
		}
		return hi
	}
	if w.DType != tensor.F16 || !useAsmQ8 || cols < 8 {
		return lo
	}
	var acc [32]float32
	for r := lo; r < hi; r += 4 {
		wr := w.u16[r*cols : (r+4)*cols]
		dot4F16AVX2(&wr[0], cols, &x[0], &acc)
		o := out[r : r+4 : r+4]
		for k := range 4 {
			s := lanesSum((*[8]float32)(acc[8*k:]))
			for i := cols &^ 7; i < cols; i++ {
				s += f16Table[wr[k*cols+i]] * x[i]
			}
			o[k] = s
		}
	}
	return hi
}

// asmDotF16 is DotF16 (ggml_vec_dot_f16's lane order for 16- or 8-lane builds) with the keys
// widened by F16C; ok is false where the assembly cannot run.
func asmDotF16(q []float32, k []uint16, lanes16 bool) (float32, bool) {
	n := len(q)
	step, nacc := 32, 4
	if lanes16 {
		step, nacc = 64, 8
	}
	np := n / step * step
	if !useAsmQ8 || np == 0 {
		return 0, false
	}
	k = k[:n]
	var raw [64]float32
	dotF16AccAVX2(&q[0], &k[0], np, nacc, &raw)
	// The assembly's eight-lane accumulators, as ggml's four accumulators of 16 lanes (lo,
	// hi halves) or of 8.
	var acc [4][16]float32
	for j := range 4 {
		if lanes16 {
			copy(acc[j][:], raw[16*j:16*j+16])
		} else {
			copy(acc[j][:8], raw[8*j:8*j+8])
		}
	}
	return reduceDotF16(&acc, lanes16, q, k, np), true
}

// asmMadRoundF16 is MadRoundF16's vector part: it returns how many leading elements it did.
func asmMadRoundF16(y []float32, a float32, x []uint16) int {
	n := len(y) &^ 7
	if !useAsmQ8 || n == 0 {
		return 0
	}
	x = x[:n]
	madRoundF16AVX2(&y[0], &x[0], n, a)
	return n
}

// asmScaleRoundF16 is ScaleRoundF16's vector part: it returns how many leading elements it did.
func asmScaleRoundF16(y []float32, a float32) int {
	n := len(y) &^ 7
	if !useAsmQ8 || n == 0 {
		return 0
	}
	scaleRoundF16AVX2(&y[0], n, a)
	return n
}

//go:noescape
func attnScoresF16AVX2(q *float32, k *uint16, rows *int32, n, stride, hd, nacc int, scale float32, out *float32)

//go:noescape
func attnMadSeqF16AVX2(acc *float32, v *uint16, rows *int32, n, stride, hd int, ms, vs *float32)

// asmAttendF16 reports whether the fused attention kernels take rows of hd elements: the
// value loop holds 64 elements at a time, the score loop a multiple of 32 (AVX2 order) or
// 64 (AVX-512 order).
func asmAttendF16(hd int) bool { return useAsmQ8 && hd > 0 && hd%64 == 0 }

// asmAttnScoresF16 is FlashF16.Attend's score pass: out[j] = DotF16(q, key rows[j])·scale.
// The caller has checked that every row lies inside k (the assembly does not).
func asmAttnScoresF16(out, q []float32, k []uint16, rows []int32, off, stride int, scale float32, lanes16 bool) {
	nacc := 4
	if lanes16 {
		nacc = 8
	}
	if lanes16 && useAVX512Attn {
		attnScoresF16Z(&q[0], &k[off], &rows[0], len(rows), 2*stride, len(q), scale, &out[0])
		return
	}
	attnScoresF16AVX2(&q[0], &k[off], &rows[0], len(rows), 2*stride, len(q), nacc, scale, &out[0])
}

//go:noescape
func attnScoresF16Z(q *float32, k *uint16, rows *int32, n, stride, hd int, scale float32, out *float32)

//go:noescape
func attnMadSeqF16Z64(acc *float32, v *uint16, rows *int32, n, stride int, ms, vs *float32)

//go:noescape
func attnMadSeqF16Z(acc *float32, v *uint16, rows *int32, n, stride, hd int, ms, vs *float32)

// asmAttnMadSeqF16 is FlashF16.Attend's value pass over acc (see attnMadSeqF16AVX2).
func asmAttnMadSeqF16(acc []float32, v []uint16, rows []int32, off, stride int, ms, vs []float32) {
	if useAVX512Attn && len(acc)%128 == 0 {
		attnMadSeqF16Z(&acc[0], &v[off], &rows[0], len(rows), 2*stride, len(acc), &ms[0], &vs[0])
		return
	}
	if useAVX512Attn && len(acc) == 64 {
		attnMadSeqF16Z64(&acc[0], &v[off], &rows[0], len(rows), 2*stride, &ms[0], &vs[0])
		return
	}
	attnMadSeqF16AVX2(&acc[0], &v[off], &rows[0], len(rows), 2*stride, len(acc), &ms[0], &vs[0])
}

//go:noescape
func q8Tile4x4VNNI(w *byte, rowBytes, nb int, dw *float32, x *int8, xBytes int, d8 *float32, acc *[128]float32)

//go:noescape
func q8Tile4x4VNNIZ(w *byte, rowBytes, nb int, dw16 *float32, x *int8, xBytes int, d *float32, out *[16]float32)

// The Q8_0 prefill tiles run where useVNNI is on (isa_amd64.go). q8Wide picks the 512-bit
// tile (q8Tile4x4VNNIZ, two rows per register) over the 256-bit one (q8Tile4x4VNNI), which
// TOKENWISE_Q8_TILE=256 selects to measure one against the other; both give the same bits.
var q8Wide = os.Getenv("TOKENWISE_Q8_TILE") != "256"

// asmQ8Tiles computes the Q8_0 prefill product in 4-row × 4-token tiles: rows [lo, r4) for
// tokens [0, n4), where r4 = lo + (hi−lo)&^3 and n4 = n&^3, and returns r4 and n4 (r4 = lo
// where it does nothing). Every value has the bits of asmDotQ8_0 on the same row and token.
func asmQ8Tiles(out []float32, w *Mat, a *qact, n, lo, hi int) (r4, n4 int) {
	nb := w.Cols / 32
	r4, n4 = lo+(hi-lo)&^3, n&^3
	if !useVNNI || w.DType != tensor.Q8_0 || nb == 0 || n4 == 0 || r4 == lo {
		return lo, 0
	}
	rows := w.Rows
	_ = w.Data[r4*w.rowBytes-1] // the tiles read rows lo..r4-1
	q, d, d8 := a.q[:n4*nb*32], a.d[:n4*nb], a.d8[:n4*nb*8]
	// The rows' block scales: dw[4b+k] (256-bit tile), or 8 copies each (512-bit). On the
	// stack up to 8,192 columns (32 KiB; the asm calls do not let it escape), so a prefill
	// makes no garbage here (it made ~1.5 MB per 128-token Qwen3 pass on the heap).
	var stack [32 * 256]float32
	per := 4
	if q8Wide {
		per = 32
	}
	dw := stack[:0]
	if per*nb <= len(stack) {
		dw = stack[:per*nb]
	} else {
		dw = make([]float32, per*nb)
	}
	var acc [128]float32
	for r := lo; r < r4; r += 4 {
		for k := range 4 {
			row := w.Data[(r+k)*w.rowBytes : (r+k+1)*w.rowBytes]
			for b := range nb {
				v := f16Table[uint16(row[34*b])|uint16(row[34*b+1])<<8]
				if !q8Wide {
					dw[4*b+k] = v
					continue
				}
				c := dw[32*b+8*k : 32*b+8*k+8]
				for i := range c {
					c[i] = v
				}
			}
		}
		for t := 0; t < n4; t += 4 {
			if q8Wide {
				var res [16]float32
				q8Tile4x4VNNIZ(&w.Data[r*w.rowBytes], w.rowBytes, nb, &dw[0], &q[t*nb*32], nb*32, &d[t*nb], &res)
				for j := range 4 {
					o := out[(t+j)*rows+r : (t+j)*rows+r+4]
					o[0], o[1], o[2], o[3] = res[j], res[4+j], res[8+j], res[12+j]
				}
				continue
			}
			q8Tile4x4VNNI(&w.Data[r*w.rowBytes], w.rowBytes, nb, &dw[0], &q[t*nb*32], nb*32, &d8[t*nb*8], &acc)
			for k := range 4 {
				for j := range 4 {
					out[(t+j)*rows+r+k] = hsum8((*[8]float32)(acc[8*(4*k+j):]))
				}
			}
		}
	}
	return r4, n4
}

//go:noescape
func tile4x4F32Z(w *float32, stride, cols int, x *[4]*float32, acc *[256]float32, mode int, out *[16]float32)

// asmTiles4x4 multiplies four weight rows (w, 4×cols) by all n tokens of x in 4×4 tiles of
// 16-lane accumulators (a last partial tile repeats its last token), writing the first nr
// of columns r..r+3 of out; it reports false where it does not apply (no AVX-512, cols not
// a multiple of 16). Each value is dotLanes16 of its row and token.
//
// Rows longer than tileCols are done tileCols columns at a time for every token before the
// next chunk, the accumulators of each 4-token tile parked in acc (tileAccLen(n) floats)
// between chunks: the four rows' chunk then stays in L1 while the tokens stream past, where
// four whole rows of 3072 or 8192 floats (48 or 128 KiB) would not fit beside the tokens'.
func asmTiles4x4(out, w, x []float32, n, cols, rows, r, nr int, acc []float32) bool {
	if !useAVX512Tile || cols%16 != 0 || cols == 0 || n == 0 {
		return false
	}
	w = w[:4*cols]
	x = x[:n*cols]
	var xp [4]*float32
	var res [16]float32
	kc := cols
	if cols > tileCols && len(acc) >= tileAccLen(n) {
		kc = tileCols
	}
	for k0 := 0; k0 < cols; k0 += kc {
		k := min(kc, cols-k0)
		last := k0+k == cols
		mode := 0
		if k0 > 0 {
			mode |= 1 // continue from the saved accumulators
		}
		if !last {
			mode |= 2 // save them for the next chunk
		}
		for t := 0; t < n; t += 4 {
			for j := range 4 {
				xp[j] = &x[min(t+j, n-1)*cols+k0]
			}
			var a *[256]float32
			if mode != 0 {
				a = (*[256]float32)(acc[t/4*256:])
			}
			tile4x4F32Z(&w[k0], cols, k, &xp, a, mode, &res)
			if !last {
				continue
			}
			for j := range min(4, n-t) {
				copy(out[(t+j)*rows+r:(t+j)*rows+r+nr], res[4*j:4*j+nr])
			}
		}
	}
	return true
}

// asmWidenBF16 widens the first len(src)&^7 bf16 values and returns how many it did.
func asmWidenBF16(dst []float32, src []uint16) int {
	n := len(src) &^ 7
	if !useAsmGEMM || n == 0 {
		return 0
	}
	dst = dst[:n]
	widenBF16AVX2(&dst[0], &src[0], n)
	return n
}

// asmRoundF16 rounds the first len(src)&^7 values to f16 (kept as float32) into dst and
// returns how many it did.
func asmRoundF16(dst, src []float32) int {
	n := len(src) &^ 7
	if !useAsmQ8 || n == 0 {
		return 0
	}
	dst = dst[:n]
	roundF16AVX2(&dst[0], &src[0], n)
	return n
}

// asmEncodeF16 converts the first len(src)&^7 values to f16 and returns how many it did.
func asmEncodeF16(dst []uint16, src []float32) int {
	n := len(src) &^ 7
	if !useAsmQ8 || n == 0 {
		return 0
	}
	dst = dst[:n]
	encodeF16AVX2(&dst[0], &src[0], n)
	return n
}

// asmMatVecF16 is the f16 matrix×vector product (w: len(out) rows of len(x) columns, x
// rounded to f16) with each row in ggml_vec_dot_f16's arithmetic (DotF16: 16-lane order on
// AVX-512 CPUs, as llama.cpp's decode there, else 8-lane), one row streamed after another.
// It reports false where the columns leave a tail (not a multiple of 64, or 32 for 8 lanes).
func asmMatVecF16(out []float32, w []uint16, x []float32) bool {
	cols := len(x)
	step, nacc := 32, 4
	if ggmlAVX512 {
		step, nacc = 64, 8
	}
	if !useAsmQ8 || cols == 0 || cols%step != 0 || len(out) == 0 {
		return false
	}
	w = w[:len(out)*cols]
	if nacc == 8 && useAVX512Attn {
		matVecF16Z(&x[0], &w[0], len(out), cols, &out[0])
		return true
	}
	if nacc == 4 {
		matVecF16Y(&x[0], &w[0], len(out), cols, &out[0])
		return true
	}
	// ggml's 16-lane order without AVX-512 instructions: ISAAVX2 on a CPU that
	// has them, where llama.cpp would still use them.
	attnScoresF16AVX2(&x[0], &w[0], nil, len(out), 2*cols, cols, nacc, 1, &out[0])
	return true
}

//go:noescape
func quantQ8BlocksAVX512(x *float32, q *int8, d *float32, sum *int32, nb int)

// asmQuantQ8 is quantBlockQ8 over every block of x (len(x)/32 blocks; d and sum one per
// block); it reports false where the assembly does not run.
func asmQuantQ8(x []float32, q []int8, d []float32, sum []int32) bool {
	nb := len(x) / 32
	if !useVNNI || nb == 0 { // AVX-512VL (VPMOVSDB); VNNI CPUs have it
		return false
	}
	q, d, sum = q[:nb*32], d[:nb], sum[:nb]
	quantQ8BlocksAVX512(&x[0], &q[0], &d[0], &sum[0], nb)
	return true
}

//go:noescape
func addAVX2(y, x *float32, n int)

//go:noescape
func sumSquares4(x *float32, d int, sums *[4]float64)

// asmAdd adds x into y's first len(y)&^31 values in assembly and returns how many (0 where
// the assembly does not run).
func asmAdd(y, x []float32) int {
	n := len(y) &^ 31
	if !useAsmGEMM || n == 0 {
		return 0
	}
	_ = x[n-1]
	addAVX2(&y[0], &x[0], n)
	return n
}

// asmSumSquares4 sets sums to the sums of squares of x's four rows of d values (x holds
// them back to back) and reports whether the assembly ran.
func asmSumSquares4(x []float32, d int, sums *[4]float64) bool {
	if noAsm || d == 0 {
		return false
	}
	_ = x[4*d-1]
	sumSquares4(&x[0], d, sums)
	return true
}

//go:noescape
func scaleMulAVX2(out, x, w *float32, scale float32, n int)

// asmScaleMul sets out[i] = (x[i]·scale)·w[i] for the first len(x)&^15 values in assembly
// and returns how many (0 where it does not run).
func asmScaleMul(out, x, w []float32, scale float32) int {
	n := len(x) &^ 15
	if !useAsmGEMM || n == 0 {
		return 0
	}
	_, _ = out[n-1], w[n-1]
	scaleMulAVX2(&out[0], &x[0], &w[0], scale, n)
	return n
}

//go:noescape
func argmaxAVX2(x *float32, n int) (idx int, nan bool)

// asmArgMax is ArgMax over x's first n&^31 values in assembly; ok is false where it does
// not run.
func asmArgMax(x []float32) (idx int, nan, ok bool) {
	n := len(x) &^ 31
	if !useAsmGEMM || n == 0 {
		return 0, false, false
	}
	idx, nan = argmaxAVX2(&x[0], n)
	return idx, nan, true
}

//go:noescape
func ropeInterleavedAVX2(x, cos, sin *float32, quads int)

// asmRopeInterleaved rotates the first 4·k pairs of x (RopeInterleaved) in assembly and
// returns how many pairs it rotated (0 where the AVX2 assembly does not run). Why: the
// rotation runs on the calling thread for every head of every token between the products
// (SmolLM2: 12 heads a token a layer). BenchmarkRopeInterleaved, one 64-wide head (Xeon
// model 207): 151 ns in the Go loop, 18 here.
func asmRopeInterleaved(x, cos, sin []float32) int {
	h := len(x) / 2
	q := min(h, len(cos), len(sin)) / 4
	if !useAsmGEMM || q == 0 {
		return 0
	}
	ropeInterleavedAVX2(&x[0], &cos[0], &sin[0], q)
	return 4 * q
}

//go:noescape
func q8ScalesF16(raw *float32, sums *int32, d, s, d8, s8 *float32, groups int, withSum int)

// asmQ8Scales sets qact.quantize's scales (d, s, d8, s8) of the first 8·k blocks in
// assembly and returns how many it set (0 where the F16C assembly does not run). The Go loop
// it replaces spent about 25 ns a block in software f32→f16 roundings and the scales'
// broadcasts, and quantize runs on the calling thread while the pool's workers wait: a
// five-token pass of SmolLM2 quantizes about 420 blocks a layer. BenchmarkQuantizeQ8
// (Xeon model 207): 5×1536 values 8.6 → 3.2 µs, 5×576 2.5 → 1.3, 576 0.71 → 0.26.
func asmQ8Scales(raw []float32, sums []int32, d, s, d8, s8 []float32, withSum bool) int {
	g := len(raw) / 8
	if !useAsmQ8 || g == 0 {
		return 0
	}
	n := 8 * g
	_, _, _, _ = sums[n-1], d[n-1], d8[8*n-1], s8[8*n-1]
	if withSum {
		_ = s[n-1]
	}
	ws := 0
	if withSum {
		ws = 1
	}
	q8ScalesF16(&raw[0], &sums[0], &d[0], &s[0], &d8[0], &s8[0], g, ws)
	return n
}

//go:noescape
func matVecF16Y(x *float32, w *uint16, n, cols int, out *float32)

//go:noescape
func matVecF16Z(x *float32, w *uint16, n, cols int, out *float32)

//go:noescape
func dotRowsBF16Z(x *float32, w *uint16, n, cols int, out *float32)

// asmMatVecBF16 is the bf16 matrix×vector product (w: len(out) rows of len(x) columns, x
// rounded to bf16) in dotBF16Lanes16's arithmetic on AVX-512 CPUs; false where it does not
// run (no AVX-512, columns not a multiple of 64).
func asmMatVecBF16(out []float32, w []uint16, x []float32) bool {
	cols := len(x)
	if !useAVX512Attn || cols == 0 || cols%64 != 0 || len(out) == 0 {
		return false
	}
	w = w[:len(out)*cols]
	dotRowsBF16Z(&x[0], &w[0], len(out), cols, &out[0])
	return true
}

//go:noescape
func gemmBcast4x64Z(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, fresh int, scale float32)

//go:noescape
func gemmBcast4x16Z(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, fresh int, scale float32)

// asmGemmBcast4 runs gemmBcast4 (its bounds already checked) in assembly on AVX-512.
func asmGemmBcast4(c []float32, ldc int, a []float32, ars, aks int, b []float32, ldb, k, cols int, fresh bool, scale float32) bool {
	if !useAVX512Tile {
		return false
	}
	f := 0
	if fresh {
		f = 1
	}
	switch cols {
	case 64:
		gemmBcast4x64Z(&c[0], ldc, &a[0], ars, aks, &b[0], ldb, k, f, scale)
	case 16:
		gemmBcast4x16Z(&c[0], ldc, &a[0], ars, aks, &b[0], ldb, k, f, scale)
	default:
		return false
	}
	return true
}

//go:noescape
func colMax64Z(kq *float32, out *[64]float32)

//go:noescape
func softmaxTile64Z(kq *float32, m *[64]float32, sums *[64]float64)

// useAVX512Softmax runs the tiled attention's softmax in assembly, which has the AVX-512
// build's ggml_v_expf and sum, so only where llama.cpp runs that build (ggmlAVX512).
func useAVX512Softmax() bool { return useAVX512Tile && ggmlAVX512 && cpu.X86.HasAVX512DQ }

// asmColMax64 is colMax64Z on a 64×64 tile where it runs.
func asmColMax64(kq []float32, out *[64]float32) bool {
	if !useAVX512Tile {
		return false
	}
	_ = kq[AttnTile*AttnTile-1]
	colMax64Z(&kq[0], out)
	return true
}

// asmSoftmaxTile64 is softmaxTile64Z on a 64×64 tile where it runs.
func asmSoftmaxTile64(kq []float32, m *[64]float32, sums *[64]float64) bool {
	if !useAVX512Softmax() {
		return false
	}
	_ = kq[AttnTile*AttnTile-1]
	softmaxTile64Z(&kq[0], m, sums)
	return true
}

//go:noescape
func sumWordsZ(w *uint64, blocks int) uint64

//go:noescape
func sumWordsY(w *uint64, blocks int) uint64

// asmSumWords adds w's first n words (n a multiple of 32 words, 256 bytes) in assembly and
// returns their sum and n; n is 0 where the assembly does not run.
func asmSumWords(w []uint64) (sum uint64, n int) {
	blocks := len(w) / 32
	if !useAsmGEMM || blocks == 0 {
		return 0, 0
	}
	if useAVX512Attn {
		return sumWordsZ(&w[0], blocks), blocks * 32
	}
	return sumWordsY(&w[0], blocks), blocks * 32
}

//go:noescape
func matVecQ8_0AVX2(w *byte, n, nb int, d8 *float32, q *int8, out *float32, vnni bool)

// asmMatVecQ8_0 computes rows [lo,hi) of a Q8_0 matrix times one quantized activation row
// into out[lo:hi] (asmDotQ8_0's bits, row by row); false where the assembly does not run.
func asmMatVecQ8_0(out []float32, w *Mat, a *qact, lo, hi int) bool {
	nb := w.Cols / 32
	if !useAsmQ8 || w.DType != tensor.Q8_0 || nb == 0 || hi <= lo {
		return false
	}
	_ = w.Data[hi*w.rowBytes-1]
	d8, q := a.d8[:nb*8], a.q[:nb*32]
	matVecQ8_0AVX2(&w.Data[lo*w.rowBytes], hi-lo, nb, &d8[0], &q[0], &out[lo], useVNNI)
	return true
}

// The two-head f16 attention kernels, attn_f16pair_amd64.s:
//
//go:generate go run attn_f16pair_gen.go

//go:noescape
func attnScoresF16Z2(q *float32, k *uint16, rows *int32, n, stride, hd int, scale float32, out *float32)

//go:noescape
func attnMadSeqF16Z2(acc0, acc1 *float32, v *uint16, rows *int32, n, stride, hd int, ms0, vs0, ms1, vs1 *float32)

//go:noescape
func attnMadSeqF16Z2x64(acc0, acc1 *float32, v *uint16, rows *int32, n, stride int, ms0, vs0, ms1, vs1 *float32)

// asmAttendPairF16 reports whether the two-head kernels (attn_f16pair_amd64.s) take heads
// of hd elements: AVX-512, llama.cpp's 16-lane score order, and heads of 64 or a multiple of
// 128 elements.
func asmAttendPairF16(hd int) bool {
	return useAVX512Attn && ggmlAVX512 && asmAttendF16(hd) && (hd == 64 || hd%128 == 0)
}

// asmAttnScoresPairF16 is AttendPair's score pass: out[h·n+j] = DotF16(query h, key
// rows[j])·scale for the two queries q[:hd] and q[hd:] (n = len(rows) ≥ 1).
func asmAttnScoresPairF16(out, q []float32, k []uint16, rows []int32, off, stride int, scale float32) {
	attnScoresF16Z2(&q[0], &k[off], &rows[0], len(rows), 2*stride, len(q)/2, scale, &out[0])
}

// asmAttnMadPairF16 is AttendPair's value pass over acc0 and acc1.
func asmAttnMadPairF16(acc0, acc1 []float32, v []uint16, rows []int32, off, stride int, ms0, vs0, ms1, vs1 []float32) {
	if len(acc0) == 64 {
		attnMadSeqF16Z2x64(&acc0[0], &acc1[0], &v[off], &rows[0], len(rows), 2*stride, &ms0[0], &vs0[0], &ms1[0], &vs1[0])
		return
	}
	attnMadSeqF16Z2(&acc0[0], &acc1[0], &v[off], &rows[0], len(rows), 2*stride, len(acc0), &ms0[0], &vs0[0], &ms1[0], &vs1[0])
}
