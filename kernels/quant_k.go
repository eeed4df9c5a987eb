package kernels

import (
	"math"

	"github.com/tokenwise/tokenwise/tensor"
)

// ggml-compatible products for the k-quants Q4_K, Q5_K and Q6_K: ggml quantizes the
// activations to Q8_K (super-blocks of 256: a float32 scale, 256 int8 and the sums of each 16
// quants) and sums integer products per super-block, which it converts to float once per
// super-block, so where each product lands decides the rounding. Two orders, both ggml's on
// x86 with AVX2 (the haswell and skylakex libraries alike):
//
//   - Q5_K and Q6_K weights go through ggml_vec_dot_q5_K_q8_K / _q6_K_q8_K: eight float
//     lanes, lane k holding bytes 4k..4k+3 of every 32-element run, added at the end as
//     hsum_float_8 does.
//   - Q4_K weights are repacked when the model loads (ggml's CPU_REPACK buffer, block_q4_Kx8,
//     for every matrix whose row count is a multiple of 8, which is every matrix of a real
//     model) and multiplied by ggml_gemv_q4_K_8x8_q8_K / ggml_gemm_q4_K_8x8_q8_K: one float
//     accumulator per (row, token) takes each super-block's whole integer sum times
//     d_w·d_x, another the mins' sum times dmin_w·d_x, and the result is their difference.
//     The gemm (4 tokens at a time) and the gemv (the rest) give a (row, token) the same
//     bits, so the product stays batch invariant. (ggml_vec_dot_q4_K_q8_K's lane order is
//     what llama.cpp runs only where the repack is off or the row count is not a multiple
//     of 8.)

// qactK holds activation rows quantized to Q8_K.
type qactK struct {
	d     []float32 // per super-block
	q     []int8
	bsums []int16 // 16 per super-block, int16 as ggml's block_q8_K holds them (|sum| ≤ 16·127)
	amx   amxPrep // the same in the AMX product's layouts, where it runs (prepareAMX)
	// amxD, amxComp: d and the sums of Σx the AMX-arithmetic kernels take (prepKAMX), by
	// super-block and then token in groups of eight tokens.
	amxD    []float32
	amxComp []int32
	amxN    int // tokens amxD and amxComp were made for; 0: none
	// dq, dp: the activations as the decode and few-token Q4_K and Q5_K kernels take them
	// (prepDecode): the sums of each super-block's bsums in pairs (one per run of 32), and
	// for the 512-bit kernels its runs in the order 0 2 1 3 4 6 5 7. dec: they are this
	// quantize's.
	dq  []int8
	dp  []int16
	dec bool
}

// kqDecode turns the k-quant decode and few-token kernels (kquant_dec_amd64.s) on or off;
// SetKQDecode.
var kqDecode = true

// SetKQDecode turns the k-quant decode and few-token kernels on or off and returns the setting before,
// for benchmarks that compare them with the row kernels in one process (the results are the
// same bits either way). Like SetISA it must not run concurrently with a kernel call.
func SetKQDecode(on bool) (prev bool) {
	prev, kqDecode = kqDecode, on
	return prev
}

// kqFew is the most tokens a k-quant product passes to the few-token kernels (q4KFewZMM
// and the rest, where useVNNI is on) rather than to the prefill tile and the rows kernels:
// a batched decode step, a verify pass of drafted tokens.
const kqFew = 7

// kqDecodeLayout reports whether a product of n tokens of dt weights runs kernels that take
// prepDecode's layout (kqDecodeRows; for Q5_K also a prompt's products, eight tokens at a
// time), so that prepare lays it out only then.
func kqDecodeLayout(dt tensor.DType, n int) bool {
	if !useAsmQ8 || !kqDecode || dt != tensor.Q4_K && dt != tensor.Q5_K {
		return false
	}
	return n == 1 || useVNNI && (n <= kqFew || dt == tensor.Q5_K)
}

// prepDecode lays out a quantize's activations (every token's) for the Q4_K and Q5_K decode
// and few-token kernels: the pair sums always, the permuted runs where useVNNI is on.
func (a *qactK) prepDecode() {
	if !useAsmQ8 || !kqDecode {
		return
	}
	nb := len(a.d)
	if cap(a.dp) < nb*8 {
		a.dp = make([]int16, nb*8)
	}
	a.dp = a.dp[:nb*8]
	for b := range nb {
		bs, dp := a.bsums[b*16:][:16], a.dp[b*8:][:8]
		for j := range dp {
			dp[j] = bs[2*j] + bs[2*j+1]
		}
	}
	if useVNNI { // the 512-bit kernels' run order
		if cap(a.dq) < nb*256 {
			a.dq = make([]int8, nb*256)
		}
		a.dq = a.dq[:nb*256]
		for b := range nb {
			q, dq := a.q[b*256:][:256], a.dq[b*256:][:256]
			for k, run := range [8]int{0, 2, 1, 3, 4, 6, 5, 7} {
				copy(dq[32*k:32*k+32], q[32*run:32*run+32])
			}
		}
	}
	a.dec = true
}

// quantize fills a with x (a multiple of 256 long) as ggml's quantize_row_q8_K does: the
// scale comes from the element of largest magnitude (its sign included), iscale = −127/max,
// quants round half to even, d = 1/iscale.
func (a *qactK) quantize(x []float32) {
	nb := len(x) / 256
	a.amxN = 0
	a.dec = false
	if cap(a.d) < nb {
		a.d = make([]float32, nb)
		a.q = make([]int8, nb*256)
		a.bsums = make([]int16, nb*16)
	}
	a.d, a.q, a.bsums = a.d[:nb], a.q[:nb*256], a.bsums[:nb*16]
	if asmQuantizeQ8K(a, x, nb) {
		return
	}
	a.quantizeGo(x, nb)
}

// quantizeGo is quantize's reference loop.
func (a *qactK) quantizeGo(x []float32, nb int) {
	for b := range nb {
		xb := x[b*256 : b*256+256]
		q := a.q[b*256 : b*256+256]
		var mx, amax float32
		for _, v := range xb {
			if av := abs32(v); av > amax {
				amax, mx = av, v
			}
		}
		if amax == 0 {
			a.d[b] = 0
			clear(q)
			clear(a.bsums[b*16 : b*16+16])
			continue
		}
		iscale := -127 / mx
		for i, v := range xb {
			q[i] = int8(min(127, int32(math.RoundToEven(float64(iscale*v)))))
		}
		for j := range 16 {
			var s int32
			for _, v := range q[j*16 : j*16+16] {
				s += int32(v)
			}
			a.bsums[b*16+j] = int16(s)
		}
		a.d[b] = 1 / iscale
	}
}

// q4KScales unpacks the eight 6-bit scales and mins of a Q4_K super-block.
func q4KScales(s *[12]byte) (sc, mn [8]int32) {
	for j := range 4 {
		sc[j] = int32(s[j] & 63)
		mn[j] = int32(s[j+4] & 63)
		sc[j+4] = int32(s[j+8]&15 | (s[j]>>6)<<4)
		mn[j+4] = int32(s[j+8]>>4 | (s[j+4]>>6)<<4)
	}
	return
}

// dotQ4_KAct is a Q4_K row times one Q8_K activation row in the repacked order of ggml's
// gemv_q4_K_8x8_q8_K: per super-block the exact integer sums Σ sc·q·x and Σ mn·bsum go into
// two float accumulators, with d_w·d_x and dmin_w·d_x.
func dotQ4_KAct(row []byte, d []float32, q []int8, bsums []int16) float32 {
	var acc, accM float32
	nb := len(row) / 144
	for i := range nb {
		blk := (*[144]byte)(row[i*144:])
		xq := (*[256]int8)(q[i*256:])
		bs := (*[16]int16)(bsums[i*16:])
		dw := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		dm := f16Table[uint16(blk[2])|uint16(blk[3])<<8]
		sc, mn := q4KScales((*[12]byte)(blk[4:16]))
		var isum, imin int32
		for j := range 4 {
			bits := blk[16+32*j : 16+32*j+32]
			var pl, ph int32
			for b, v := range bits {
				pl += int32(v&15) * int32(xq[64*j+b])
				ph += int32(v>>4) * int32(xq[64*j+32+b])
			}
			isum += sc[2*j]*pl + sc[2*j+1]*ph
		}
		for j := range 8 {
			imin += mn[j] * (int32(bs[2*j]) + int32(bs[2*j+1]))
		}
		acc = fma32(float32(isum), dw*d[i], acc)
		accM = fma32(float32(imin), dm*d[i], accM)
	}
	return acc - accM
}

// dotQ5_KAct is a Q5_K row times one Q8_K activation row in ggml's AVX2 order: lane k of
// run j (the 32 elements of sub-block j: the low or high nibbles of 32 bytes, bit j of qh
// on top) sums bytes 4k..4k+3 times the run's scale; the mins' integer sum meets dmin_w·d_x
// in one scalar accumulator (a fused multiply-add in ggml's build: vfmadd231ss).
func dotQ5_KAct(row []byte, d []float32, q []int8, bsums []int16) float32 {
	var acc [8]float32
	var summs float32
	nb := len(row) / 176
	for i := range nb {
		blk := (*[176]byte)(row[i*176:])
		xq := (*[256]int8)(q[i*256:])
		bs := (*[16]int16)(bsums[i*16:])
		dd := d[i] * f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		dmin := -d[i] * f16Table[uint16(blk[2])|uint16(blk[3])<<8]
		sc, mn := q4KScales((*[12]byte)(blk[4:16]))
		var imin int32
		for j := range 8 {
			imin += mn[j] * (int32(bs[2*j]) + int32(bs[2*j+1]))
		}
		summs = fma32(dmin, float32(imin), summs)
		qh, qs := blk[16:48], blk[48:176]
		var sumi [8]int32
		for j := range 8 {
			bits := qs[32*(j/2) : 32*(j/2)+32]
			x := xq[32*j : 32*j+32]
			shift := 4 * uint(j%2)
			for k := range 8 {
				var p int32
				for b := 4 * k; b < 4*k+4; b++ {
					v := bits[b]>>shift&15 | (qh[b]>>uint(j)&1)<<4
					p += int32(v) * int32(x[b])
				}
				sumi[k] += sc[j] * p
			}
		}
		for k := range 8 {
			acc[k] = fma32(dd, float32(sumi[k]), acc[k])
		}
	}
	return hsum8(&acc) + summs
}

// dotQ6_KAct is a Q6_K row times one Q8_K activation row. The 6-bit values are taken as
// 0..63 and the −32 offset is subtracted as 32·Σ scale·bsum, lane k holding sub-blocks 2k
// and 2k+1, as ggml's AVX2 code does.
func dotQ6_KAct(row []byte, d []float32, q []int8, bsums []int16) float32 {
	var acc [8]float32
	nb := len(row) / 210
	for i := range nb {
		blk := (*[210]byte)(row[i*210:])
		xq := (*[256]int8)(q[i*256:])
		bs := (*[16]int16)(bsums[i*16:])
		ql, qh := blk[0:128], blk[128:192]
		var sc [16]int32
		for j := range 16 {
			sc[j] = int32(int8(blk[192+j]))
		}
		dd := d[i] * f16Table[uint16(blk[208])|uint16(blk[209])<<8]
		var sumi [8]int32
		for j := range 2 {
			l1, l2, h := ql[64*j:64*j+32], ql[64*j+32:64*j+64], qh[32*j:32*j+32]
			for t := range 4 {
				x := xq[128*j+32*t : 128*j+32*t+32]
				m := 4*j + t
				for k := range 8 {
					var p int32
					for b := 4 * k; b < 4*k+4; b++ {
						var v byte
						switch t {
						case 0:
							v = l1[b]&15 | (h[b]&3)<<4
						case 1:
							v = l2[b]&15 | (h[b]>>2&3)<<4
						case 2:
							v = l1[b]>>4 | (h[b]>>4&3)<<4
						default:
							v = l2[b]>>4 | (h[b]>>6&3)<<4
						}
						p += int32(v) * int32(x[b])
					}
					s := sc[2*m]
					if k >= 4 {
						s = sc[2*m+1]
					}
					sumi[k] += s * p
				}
			}
		}
		for k := range 8 {
			sumi[k] -= 32 * (int32(bs[2*k])*sc[2*k] + int32(bs[2*k+1])*sc[2*k+1])
			acc[k] = fma32(dd, float32(sumi[k]), acc[k])
		}
	}
	return hsum8(&acc)
}

// kQuantRows computes rows [lo,hi) of a Q4_K, Q5_K or Q6_K matrix times n Q8_K activation
// rows: the assembly where it runs (asmKQuantRows, kquant_amd64.s), else the Go reference
// row by row.
func kQuantRows(out []float32, w *Mat, a *qactK, n, lo, hi int) {
	amx := amxArithmetic(w)
	if amx && amxKQuantRows(out, w, a, n, lo, hi) {
		return
	}
	if !amx && asmKQuantRows(out, w, a, n, lo, hi) {
		return
	}
	rows, nb := w.Rows, w.Cols/256
	dot := dotQ6_KAct
	switch {
	case amx:
		dot = dotKAMXFor(w.DType)
	case w.DType == tensor.Q4_K:
		dot = dotQ4_KAct
	case w.DType == tensor.Q5_K:
		dot = dotQ5_KAct
	}
	for r := lo; r < hi; r++ {
		row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
		for t := range n {
			out[t*rows+r] = dot(row, a.d[t*nb:(t+1)*nb], a.q[t*nb*256:(t+1)*nb*256], a.bsums[t*nb*16:(t+1)*nb*16])
		}
	}
}
