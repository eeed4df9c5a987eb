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

// useSIMD is decided once: the kernels need AVX2 and FMA (x86-64-v3).
var useSIMD = archsimd.X86.AVX2() && archsimd.X86.FMA()

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

func lanesSum(a *[8]float32) float32 {
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
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

// widen converts eight f16 (half) or bf16 values to float32. For f16, (bits&0x7fff)<<13
// read as a float32 and scaled by 2¹¹² is exact for normal and subnormal halves alike (the
// rebias is a multiplication); weights are finite, so Inf/NaN need no care.
func widen(h archsimd.Uint16x8, half bool) archsimd.Float32x8 {
	u := h.ExtendToUint32()
	if !half {
		return u.ShiftAllLeft(16).AsFloat32x8()
	}
	sign := u.And(archsimd.BroadcastUint32x8(0x8000)).ShiftAllLeft(16)
	mag := u.And(archsimd.BroadcastUint32x8(0x7fff)).ShiftAllLeft(13).AsFloat32x8().Mul(archsimd.BroadcastFloat32x8(0x1p112))
	return mag.AsUint32x8().Or(sign).AsFloat32x8()
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

func dot4U16x8(w []uint16, n int, x []float32, half bool) (float32, float32, float32, float32) {
	w = w[:4*n]
	x = x[:n]
	pw, px := unsafe.Pointer(unsafe.SliceData(w)), unsafe.Pointer(unsafe.SliceData(x))
	var s0, s1, s2, s3 archsimd.Float32x8
	i := 0
	for ; i+8 <= n; i += 8 {
		xv := ldF32(px, i)
		s0 = widen(ldU16(pw, i), half).MulAdd(xv, s0)
		s1 = widen(ldU16(pw, n+i), half).MulAdd(xv, s1)
		s2 = widen(ldU16(pw, 2*n+i), half).MulAdd(xv, s2)
		s3 = widen(ldU16(pw, 3*n+i), half).MulAdd(xv, s3)
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
	for ; i < n; i++ {
		x0, x1 := x[i], x[n+i]
		for k := range 4 {
			c[k] += w[k*n+i] * x0
			c[4+k] += w[k*n+i] * x1
		}
	}
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
	for r := lo; r < hi; r++ {
		row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
		for t := range n {
			d, q := a.d[t*nb:(t+1)*nb], a.q[t*nb*32:(t+1)*nb*32]
			var v float32
			switch w.DType {
			case tensor.Q8_0:
				v = dotQ8_0Simd(row, d, q)
			case tensor.Q4_0:
				v = dotQ4Simd(row, d, nil, q)
			default:
				v = dotQ4Simd(row, d, a.s[t*nb:(t+1)*nb], q)
			}
			out[t*rows+r] = v
		}
	}
	return true
}

// scaleChunk is how many blocks' scales are prepared at a time (on the stack).
const scaleChunk = 32

// The block loops below touch no scalar floats: per chunk of blocks, a scalar pass writes
// each block's combined scale d_w·d_x as a broadcast vector (and the Q4_1 m·s sum), then a
// vector pass does the integer dots, loading the scales with VEX loads.

func dotQ8_0Simd(row []byte, d []float32, q []int8) float32 {
	nb := len(row) / 34
	d, q = d[:nb], q[:nb*32]
	pr, pq := unsafe.Pointer(unsafe.SliceData(row)), unsafe.Pointer(unsafe.SliceData(q))
	var sc [scaleChunk][8]float32
	var acc [8]float32
	for c := 0; c < nb; c += scaleChunk {
		m := min(scaleChunk, nb-c)
		for j := range m {
			v := f16Table[*(*uint16)(unsafe.Add(pr, 34*(c+j)))] * d[c+j]
			sc[j] = [8]float32{v, v, v, v, v, v, v, v}
		}
		q8Blocks(unsafe.Add(pr, 34*c+2), unsafe.Add(pq, 32*c), &sc, m, &acc)
	}
	return hsum8(&acc)
}

//go:noinline
func q8Blocks(pw, pq unsafe.Pointer, sc *[scaleChunk][8]float32, m int, accp *[8]float32) {
	acc := archsimd.LoadFloat32x8(accp)
	ones := archsimd.BroadcastInt16x16(1)
	for j := range m {
		wq := archsimd.LoadInt8x32((*[32]int8)(unsafe.Add(pw, 34*j)))
		xq := archsimd.LoadInt8x32((*[32]int8)(unsafe.Add(pq, 32*j)))
		p := wq.Abs().AsUint8x32().DotProductPairsSaturated(xq.CopySign(wq)).DotProductPairs(ones)
		acc = p.ConvertToFloat32().MulAdd(archsimd.LoadFloat32x8(&sc[j]), acc)
	}
	acc.Store(accp)
	archsimd.ClearAVXUpperBits() // the caller's scalar pass follows
}

// dotQ4Simd does Q4_0 rows (s == nil: nibbles q−8, signed products) and Q4_1 rows (s: the
// activations' d·Σq, unsigned nibbles, plus Σ m·s).
func dotQ4Simd(row []byte, d, s []float32, q []int8) float32 {
	bb := 18
	if s != nil {
		bb = 20
	}
	nb := len(row) / bb
	d, q = d[:nb], q[:nb*32]
	if s != nil {
		s = s[:nb]
	}
	pr, pq := unsafe.Pointer(unsafe.SliceData(row)), unsafe.Pointer(unsafe.SliceData(q))
	var sc [scaleChunk][8]float32
	var acc [8]float32
	var summs float32
	for c := 0; c < nb; c += scaleChunk {
		m := min(scaleChunk, nb-c)
		for j := range m {
			blk := unsafe.Add(pr, bb*(c+j))
			v := f16Table[*(*uint16)(blk)] * d[c+j]
			sc[j] = [8]float32{v, v, v, v, v, v, v, v}
			if s != nil {
				summs = fma32(f16Table[*(*uint16)(unsafe.Add(blk, 2))], s[c+j], summs)
			}
		}
		if s == nil {
			q4_0Blocks(unsafe.Add(pr, bb*c+2), unsafe.Add(pq, 32*c), &sc, m, &acc)
		} else {
			q4_1Blocks(unsafe.Add(pr, bb*c+4), unsafe.Add(pq, 32*c), &sc, m, &acc)
		}
	}
	return hsum8(&acc) + summs
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

//go:noinline
func q4_0Blocks(pw, pq unsafe.Pointer, sc *[scaleChunk][8]float32, m int, accp *[8]float32) {
	acc := archsimd.LoadFloat32x8(accp)
	ones := archsimd.BroadcastInt16x16(1)
	eight := archsimd.BroadcastInt8x32(8)
	for j := range m {
		wq := nibbles(unsafe.Add(pw, 18*j)).AsInt8x32().Sub(eight)
		xq := archsimd.LoadInt8x32((*[32]int8)(unsafe.Add(pq, 32*j)))
		p := wq.Abs().AsUint8x32().DotProductPairsSaturated(xq.CopySign(wq)).DotProductPairs(ones)
		acc = p.ConvertToFloat32().MulAdd(archsimd.LoadFloat32x8(&sc[j]), acc)
	}
	acc.Store(accp)
	archsimd.ClearAVXUpperBits() // the caller's scalar pass follows
}

//go:noinline
func q4_1Blocks(pw, pq unsafe.Pointer, sc *[scaleChunk][8]float32, m int, accp *[8]float32) {
	acc := archsimd.LoadFloat32x8(accp)
	ones := archsimd.BroadcastInt16x16(1)
	for j := range m {
		xq := archsimd.LoadInt8x32((*[32]int8)(unsafe.Add(pq, 32*j)))
		p := nibbles(unsafe.Add(pw, 20*j)).DotProductPairsSaturated(xq).DotProductPairs(ones)
		acc = p.ConvertToFloat32().MulAdd(archsimd.LoadFloat32x8(&sc[j]), acc)
	}
	acc.Store(accp)
	archsimd.ClearAVXUpperBits() // the caller's scalar pass follows
}
