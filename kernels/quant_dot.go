package kernels

import (
	"math"

	"github.com/tokenwise/tokenwise/tensor"
)

// ggml-compatible products for quantized and half-precision weights.
//
// llama.cpp's CPU backend does not multiply quantized weights by float32 activations: it
// first converts the activations to the weight type's "vec_dot_type" (Q4_0 and Q8_0 weights
// take Q8_0 activation blocks, Q4_1 takes Q8_1 blocks that also carry d·Σq, F16 takes f16,
// BF16 takes bf16) and then does integer dot products per block of 32 with the float scales
// applied once per block. The rounding of the activations is what moves logits by ~0.1 on a
// real Q4_1 model, so tokenwise does the same: the activation quantizer below reproduces
// ggml's AVX2 quantize_row_q8_0/q8_1 (scale = amax/127, multiplier = 127/amax, round half to
// even), and the dot products accumulate d_w·d_x·(integer partial sums) into eight lanes in
// the order of ggml's AVX2 vec_dot, then add the lanes as its hsum_float_8 does.

// qact holds activation rows quantized to 8-bit blocks of 32: per block the scale d (the
// float32 value of the f16 ggml stores), s = d·Σq rounded to f16 (Q8_1 only), and 32 int8.
type qact struct {
	d, s []float32
	q    []int8
	// d8, s8: d and s repeated eight times per block, for vector kernels that load them
	// as whole vectors (no scalar float code in their loops).
	d8, s8 []float32
	// raw, sums: each block's unrounded scale and quant sum (quantize's scratch).
	raw  []float32
	sums []int32
	sn   smallNAct // for the small-n kernels (smalln.go) and the AMX-arithmetic ones (amxrows.go)
	// amxComp: Q4_0's and Q8_0's offset share of each block for the AMX-arithmetic kernels
	// (prepAMX); amxN: the tokens those kernels' layouts were made for, 0: none.
	amxComp []int32
	amxN    int
}

// actKind is the activation format a weight dtype multiplies with.
type actKind uint8

const (
	actF32  actKind = iota
	actQ8_0         // 8-bit blocks, scale only
	actQ8_1         // 8-bit blocks, scale and scaled sum
	actF16          // activations rounded to half precision
	actBF16         // activations rounded to bfloat16
)

func actKindOf(dt tensor.DType) actKind {
	switch dt {
	case tensor.Q8_0, tensor.Q4_0:
		return actQ8_0
	case tensor.Q4_1:
		return actQ8_1
	case tensor.F16:
		return actF16
	case tensor.BF16:
		return actBF16
	}
	return actF32
}

// quantize fills a with the n×cols activations x (cols a multiple of 32).
func (a *qact) quantize(x []float32, withSum bool) {
	nb := len(x) / 32
	a.amxN = 0
	if cap(a.d) < nb {
		a.d = make([]float32, nb)
		a.s = make([]float32, nb)
		a.q = make([]int8, nb*32)
		a.d8 = make([]float32, nb*8)
		a.s8 = make([]float32, nb*8)
	}
	if cap(a.raw) < nb {
		a.raw, a.sums = make([]float32, nb), make([]int32, nb)
	}
	a.d, a.s, a.q, a.d8, a.s8 = a.d[:nb], a.s[:nb], a.q[:nb*32], a.d8[:nb*8], a.s8[:nb*8]
	raw, sums := a.raw[:nb], a.sums[:nb]
	if !asmQuantQ8(x[:nb*32], a.q, raw, sums) { // AVX-512 assembly (gemm_amd64.s)
		for b := range nb {
			raw[b], sums[b] = quantBlockQ8((*[32]float32)(x[b*32:]), (*[32]int8)(a.q[b*32:]))
		}
	}
	for b := asmQ8Scales(raw, sums, a.d, a.s, a.d8, a.s8, withSum); b < nb; b++ {
		d, sum := raw[b], sums[b]
		a.d[b] = f16Round(d)
		if withSum {
			a.s[b] = f16Round(d * float32(sum))
		}
		d8, s8 := (*[8]float32)(a.d8[b*8:]), (*[8]float32)(a.s8[b*8:])
		for i := range 8 {
			d8[i], s8[i] = a.d[b], a.s[b]
		}
	}
}

// quantBlockQ8 rounds 32 values to int8 with ggml's AVX2 arithmetic and returns the
// unrounded scale and the sum of the quants.
func quantBlockQ8(x *[32]float32, q *[32]int8) (d float32, sum int32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	d = amax / 127
	var id float32
	if amax != 0 {
		id = 127 / amax
	}
	for i, v := range x {
		// v·id can exceed 127 by an ulp; ggml's pack instructions saturate.
		r := int32(math.RoundToEven(float64(v * id)))
		r = min(max(r, -128), 127)
		q[i] = int8(r)
		sum += r
	}
	return d, sum
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

func f16Round(v float32) float32 { return f16Table[tensor.F32ToF16(v)] }

func bf16Round(v float32) float32 { return bf16(tensor.F32ToBF16(v)) }

// fma32 is a float32 fused multiply-add (the product of two float32 is exact in float64, so
// only the final sum is rounded twice, which changes a result in vanishingly rare ties).
func fma32(a, b, c float32) float32 {
	return float32(math.FMA(float64(a), float64(b), float64(c)))
}

// hsum8 adds eight lanes in the order of ggml's hsum_float_8.
func hsum8(a *[8]float32) float32 {
	r0, r1, r2, r3 := a[4]+a[0], a[5]+a[1], a[6]+a[2], a[7]+a[3]
	return (r0 + r2) + (r1 + r3)
}

// dotQ8_0Act is a Q8_0 weight row times one Q8_0 activation row (d, q for the same blocks).
func dotQ8_0Act(row []byte, d []float32, q []int8) float32 {
	var acc [8]float32
	nb := len(row) / 34
	d, q = d[:nb], q[:nb*32]
	for b := range nb {
		blk := (*[34]byte)(row[b*34:])
		qy := (*[32]int8)(q[b*32:])
		scale := f16Table[uint16(blk[0])|uint16(blk[1])<<8] * d[b]
		for j := range 8 {
			k := 4 * j
			s := int32(int8(blk[2+k]))*int32(qy[k]) + int32(int8(blk[3+k]))*int32(qy[k+1]) +
				int32(int8(blk[4+k]))*int32(qy[k+2]) + int32(int8(blk[5+k]))*int32(qy[k+3])
			acc[j] = fma32(scale, float32(s), acc[j])
		}
	}
	return hsum8(&acc)
}

// dotQ4_0Act: nibble values q−8; low nibbles are elements 0..15 of a block (lanes 0..3),
// high nibbles 16..31 (lanes 4..7).
func dotQ4_0Act(row []byte, d []float32, q []int8) float32 {
	var acc [8]float32
	nb := len(row) / 18
	d, q = d[:nb], q[:nb*32]
	for b := range nb {
		blk := (*[18]byte)(row[b*18:])
		qy := (*[32]int8)(q[b*32:])
		scale := f16Table[uint16(blk[0])|uint16(blk[1])<<8] * d[b]
		for j := range 4 {
			k := 4 * j
			var lo, hi int32
			for i := k; i < k+4; i++ {
				v := blk[2+i]
				lo += (int32(v&15) - 8) * int32(qy[i])
				hi += (int32(v>>4) - 8) * int32(qy[16+i])
			}
			acc[j] = fma32(scale, float32(lo), acc[j])
			acc[4+j] = fma32(scale, float32(hi), acc[4+j])
		}
	}
	return hsum8(&acc)
}

// dotQ4_1Act: value d·q + m, so a block adds d_w·d_x·Σq·q_x (lanes) + m·s_x (a separate sum).
func dotQ4_1Act(row []byte, d, sx []float32, q []int8) float32 {
	var acc [8]float32
	var summs float32
	nb := len(row) / 20
	d, sx, q = d[:nb], sx[:nb], q[:nb*32]
	for b := range nb {
		blk := (*[20]byte)(row[b*20:])
		qy := (*[32]int8)(q[b*32:])
		dw := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		m := f16Table[uint16(blk[2])|uint16(blk[3])<<8]
		summs = fma32(m, sx[b], summs)
		scale := dw * d[b]
		for j := range 4 {
			k := 4 * j
			var lo, hi int32
			for i := k; i < k+4; i++ {
				v := blk[4+i]
				lo += int32(v&15) * int32(qy[i])
				hi += int32(v>>4) * int32(qy[16+i])
			}
			acc[j] = fma32(scale, float32(lo), acc[j])
			acc[4+j] = fma32(scale, float32(hi), acc[4+j])
		}
	}
	return hsum8(&acc) + summs
}

// actDot multiplies weight row r by activation row t (both in blocks).
func actDot(w *Mat, r int, a *qact, t int) float32 {
	nb := w.Cols / 32
	row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
	d, q := a.d[t*nb:(t+1)*nb], a.q[t*nb*32:(t+1)*nb*32]
	amx := amxArithmetic(w)
	switch {
	case w.DType == tensor.Q8_0 && amx:
		return dotQ8_0AMX(row, d, q)
	case w.DType == tensor.Q8_0:
		return dotQ8_0Act(row, d, q)
	case w.DType == tensor.Q4_0 && amx:
		return dotQ4_0AMX(row, d, q)
	case w.DType == tensor.Q4_0:
		return dotQ4_0Act(row, d, q)
	case amx: // tensor.Q4_1
		return dotQ4_1AMX(row, d, a.s[t*nb:(t+1)*nb], q)
	}
	return dotQ4_1Act(row, d, a.s[t*nb:(t+1)*nb], q)
}

func quantRows(out []float32, w *Mat, a *qact, n, lo, hi int) {
	if amxArithmetic(w) {
		if !asmAMX(out, w, a, n, lo, hi) { // the rows-interleaved kernels (amxrows.go)
			quantPairs(out, w, a, 0, n, lo, hi)
		}
		return
	}
	if asmSmallN(out, w, a, n, lo, hi) { // few tokens (smallNRuns): each weight block loaded once for all (smalln_amd64.s)
		return
	}
	if n == 1 && asmMatVecQ8_0(out, w, a, lo, hi) { // decode: one call streams the rows (gemm_amd64.s)
		return
	}
	if r4, n4 := asmQ8Tiles(out, w, a, n, lo, hi); r4 > lo { // AVX-512 VNNI tiles (gemm_amd64.s)
		quantPairs(out, w, a, n4, n, lo, r4) // their rows' remaining tokens
		lo = r4
	}
	if simdQuantRows(out, w, a, n, lo, hi) { // AVX2 (simd_amd64.go, GOEXPERIMENT=simd)
		return
	}
	quantPairs(out, w, a, 0, n, lo, hi)
}

// quantPairs computes rows [lo,hi) for tokens [t0,t1), one row and token at a time.
func quantPairs(out []float32, w *Mat, a *qact, t0, t1, lo, hi int) {
	rows := w.Rows
	nb := w.Cols / 32
	vecQ8 := w.DType == tensor.Q8_0 && !amxArithmetic(w) // asmDotQ8_0 is vec_dot's order
	for r := lo; r < hi; r++ {
		for t := t0; t < t1; t++ {
			if vecQ8 {
				row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
				if v, ok := asmDotQ8_0(row, a.d8[t*nb*8:(t+1)*nb*8], a.q[t*nb*32:(t+1)*nb*32]); ok { // gemm_amd64.s
					out[t*rows+r] = v
					continue
				}
			}
			out[t*rows+r] = actDot(w, r, a, t)
		}
	}
}

// roundActivations returns x rounded to f16 or bf16 when w's dtype makes ggml convert its
// activations to that precision (the values then multiply exactly as before), else x.
func roundActivations(w *Mat, x []float32, s *Scratch) []float32 {
	k := actKindOf(w.DType)
	if k != actF16 && k != actBF16 {
		return x
	}
	if cap(s.xr) < len(x) {
		s.xr = make([]float32, len(x))
	}
	xr := s.xr[:len(x)]
	if k == actF16 {
		for i := asmRoundF16(xr, x); i < len(x); i++ { // F16C assembly for the most
			xr[i] = f16Round(x[i])
		}
	} else {
		for i, v := range x {
			xr[i] = bf16Round(v)
		}
	}
	return xr
}
