//go:build goexperiment.simd && amd64

package kernels

import (
	"simd/archsimd"
	"unsafe"

	"github.com/tokenwise/tokenwise/tensor"
)

// AVX2/FMA kernels written with Go's simd/archsimd (GOEXPERIMENT=simd). Each is a top-level
// function with its loop inside: archsimd values do not survive being captured by closures
// (the compiler then spills every vector through memory), so the pool's closures only call
// these. Loads use unchecked pointers; the callers have checked the lengths.

// simdCPU reports whether the CPU runs these kernels: AVX2 and FMA (x86-64-v3). useSIMD
// (isa_amd64.go) turns them on under ISAAVX2 and ISAAVX512.
func simdCPU() bool { return archsimd.X86.AVX2() && archsimd.X86.FMA() }

func ldF32(p unsafe.Pointer, i int) archsimd.Float32x8 {
	return archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p, 4*i)))
}

func ldU16(p unsafe.Pointer, i int) archsimd.Uint16x8 {
	return archsimd.LoadUint16x8((*[8]uint16)(unsafe.Add(p, 2*i)))
}

// hsumF32x8 adds the eight lanes (any order will do for float32 weights). The compiler
// does scalar float arithmetic with legacy SSE instructions, which on Intel cores pay for
// dirty upper halves of the YMM registers on every instruction, so the vector state is
// cleared (VZEROUPPER) before the scalar adds; every vector is stored before that.
func hsumF32x8(v archsimd.Float32x8) float32 {
	var a [8]float32
	v.Store(&a)
	archsimd.ClearAVXUpperBits()
	return lanesSum(&a)
}

// hsum4 is hsumF32x8 of four vectors.
func hsum4(s0, s1, s2, s3 archsimd.Float32x8) (float32, float32, float32, float32) {
	var a [4][8]float32
	s0.Store(&a[0])
	s1.Store(&a[1])
	s2.Store(&a[2])
	s3.Store(&a[3])
	archsimd.ClearAVXUpperBits()
	return lanesSum(&a[0]), lanesSum(&a[1]), lanesSum(&a[2]), lanesSum(&a[3])
}

// simdMatVecRows is matVecRows for f32/f16/bf16 weights; it reports false for other dtypes.
func simdMatVecRows(out []float32, w *Mat, x []float32, lo, hi int) bool {
	if !useSIMD {
		return false
	}
	n := w.Cols
	x = x[:n]
	out = out[lo:hi]
	switch w.DType {
	case tensor.F32:
		d := w.f32[lo*n : hi*n]
		r := 0
		for ; r+4 <= len(out); r += 4 {
			out[r], out[r+1], out[r+2], out[r+3] = dot4F32x8(d[r*n:(r+4)*n], n, x)
		}
		for ; r < len(out); r++ {
			out[r] = dotF32x8(d[r*n:(r+1)*n], x)
		}
	case tensor.F16, tensor.BF16:
		d := w.u16[lo*n : hi*n]
		half := w.DType == tensor.F16
		r := 0
		for ; r+4 <= len(out); r += 4 {
			out[r], out[r+1], out[r+2], out[r+3] = dot4U16x8(d[r*n:(r+4)*n], n, x, half)
		}
		for ; r < len(out); r++ {
			_, out[r] = dot1U16x8(d[r*n:(r+1)*n], x, half)
		}
	default:
		return false
	}
	return true
}

// dotF32x8 is Σ a[i]·b[i] over len(a) (b at least as long).
func dotF32x8(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	pa, pb := unsafe.Pointer(unsafe.SliceData(a)), unsafe.Pointer(unsafe.SliceData(b))
	var s0, s1 archsimd.Float32x8
	i := 0
	for ; i+16 <= n; i += 16 {
		s0 = ldF32(pa, i).MulAdd(ldF32(pb, i), s0)
		s1 = ldF32(pa, i+8).MulAdd(ldF32(pb, i+8), s1)
	}
	for ; i+8 <= n; i += 8 {
		s0 = ldF32(pa, i).MulAdd(ldF32(pb, i), s0)
	}
	s := hsumF32x8(s0.Add(s1))
	for ; i < n; i++ {
		s += a[i] * b[i]
	}
	return s
}

// dot4F32x8 is four rows of w (4×n) times x, each x vector loaded once for the four rows.
func dot4F32x8(w []float32, n int, x []float32) (float32, float32, float32, float32) {
	w = w[:4*n]
	x = x[:n]
	pw, px := unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(x))
	var s0, s1, s2, s3 archsimd.Float32x8
	i := 0
	for ; i+8 <= n; i += 8 {
		xv := ldF32(px, i)
		s0 = ldF32(pw, i).MulAdd(xv, s0)
		s1 = ldF32(pw, n+i).MulAdd(xv, s1)
		s2 = ldF32(pw, 2*n+i).MulAdd(xv, s2)
		s3 = ldF32(pw, 3*n+i).MulAdd(xv, s3)
	}
	r0, r1, r2, r3 := hsum4(s0, s1, s2, s3)
	for ; i < n; i++ {
		xv := x[i]
		r0 += w[i] * xv
		r1 += w[n+i] * xv
		r2 += w[2*n+i] * xv
		r3 += w[3*n+i] * xv
	}
	return r0, r1, r2, r3
}

// f16Consts are widenF16's constants, made once outside the loops (the compiler would
// otherwise rebuild each broadcast in every iteration). Keep it at four vectors: with six,
// the q8_0 row kernel ran three times slower (measured with BenchmarkRowDotQ8_0).
type f16Consts struct {
	sign, mag, bias, one archsimd.Uint32x8
}

func newF16Consts() f16Consts {
	return f16Consts{archsimd.BroadcastUint32x8(0x8000), archsimd.BroadcastUint32x8(0x7fff),
		archsimd.BroadcastUint32x8(112 << 23), archsimd.BroadcastUint32x8(1 << 23)}
}

// widenF16 converts eight f16 values to float32 in integer arithmetic: (bits&0x7fff)<<13
// plus 112 in the exponent field is the float32 of a normal half. A subnormal half
// (exponent 0, mantissa m) gets 113 instead, which reads as 2⁻¹⁴·(1 + m/1024), and then
// 2⁻¹⁴ is subtracted, leaving the exact 2⁻¹⁴·m/1024. No float operation here sees a
// denormal operand: the earlier form, a multiplication of the shifted bits by 2¹¹², made
// every subnormal half (small block scales of q8_0/q4 weights, weights near zero in f16) a
// float32 denormal, and each of those costs a ~100-cycle microcode assist on Intel — half
// of a decode step's time on a synthetic q8_0 model. Weights are finite, so Inf/NaN need
// no care.
func widenF16(h archsimd.Uint16x8, c *f16Consts) archsimd.Float32x8 {
	u := h.ExtendToUint32()
	sign := u.And(c.sign).ShiftAllLeft(16)
	m := u.And(c.mag).ShiftAllLeft(13)
	sub := c.one.AsInt32x8().Greater(m.AsInt32x8()) // exponent 0: m < 1<<23
	one := c.one.Masked(sub)
	f := m.Add(c.bias).Add(one).AsFloat32x8()
	return f.Sub(c.bias.Add(one).Masked(sub).AsFloat32x8()).AsUint32x8().Or(sign).AsFloat32x8()
}

// widen converts eight f16 (half) or bf16 values to float32 (bf16 is the top half of a
// float32).
func widen(h archsimd.Uint16x8, half bool) archsimd.Float32x8 {
	if !half {
		return h.ExtendToUint32().ShiftAllLeft(16).AsFloat32x8()
	}
	c := newF16Consts()
	return widenF16(h, &c)
}

func widen1(v uint16, half bool) float32 {
	if half {
		return f16Table[v]
	}
	return bf16(v)
}

func dot1U16x8(w []uint16, x []float32, half bool) (int, float32) {
	n := len(w)
	x = x[:n]
	pw, px := unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(x))
	var s0 archsimd.Float32x8
	i := 0
	for ; i+8 <= n; i += 8 {
		s0 = widen(ldU16(pw, i), half).MulAdd(ldF32(px, i), s0)
	}
	s := hsumF32x8(s0)
	for ; i < n; i++ {
		s += widen1(w[i], half) * x[i]
	}
	return n, s
}

// dot4U16x8 is four rows of f16 or bf16 weights (4×n) times x.
func dot4U16x8(w []uint16, n int, x []float32, half bool) (float32, float32, float32, float32) {
	w = w[:4*n]
	x = x[:n]
	var s0, s1, s2, s3 archsimd.Float32x8
	var i int
	if half {
		i, s0, s1, s2, s3 = dot4F16Loop(w, n, x)
	} else {
		i, s0, s1, s2, s3 = dot4BF16Loop(w, n, x)
	}
	r0, r1, r2, r3 := hsum4(s0, s1, s2, s3)
	for ; i < n; i++ {
		xv := x[i]
		r0 += widen1(w[i], half) * xv
		r1 += widen1(w[n+i], half) * xv
		r2 += widen1(w[2*n+i], half) * xv
		r3 += widen1(w[3*n+i], half) * xv
	}
	return r0, r1, r2, r3
}

func dot4F16Loop(w []uint16, n int, x []float32) (i int, s0, s1, s2, s3 archsimd.Float32x8) {
	var acc [32]float32
	if i = asmDot4F16(w, n, x, &acc); i > 0 { // F16C assembly (gemm_amd64.s), same lanes
		return i, archsimd.LoadFloat32x8((*[8]float32)(acc[0:8])), archsimd.LoadFloat32x8((*[8]float32)(acc[8:16])),
			archsimd.LoadFloat32x8((*[8]float32)(acc[16:24])), archsimd.LoadFloat32x8((*[8]float32)(acc[24:32]))
	}
	pw, px := unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(x))
	c := newF16Consts()
	for ; i+8 <= n; i += 8 {
		xv := ldF32(px, i)
		s0 = widenF16(ldU16(pw, i), &c).MulAdd(xv, s0)
		s1 = widenF16(ldU16(pw, n+i), &c).MulAdd(xv, s1)
		s2 = widenF16(ldU16(pw, 2*n+i), &c).MulAdd(xv, s2)
		s3 = widenF16(ldU16(pw, 3*n+i), &c).MulAdd(xv, s3)
	}
	return
}

func dot4BF16Loop(w []uint16, n int, x []float32) (i int, s0, s1, s2, s3 archsimd.Float32x8) {
	pw, px := unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(x))
	for ; i+8 <= n; i += 8 {
		xv := ldF32(px, i)
		s0 = ldU16(pw, i).ExtendToUint32().ShiftAllLeft(16).AsFloat32x8().MulAdd(xv, s0)
		s1 = ldU16(pw, n+i).ExtendToUint32().ShiftAllLeft(16).AsFloat32x8().MulAdd(xv, s1)
		s2 = ldU16(pw, 2*n+i).ExtendToUint32().ShiftAllLeft(16).AsFloat32x8().MulAdd(xv, s2)
		s3 = ldU16(pw, 3*n+i).ExtendToUint32().ShiftAllLeft(16).AsFloat32x8().MulAdd(xv, s3)
	}
	return
}

// simdBlock4 is matMulBlock4 (four f32 weight rows × all n tokens, into columns r..r+3 of
// out) with two tokens per pass: eight vector accumulators, four weight loads and two
// activation loads per eight FMAs.
func simdBlock4(out, w, x []float32, n, cols, rows, r int) bool {
	if !useSIMD {
		return false
	}
	w = w[:4*cols]
	x = x[:n*cols]
	t := 0
	for ; t+2 <= n; t += 2 {
		c := block4x2F32x8(w, cols, x[t*cols:(t+2)*cols])
		o0 := out[t*rows+r : t*rows+r+4 : t*rows+r+4]
		o1 := out[(t+1)*rows+r : (t+1)*rows+r+4 : (t+1)*rows+r+4]
		copy(o0, c[:4])
		copy(o1, c[4:])
	}
	for ; t < n; t++ {
		o := out[t*rows+r : t*rows+r+4 : t*rows+r+4]
		o[0], o[1], o[2], o[3] = dot4F32x8(w, cols, x[t*cols:(t+1)*cols])
	}
	return true
}

func block4x2F32x8(w []float32, n int, x []float32) (c [8]float32) {
	w = w[:4*n]
	x = x[:2*n]
	pw, px := unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(x))
	var a0, a1, a2, a3, b0, b1, b2, b3 archsimd.Float32x8
	i := 0
	for ; i+8 <= n; i += 8 {
		x0, x1 := ldF32(px, i), ldF32(px, n+i)
		w0 := ldF32(pw, i)
		a0 = w0.MulAdd(x0, a0)
		b0 = w0.MulAdd(x1, b0)
		w1 := ldF32(pw, n+i)
		a1 = w1.MulAdd(x0, a1)
		b1 = w1.MulAdd(x1, b1)
		w2 := ldF32(pw, 2*n+i)
		a2 = w2.MulAdd(x0, a2)
		b2 = w2.MulAdd(x1, b2)
		w3 := ldF32(pw, 3*n+i)
		a3 = w3.MulAdd(x0, a3)
		b3 = w3.MulAdd(x1, b3)
	}
	var l [8][8]float32 // all stored before VZEROUPPER
	a0.Store(&l[0])
	a1.Store(&l[1])
	a2.Store(&l[2])
	a3.Store(&l[3])
	b0.Store(&l[4])
	b1.Store(&l[5])
	b2.Store(&l[6])
	b3.Store(&l[7])
	archsimd.ClearAVXUpperBits()
	for k := range c {
		c[k] = lanesSum(&l[k])
	}
	tile4x2Tail(&c, w, n, x, i)
	return c
}

// simdQuantRows is quantRows with AVX2 integer block dots. The arithmetic is ggml's AVX2
// vec_dot: |w|·sign(x,w) byte products summed in pairs (VPMADDUBSW), pairs of pairs
// (VPMADDWD), converted to float and fused-multiply-added with d_w·d_x into eight lanes.
func simdQuantRows(out []float32, w *Mat, a *qact, n, lo, hi int) bool {
	if !useSIMD {
		return false
	}
	rows, nb := w.Rows, w.Cols/32
	t0 := 0
	if n >= 4 && nb <= maxPanelBlocks {
		t0 = n &^ 3
		quantPanel(out, w, a, t0, lo, hi)
	}
	for r := lo; r < hi; r++ {
		row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
		for t := t0; t < n; t++ {
			d8, q := a.d8[t*nb*8:(t+1)*nb*8], a.q[t*nb*32:(t+1)*nb*32]
			var v float32
			switch w.DType {
			case tensor.Q8_0:
				v = dotQ8_0Simd(row, d8, q)
			case tensor.Q4_0:
				v = dotQ4Simd(row, d8, nil, q)
			default:
				v = dotQ4Simd(row, d8, a.s8[t*nb*8:(t+1)*nb*8], q)
			}
			out[t*rows+r] = v
		}
	}
	return true
}

// The one-token block loops touch no scalar floats: a block's f16 scale is loaded with the
// bytes after it as eight u16 lanes, broadcast from lane 0 and widened in vector registers,
// and the activation scales come pre-broadcast (qact.d8, s8), so the loop is VEX code only.

// blockScale widens the f16 at p to all eight lanes.
func blockScale(p unsafe.Pointer, c *f16Consts) archsimd.Float32x8 {
	return widenF16(archsimd.LoadUint16x8((*[8]uint16)(p)).Broadcast1To8(), c)
}

func dotQ8_0Simd(row []byte, d8 []float32, q []int8) float32 {
	if v, ok := asmDotQ8_0(row, d8, q); ok { // F16C assembly (gemm_amd64.s)
		return v
	}
	nb := len(row) / 34
	d8, q = d8[:nb*8], q[:nb*32]
	pr, pq, pd := unsafe.Pointer(unsafe.SliceData(row)), unsafe.Pointer(unsafe.SliceData(q)), unsafe.Pointer(unsafe.SliceData(d8))
	ones := archsimd.BroadcastInt16x16(1)
	c := newF16Consts()
	var acc archsimd.Float32x8
	for b := range nb {
		blk := unsafe.Add(pr, 34*b)
		wq := ldI8(blk, 2)
		p := wq.Abs().AsUint8x32().DotProductPairsSaturated(ldI8(pq, 32*b).CopySign(wq)).DotProductPairs(ones)
		acc = p.ConvertToFloat32().MulAdd(blockScale(blk, &c).Mul(ldF8(pd, b)), acc)
	}
	return hsumGGML(acc)
}

// hsumGGML stores v, clears the vector state and adds the lanes in ggml's order.
func hsumGGML(v archsimd.Float32x8) float32 {
	var l [8]float32
	v.Store(&l)
	archsimd.ClearAVXUpperBits()
	return hsum8(&l)
}

// dotQ4Simd does Q4_0 rows (s8 == nil: nibbles q−8, signed products) and Q4_1 rows (s8:
// the activations' d·Σq, unsigned nibbles, plus the chain Σ m·s, run in every lane).
func dotQ4Simd(row []byte, d8, s8 []float32, q []int8) float32 {
	ones := archsimd.BroadcastInt16x16(1)
	c := newF16Consts()
	var acc archsimd.Float32x8
	if s8 == nil {
		nb := len(row) / 18
		d8, q = d8[:nb*8], q[:nb*32]
		pr, pq, pd := unsafe.Pointer(unsafe.SliceData(row)), unsafe.Pointer(unsafe.SliceData(q)), unsafe.Pointer(unsafe.SliceData(d8))
		eight := archsimd.BroadcastInt8x32(8)
		for b := range nb {
			blk := unsafe.Add(pr, 18*b)
			wq := nibbles(unsafe.Add(blk, 2)).AsInt8x32().Sub(eight)
			p := wq.Abs().AsUint8x32().DotProductPairsSaturated(ldI8(pq, 32*b).CopySign(wq)).DotProductPairs(ones)
			acc = p.ConvertToFloat32().MulAdd(blockScale(blk, &c).Mul(ldF8(pd, b)), acc)
		}
		return hsumGGML(acc)
	}
	nb := len(row) / 20
	d8, s8, q = d8[:nb*8], s8[:nb*8], q[:nb*32]
	pr, pq, pd, ps := unsafe.Pointer(unsafe.SliceData(row)), unsafe.Pointer(unsafe.SliceData(q)),
		unsafe.Pointer(unsafe.SliceData(d8)), unsafe.Pointer(unsafe.SliceData(s8))
	var sm archsimd.Float32x8
	for b := range nb {
		blk := unsafe.Add(pr, 20*b)
		sm = blockScale(unsafe.Add(blk, 2), &c).MulAdd(ldF8(ps, b), sm)
		p := nibbles(unsafe.Add(blk, 4)).DotProductPairsSaturated(ldI8(pq, 32*b)).DotProductPairs(ones)
		acc = p.ConvertToFloat32().MulAdd(blockScale(blk, &c).Mul(ldF8(pd, b)), acc)
	}
	var l, m [8]float32
	acc.Store(&l)
	sm.Store(&m)
	archsimd.ClearAVXUpperBits()
	return hsum8(&l) + m[0]
}

// nibbles spreads 16 bytes of 4-bit pairs to 32 bytes: low nibbles first (elements 0..15 of
// a block), then high nibbles (16..31).
func nibbles(p unsafe.Pointer) archsimd.Uint8x32 {
	raw := archsimd.LoadUint8x16((*[16]uint8)(p))
	// The high nibbles are shifted down by a multiply-high by 2¹² in 16-bit lanes: the
	// compiler emits right shifts with a legacy-SSE count move, which is slow while the
	// upper halves are dirty on Intel. The mask drops the neighbouring byte's bits.
	var v archsimd.Uint8x32
	v = v.SetHi(raw).AsUint16x16().MulHigh(archsimd.BroadcastUint16x16(1 << 12)).AsUint8x32().SetLo(raw)
	return v.And(archsimd.BroadcastUint8x32(15))
}

// maxPanelBlocks bounds the per-row tables of weight scales that quantPanel keeps on the
// stack (rows of up to 16384 columns; longer rows take the one-token path).
const maxPanelBlocks = 512

// quantPanel does the prefill case, tokens [0, n4) four at a time: each weight block is
// loaded (and, for 4-bit weights, unpacked) once for four tokens, and the weight scales of
// the row are widened once into broadcast vectors, so the block loop is vector code only.
// The per-lane arithmetic is the same as the one-token kernels' (ggml's).
func quantPanel(out []float32, w *Mat, a *qact, n4, lo, hi int) {
	var dw, mw [maxPanelBlocks][8]float32
	rows, nb := w.Rows, w.Cols/32
	bb := w.rowBytes / nb
	for r := lo; r < hi; r++ {
		pr := unsafe.Pointer(unsafe.SliceData(w.Data[r*w.rowBytes : (r+1)*w.rowBytes]))
		for b := range nb {
			blk := unsafe.Add(pr, bb*b)
			v := f16Table[*(*uint16)(blk)]
			dw[b] = [8]float32{v, v, v, v, v, v, v, v}
			if w.DType == tensor.Q4_1 {
				m := f16Table[*(*uint16)(unsafe.Add(blk, 2))]
				mw[b] = [8]float32{m, m, m, m, m, m, m, m}
			}
		}
		var res [4]float32
		for t := 0; t < n4; t += 4 {
			switch w.DType {
			case tensor.Q8_0:
				q8x4(pr, &dw, a, t, nb, &res)
			case tensor.Q4_0:
				q4x4(pr, 18, &dw, nil, a, t, nb, &res)
			default:
				q4x4(pr, 20, &dw, &mw, a, t, nb, &res)
			}
			for k, v := range res {
				out[(t+k)*rows+r] = v
			}
		}
	}
}

// tokenPtrs returns where tokens t..t+3's quants and broadcast scales start.
func tokenPtrs(a *qact, t, nb int) (q, d, s [4]unsafe.Pointer) {
	// Local slices: a is shared by the workers and must not be written.
	aq, ad, as := a.q[:(t+4)*nb*32], a.d8[:(t+4)*nb*8], a.s8[:(t+4)*nb*8]
	for k := range 4 {
		q[k] = unsafe.Pointer(&aq[(t+k)*nb*32])
		d[k] = unsafe.Pointer(&ad[(t+k)*nb*8])
		s[k] = unsafe.Pointer(&as[(t+k)*nb*8])
	}
	return
}

func ldF8(p unsafe.Pointer, b int) archsimd.Float32x8 {
	return archsimd.LoadFloat32x8((*[8]float32)(unsafe.Add(p, 32*b)))
}

func ldI8(p unsafe.Pointer, off int) archsimd.Int8x32 {
	return archsimd.LoadInt8x32((*[32]int8)(unsafe.Add(p, off)))
}

// finish4 stores four lane accumulators, leaves the vector state clean and adds the lanes
// in ggml's order.
func finish4(c0, c1, c2, c3 archsimd.Float32x8, res *[4]float32) {
	var l [4][8]float32
	c0.Store(&l[0])
	c1.Store(&l[1])
	c2.Store(&l[2])
	c3.Store(&l[3])
	archsimd.ClearAVXUpperBits()
	for k := range res {
		res[k] = hsum8(&l[k])
	}
}

//go:noinline
func q8x4(pr unsafe.Pointer, dw *[maxPanelBlocks][8]float32, a *qact, t, nb int, res *[4]float32) {
	q, d, _ := tokenPtrs(a, t, nb)
	ones := archsimd.BroadcastInt16x16(1)
	var c0, c1, c2, c3 archsimd.Float32x8
	for b := range nb {
		wq := ldI8(pr, 34*b+2)
		aw := wq.Abs().AsUint8x32()
		sw := archsimd.LoadFloat32x8(&dw[b])
		p := aw.DotProductPairsSaturated(ldI8(q[0], 32*b).CopySign(wq)).DotProductPairs(ones).ConvertToFloat32()
		c0 = p.MulAdd(sw.Mul(ldF8(d[0], b)), c0)
		p = aw.DotProductPairsSaturated(ldI8(q[1], 32*b).CopySign(wq)).DotProductPairs(ones).ConvertToFloat32()
		c1 = p.MulAdd(sw.Mul(ldF8(d[1], b)), c1)
		p = aw.DotProductPairsSaturated(ldI8(q[2], 32*b).CopySign(wq)).DotProductPairs(ones).ConvertToFloat32()
		c2 = p.MulAdd(sw.Mul(ldF8(d[2], b)), c2)
		p = aw.DotProductPairsSaturated(ldI8(q[3], 32*b).CopySign(wq)).DotProductPairs(ones).ConvertToFloat32()
		c3 = p.MulAdd(sw.Mul(ldF8(d[3], b)), c3)
	}
	finish4(c0, c1, c2, c3, res)
}

// q4x4: Q4_0 (mw == nil, block size 18) or Q4_1 (mw: the blocks' m, block size 20; the
// m·s terms run in all lanes of m0..m3, the same sequential chain ggml sums as a scalar).
//
//go:noinline
func q4x4(pr unsafe.Pointer, bb int, dw, mw *[maxPanelBlocks][8]float32, a *qact, t, nb int, res *[4]float32) {
	q, d, s := tokenPtrs(a, t, nb)
	ones := archsimd.BroadcastInt16x16(1)
	var c0, c1, c2, c3 archsimd.Float32x8
	if mw == nil {
		eight := archsimd.BroadcastInt8x32(8)
		for b := range nb {
			wq := nibbles(unsafe.Add(pr, bb*b+2)).AsInt8x32().Sub(eight)
			aw := wq.Abs().AsUint8x32()
			sw := archsimd.LoadFloat32x8(&dw[b])
			p := aw.DotProductPairsSaturated(ldI8(q[0], 32*b).CopySign(wq)).DotProductPairs(ones).ConvertToFloat32()
			c0 = p.MulAdd(sw.Mul(ldF8(d[0], b)), c0)
			p = aw.DotProductPairsSaturated(ldI8(q[1], 32*b).CopySign(wq)).DotProductPairs(ones).ConvertToFloat32()
			c1 = p.MulAdd(sw.Mul(ldF8(d[1], b)), c1)
			p = aw.DotProductPairsSaturated(ldI8(q[2], 32*b).CopySign(wq)).DotProductPairs(ones).ConvertToFloat32()
			c2 = p.MulAdd(sw.Mul(ldF8(d[2], b)), c2)
			p = aw.DotProductPairsSaturated(ldI8(q[3], 32*b).CopySign(wq)).DotProductPairs(ones).ConvertToFloat32()
			c3 = p.MulAdd(sw.Mul(ldF8(d[3], b)), c3)
		}
		finish4(c0, c1, c2, c3, res)
		return
	}
	var m0, m1, m2, m3 archsimd.Float32x8
	for b := range nb {
		nib := nibbles(unsafe.Add(pr, bb*b+4))
		sw := archsimd.LoadFloat32x8(&dw[b])
		mv := archsimd.LoadFloat32x8(&mw[b])
		p := nib.DotProductPairsSaturated(ldI8(q[0], 32*b)).DotProductPairs(ones).ConvertToFloat32()
		c0 = p.MulAdd(sw.Mul(ldF8(d[0], b)), c0)
		m0 = mv.MulAdd(ldF8(s[0], b), m0)
		p = nib.DotProductPairsSaturated(ldI8(q[1], 32*b)).DotProductPairs(ones).ConvertToFloat32()
		c1 = p.MulAdd(sw.Mul(ldF8(d[1], b)), c1)
		m1 = mv.MulAdd(ldF8(s[1], b), m1)
		p = nib.DotProductPairsSaturated(ldI8(q[2], 32*b)).DotProductPairs(ones).ConvertToFloat32()
		c2 = p.MulAdd(sw.Mul(ldF8(d[2], b)), c2)
		m2 = mv.MulAdd(ldF8(s[2], b), m2)
		p = nib.DotProductPairsSaturated(ldI8(q[3], 32*b)).DotProductPairs(ones).ConvertToFloat32()
		c3 = p.MulAdd(sw.Mul(ldF8(d[3], b)), c3)
		m3 = mv.MulAdd(ldF8(s[3], b), m3)
	}
	var ms [4][8]float32
	m0.Store(&ms[0])
	m1.Store(&ms[1])
	m2.Store(&ms[2])
	m3.Store(&ms[3])
	finish4(c0, c1, c2, c3, res)
	for k := range res {
		res[k] += ms[k][0]
	}
}

// simdDot is Dot for vectors long enough to fill registers (attention's head-sized dots).
func simdDot(a, b []float32) (float32, bool) {
	if !useSIMD || len(a) < 16 {
		return 0, false
	}
	return dotF32x8(a, b), true
}

// simdAddScaled is AddScaled (y += a·x, x as long as y) with FMA.
func simdAddScaled(y []float32, a float32, x []float32) bool {
	if !useSIMD || len(y) < 16 {
		return false
	}
	axpy(y, x[:len(y)], a)
	return true
}

func axpy(y, x []float32, a float32) {
	n := len(y)
	py, px := unsafe.Pointer(unsafe.SliceData(y)), unsafe.Pointer(unsafe.SliceData(x))
	av := archsimd.BroadcastFloat32x8(a)
	i := 0
	for ; i+8 <= n; i += 8 {
		p := (*[8]float32)(unsafe.Add(py, 4*i))
		ldF32(px, i).MulAdd(av, archsimd.LoadFloat32x8(p)).Store(p)
	}
	archsimd.ClearAVXUpperBits()
	for ; i < n; i++ {
		y[i] += a * x[i]
	}
}

// simdWidenRow converts a row of f16 (half) or bf16 values to float32: the weight rows the
// matrix×matrix product widens once and then multiplies by every token.
func simdWidenRow(dst []float32, src []uint16, half bool) bool {
	if !useSIMD {
		return false
	}
	n := len(src)
	dst = dst[:n]
	ps, pd := unsafe.Pointer(unsafe.SliceData(src)), unsafe.Pointer(unsafe.SliceData(dst))
	i := 0
	if half {
		i = asmWidenF16(dst, src) // F16C (gemm_amd64.s)
		c := newF16Consts()
		for ; i+8 <= n; i += 8 {
			widenF16(ldU16(ps, i), &c).Store((*[8]float32)(unsafe.Add(pd, 4*i)))
		}
	} else {
		for ; i+8 <= n; i += 8 {
			ldU16(ps, i).ExtendToUint32().ShiftAllLeft(16).AsFloat32x8().Store((*[8]float32)(unsafe.Add(pd, 4*i)))
		}
	}
	archsimd.ClearAVXUpperBits()
	for ; i < n; i++ {
		dst[i] = widen1(src[i], half)
	}
	return true
}

// siluK holds simdSiLUMul's constants as whole vectors, loaded from memory in the loop:
// thirteen broadcast registers would not fit beside the working values.
var siluK = func() (k [12][8]float32) {
	for i, v := range [12]float32{0x1.8p23, 0x1.715476p+0, 0x1.62e4p-1, 0x1.7f7d1cp-20,
		0x1.0e4020p-7, 0x1.573e2ep-5, 0x1.555e66p-3, 0x1.fffdb6p-2, 0x1.ffffecp-1, 1, 126, -126} {
		k[i] = [8]float32{v, v, v, v, v, v, v, v}
	}
	return
}()

// simdSiLUMul is SiLUMul eight lanes at a time with the same float32 operations as
// expGGML (ggml_v_expf, here with true float32 fused multiply-adds, as ggml has them) and
// ggml_v_silu; blocks where some |n| > 126 (|gate| > ~87) take the scalar path.
func simdSiLUMul(gate, up []float32) bool {
	if !useSIMD {
		return false
	}
	n := len(gate)
	up = up[:n]
	pg, pu := unsafe.Pointer(unsafe.SliceData(gate)), unsafe.Pointer(unsafe.SliceData(up))
	k := func(i int) archsimd.Float32x8 { return archsimd.LoadFloat32x8(&siluK[i]) }
	i := 0
	for ; i+8 <= n; i += 8 {
		g := ldF32(pg, i)
		x := archsimd.Float32x8{}.Sub(g)
		z := x.MulAdd(k(1), k(0))
		nn := z.Sub(k(0))
		neg := archsimd.Float32x8{}.Sub(nn)
		b := neg.MulAdd(k(3), neg.MulAdd(k(2), x))
		if nn.Greater(k(10)).Or(nn.Less(k(11))).ToBits() != 0 {
			archsimd.ClearAVXUpperBits()
			for j := i; j < i+8; j++ {
				gate[j] = gate[j] / (1 + expGGML(-gate[j])) * up[j]
			}
			continue
		}
		u := b.Mul(b)
		j := k(4).MulAdd(b, k(5)).MulAdd(u, k(6).MulAdd(b, k(7))).MulAdd(u, k(8).MulAdd(b, k(9)))
		scale := nn.ConvertToInt32().Add(archsimd.BroadcastInt32x8(127)).ShiftAllLeft(23).AsFloat32x8()
		e := j.Mul(scale)
		g.Div(k(9).Add(e)).Mul(ldF32(pu, i)).Store((*[8]float32)(unsafe.Add(pg, 4*i)))
	}
	archsimd.ClearAVXUpperBits()
	for ; i < n; i++ {
		gate[i] = gate[i] / (1 + expGGML(-gate[i])) * up[i]
	}
	return true
}

// simdRopeHalf is RopeHalf eight pairs at a time with rotate's float32 operations: each
// cross product rounded, then one fused multiply-add (x0·c − x1·s takes the rounded x1·s
// with its sign bit flipped, an exact negation).
func simdRopeHalf(x, cos, sin []float32) bool {
	if !useSIMD {
		return false
	}
	h := len(x) / 2
	a, b := x[:h:h], x[h:2*h:2*h]
	cos, sin = cos[:h], sin[:h]
	pa, pb := unsafe.Pointer(unsafe.SliceData(a)), unsafe.Pointer(unsafe.SliceData(b))
	pc, ps := unsafe.Pointer(unsafe.SliceData(cos)), unsafe.Pointer(unsafe.SliceData(sin))
	sign := archsimd.BroadcastUint32x8(1 << 31)
	i := 0
	for ; i+8 <= h; i += 8 {
		x0, x1, c, s := ldF32(pa, i), ldF32(pb, i), ldF32(pc, i), ldF32(ps, i)
		negXS := x1.Mul(s).AsUint32x8().Xor(sign).AsFloat32x8()
		xc := x1.Mul(c)
		x0.MulAdd(c, negXS).Store((*[8]float32)(unsafe.Add(pa, 4*i)))
		x0.MulAdd(s, xc).Store((*[8]float32)(unsafe.Add(pb, 4*i)))
	}
	archsimd.ClearAVXUpperBits()
	for ; i < h; i++ {
		a[i], b[i] = rotate(a[i], b[i], cos[i], sin[i])
	}
	return true
}
