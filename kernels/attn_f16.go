package kernels

import (
	"fmt"
	"math"

	"github.com/tokenwise/tokenwise/tensor"
)

// Attention over a half-precision KV cache, computed the way llama.cpp's CPU backend does
// by default (F16 K and V cache, flash attention on):
//
//   - the query row is rounded to f16 once, so each score is a dot product of two f16
//     vectors (every product exact in float32) summed in float32 lanes, in the lane order
//     of ggml_vec_dot_f16 (see DotF16);
//   - scores go through an online softmax (running maximum M, running sum S, expf in float32);
//   - the weighted sum of V rows is accumulated in half precision: after every position the
//     accumulator is rounded back to f16 (ggml_vec_mad_f16, ggml_vec_scale_f16);
//   - the result is the accumulator times 1/S.
//
// Rounding q and the accumulator to f16 is what llama.cpp's default does; on a model with
// large outlier activations (SmolLM2) the difference from float32 attention reaches tenths
// of a logit after the 8-bit activation quantization of the following projections, so
// parity with llama.cpp needs the same arithmetic, not merely the same precision.

// ggmlAVX512 is true while the kernels reproduce one of llama.cpp's AVX-512 CPU builds, false
// for its AVX2 build (GGMLBuild, SetGGMLBuild in ggml.go). The two sum ggml_vec_dot_f16 in a
// different order (16 or 8 float32 lanes, four accumulators each: DotF16) and use different
// exp approximations in SiLU (expGGML).
var ggmlAVX512 = DefaultGGMLBuild() >= GGMLAVX512

// ggmlAMX is true while the kernels reproduce llama.cpp's sapphirerapids library (GGMLAMX):
// its AMX backend's arithmetic for the quantized products it takes.
var ggmlAMX = DefaultGGMLBuild() == GGMLAMX

// F16Encode rounds src to half precision into dst (round to nearest even, like ggml).
func F16Encode(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i := asmEncodeF16(dst, src); i < len(src); i++ { // F16C assembly for the most
		dst[i] = tensor.F32ToF16(src[i])
	}
}

// F16Decode widens half-precision values to float32 (exact).
func F16Decode(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = f16Table[h]
	}
}

// RoundF16 rounds each value of x to the nearest half-precision value, keeping it as a
// float32 (values beyond the f16 range stay finite here, where a conversion gives ±Inf).
func RoundF16(x []float32) {
	if simdRoundF16(x) {
		return
	}
	for i, v := range x {
		x[i] = roundF16(v)
	}
}

// roundF16 is one value of RoundF16, in float32 bit arithmetic (the same steps as the
// vector code): below 2⁻¹⁴ half precision has a fixed quantum of 2⁻²⁴, which adding and
// removing 0.5 rounds to; above, the mantissa is cut to 10 bits, rounding half to even.
func roundF16(v float32) float32 {
	u := math.Float32bits(v)
	sign := u & 0x80000000
	a := u &^ sign
	if a < 0x38800000 {
		f := math.Float32frombits(a)
		f = (f + 0.5) - 0.5
		return math.Float32frombits(math.Float32bits(f) | sign)
	}
	a = (a + 0xfff + (a>>13)&1) &^ 0x1fff
	return math.Float32frombits(a | sign)
}

// DotF16 is ggml_vec_dot_f16 of an f16 key row and a query already rounded to f16 (q holds
// f16 values as float32): the products are exact, and they are summed in the order of
// ggml's SIMD loop (four accumulators of 16 or 8 lanes, then its reduction tree), with any
// tail beyond a multiple of 64 (32) added in float64.
func DotF16(q []float32, k []uint16) float32 {
	k = k[:len(q)]
	if v, ok := asmDotF16(q, k, ggmlAVX512); ok { // F16C assembly (gemm_amd64.s)
		return v
	}
	if v, ok := simdDotF16(q, k); ok {
		return v
	}
	return dotF16Lanes(q, k, ggmlAVX512)
}

func dotF16Lanes(q []float32, k []uint16, lanes16 bool) float32 {
	epr := 8
	if lanes16 {
		epr = 16
	}
	step := 4 * epr
	n := len(q)
	np := n &^ (step - 1)
	var acc [4][16]float32
	for i := 0; i < np; i += step {
		for j := range 4 {
			for l := range epr {
				p := i + j*epr + l
				acc[j][l] = fma32(f16Table[k[p]], q[p], acc[j][l])
			}
		}
	}
	return reduceDotF16(&acc, lanes16, q, k, np)
}

// reduceDotF16 finishes ggml_vec_dot_f16 from its four accumulators of 16 or 8 lanes (the
// elements before np) and adds the tail from np on in float64: the same steps whichever
// loop (Go, archsimd or assembly) filled the accumulators.
func reduceDotF16(acc *[4][16]float32, lanes16 bool, q []float32, k []uint16, np int) float32 {
	epr := 8
	if lanes16 {
		epr = 16
	}
	n := len(q)
	for l := range epr {
		acc[0][l] += acc[2][l]
		acc[1][l] += acc[3][l]
	}
	for l := range epr {
		acc[0][l] += acc[1][l]
	}
	a := &acc[0]
	var r float32
	if lanes16 {
		r = reduceAdd16(a)
	} else {
		// 128-bit halves, then two horizontal adds.
		t0 := [4]float32{a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]}
		r = (t0[0] + t0[1]) + (t0[2] + t0[3])
	}
	s := float64(r)
	for i := np; i < n; i++ {
		s += float64(f16Table[k[i]] * q[i])
	}
	return float32(s)
}

// FlashF16 is one query row's attention state over an f16 value cache: the online softmax
// of ggml's flash attention with its half-precision accumulator. Use Reset, then Add for
// every attended position in order, then Finish.
type FlashF16 struct {
	acc  []float32 // Σ exp(s−M)·v, every element an f16 value held as float32
	m, s float32   // running maximum score, running Σ exp(s−M)

	sc, ms, vs []float32 // Attend's scores and per-position softmax factors
	acc2       []float32 // AttendPair's second accumulator
}

// Attend computes out, the attention of q16 (a query rounded to f16, RoundF16) over the
// cached positions whose rows are rows, in order: position j's key and value are
// k[rows[j]·stride+off:][:len(q16)] and the same slice of v. It gives the bits of Reset,
// then Add(DotF16(q16, key)·scale, value) for each position, then Finish, and on AVX2 runs
// as three passes instead (every score; the online softmax's factors in Go, with expf; the
// value accumulation with the accumulator in registers), which removes the per-position
// calls, spills and Go reductions that dominated attention over long contexts.
func (f *FlashF16) Attend(out, q16 []float32, k, v []uint16, rows []int32, off, stride int, scale float32) {
	hd := len(q16)
	n := len(rows)
	checkRowsF16("Attend", rows, k, v, off, stride, hd)
	if n == 0 || !asmAttendF16(hd) {
		f.Reset(hd)
		for _, r := range rows {
			s := int(r)*stride + off
			f.Add(DotF16(q16, k[s:s+hd])*scale, v[s:s+hd])
		}
		f.Finish(out)
		return
	}
	if cap(f.sc) < n {
		f.sc, f.ms, f.vs = make([]float32, n), make([]float32, n), make([]float32, n)
	}
	sc, ms, vs := f.sc[:n], f.ms[:n], f.vs[:n]
	asmAttnScoresF16(sc, q16, k, rows, off, stride, scale, ggmlAVX512)
	f.Reset(hd)
	f.steps(sc, ms, vs)
	asmAttnMadSeqF16(f.acc, v, rows, off, stride, ms, vs)
	f.Finish(out)
}

// checkRowsF16 panics unless every row's hd elements at off lie inside k and v (the
// assembly passes do not check); name is the caller's, for the message.
func checkRowsF16(name string, rows []int32, k, v []uint16, off, stride, hd int) {
	for j, r := range rows {
		if r < 0 || int(r)*stride+off+hd > min(len(k), len(v)) {
			panic(fmt.Sprintf("kernels: FlashF16.%s: position %d's row %d (stride %d, offset %d, %d elements) is outside the cache (%d, %d elements)", name, j, r, stride, off, hd, len(k), len(v)))
		}
	}
}

// steps runs Add's softmax steps over the scores sc without the vector work, from the state
// Reset left: ms[j] and vs[j] get position j's factors.
func (f *FlashF16) steps(sc, ms, vs []float32) {
	for j, s := range sc {
		ms[j], vs[j] = f.step(s)
	}
}

// AttendPair is Attend for two queries over the same cached rows, two query heads that
// share a KV head (grouped-query attention): q16 holds both, rounded to f16, one after the
// other, and out0 and out1 get their results, the bits of Attend(out0, q16[:hd], …) and
// Attend(out1, q16[hd:], …). Where the CPU has the two-head kernels (AVX-512; heads of 64 or
// a multiple of 128 elements) each key and value row is read and widened once for both,
// which a decode step's attention was bound by once its rows were prefetched; elsewhere it
// is the two calls.
func (f *FlashF16) AttendPair(out0, out1, q16 []float32, k, v []uint16, rows []int32, off, stride int, scale float32) {
	hd := len(q16) / 2
	n := len(rows)
	if n == 0 || !asmAttendPairF16(hd) {
		f.Attend(out0, q16[:hd], k, v, rows, off, stride, scale)
		f.Attend(out1, q16[hd:2*hd], k, v, rows, off, stride, scale)
		return
	}
	checkRowsF16("AttendPair", rows, k, v, off, stride, hd)
	if cap(f.sc) < 2*n {
		f.sc, f.ms, f.vs = make([]float32, 2*n), make([]float32, 2*n), make([]float32, 2*n)
	}
	sc, ms, vs := f.sc[:2*n], f.ms[:2*n], f.vs[:2*n]
	asmAttnScoresPairF16(sc, q16[:2*hd], k, rows, off, stride, scale)
	var sum [2]float32
	for h := range 2 {
		f.Reset(hd) // clears f.acc, head 0's accumulator
		f.steps(sc[h*n:(h+1)*n], ms[h*n:(h+1)*n], vs[h*n:(h+1)*n])
		sum[h] = f.s
	}
	if cap(f.acc2) < hd {
		f.acc2 = make([]float32, hd)
	}
	acc0, acc1 := f.acc[:hd], f.acc2[:hd]
	clear(acc1)
	asmAttnMadPairF16(acc0, acc1, v, rows, off, stride, ms[:n], vs[:n], ms[n:], vs[n:])
	finishF16(out0, acc0, sum[0])
	finishF16(out1, acc1, sum[1])
}

// Reset starts a new row with value vectors of dv elements.
func (f *FlashF16) Reset(dv int) {
	if cap(f.acc) < dv {
		f.acc = make([]float32, dv)
	}
	f.acc = f.acc[:dv]
	clear(f.acc)
	f.m, f.s = float32(math.Inf(-1)), 0
}

// Add takes one position: its scaled score s and its f16 value row v.
func (f *FlashF16) Add(s float32, v []uint16) {
	ms, vs := f.step(s)
	if ms != 1 { // a new maximum (scaling by exactly 1 would leave the f16 values as they are)
		ScaleRoundF16(f.acc, ms)
	}
	MadRoundF16(f.acc, vs, v)
}

// step is the online softmax's update for one score s: it moves the running maximum and sum
// and returns the factor the accumulator is scaled by (ms, 1 unless s is a new maximum) and
// the weight of this position's value row (vs).
func (f *FlashF16) step(s float32) (ms, vs float32) {
	ms, vs = 1, 1
	if s > f.m {
		ms = expf(f.m - s)
		f.m = s
	} else {
		vs = expf(s - f.m)
	}
	f.s = float32(f.s*ms) + vs // not fused: ggml rounds the product (the conversion forbids fusion)
	return ms, vs
}

// Finish writes the attention output: the accumulator divided by the softmax sum.
func (f *FlashF16) Finish(out []float32) { finishF16(out, f.acc, f.s) }

// finishF16 writes acc/s to out (0 where s is 0).
func finishF16(out, acc []float32, s float32) {
	inv := float32(0)
	if s != 0 {
		inv = 1 / s
	}
	out = out[:len(acc)]
	for i, a := range acc {
		out[i] = a * inv
	}
}

// expf is the C library's expf, which ggml's flash attention calls (expf32.go).
func expf(x float32) float32 { return expf32(x) }

// MadRoundF16 does y = f16(y + a·x) with a fused multiply-add, x f16 and y holding f16
// values: ggml_vec_mad_f16.
func MadRoundF16(y []float32, a float32, x []uint16) {
	x = x[:len(y)]
	if i := asmMadRoundF16(y, a, x); i > 0 { // F16C assembly (gemm_amd64.s)
		for ; i < len(y); i++ {
			y[i] = roundF16(fma32(f16Table[x[i]], a, y[i]))
		}
		return
	}
	if simdMadRoundF16(y, a, x) {
		return
	}
	for i, h := range x {
		y[i] = roundF16(fma32(f16Table[h], a, y[i]))
	}
}

// ScaleRoundF16 does y = f16(y·a): ggml_vec_scale_f16.
func ScaleRoundF16(y []float32, a float32) {
	if i := asmScaleRoundF16(y, a); i > 0 { // F16C assembly (gemm_amd64.s)
		for ; i < len(y); i++ {
			y[i] = roundF16(y[i] * a)
		}
		return
	}
	if simdScaleRoundF16(y, a) {
		return
	}
	for i, v := range y {
		y[i] = roundF16(v * a)
	}
}
