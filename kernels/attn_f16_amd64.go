//go:build goexperiment.simd && amd64

package kernels

import (
	"math"
	"simd/archsimd"
	"unsafe"
)

// AVX2 versions of the f16 KV cache kernels (attn_f16.go); each gives the same bits as the
// scalar code.

func simdDotF16(q []float32, k []uint16) (float32, bool) {
	if !useSIMD || len(q) < 64 {
		return 0, false
	}
	if ggmlAVX512 {
		return dotF16x16(q, k), true
	}
	return dotF16x8(q, k), true
}

// dotF16x16 emulates ggml's 16-lane loop with pairs of 8-lane vectors (lo, hi): lane-wise
// additions give the same bits at any vector width, only the final reduction tree matters.
func dotF16x16(q []float32, k []uint16) float32 {
	n := len(q)
	np := n &^ 63
	pq, pk := unsafe.Pointer(unsafe.SliceData(q)), unsafe.Pointer(unsafe.SliceData(k))
	var a0, b0, a1, b1, a2, b2, a3, b3 archsimd.Float32x8
	for i := 0; i < np; i += 64 {
		a0 = widenF16v(ldU16(pk, i)).MulAdd(ldF32(pq, i), a0)
		b0 = widenF16v(ldU16(pk, i+8)).MulAdd(ldF32(pq, i+8), b0)
		a1 = widenF16v(ldU16(pk, i+16)).MulAdd(ldF32(pq, i+16), a1)
		b1 = widenF16v(ldU16(pk, i+24)).MulAdd(ldF32(pq, i+24), b1)
		a2 = widenF16v(ldU16(pk, i+32)).MulAdd(ldF32(pq, i+32), a2)
		b2 = widenF16v(ldU16(pk, i+40)).MulAdd(ldF32(pq, i+40), b2)
		a3 = widenF16v(ldU16(pk, i+48)).MulAdd(ldF32(pq, i+48), a3)
		b3 = widenF16v(ldU16(pk, i+56)).MulAdd(ldF32(pq, i+56), b3)
	}
	a0, b0 = a0.Add(a2), b0.Add(b2)
	a1, b1 = a1.Add(a3), b1.Add(b3)
	a0, b0 = a0.Add(a1), b0.Add(b1)
	var t3 [8]float32
	b0.Add(a0).Store(&t3)
	archsimd.ClearAVXUpperBits()
	r := ((t3[4] + t3[0]) + (t3[6] + t3[2])) + ((t3[5] + t3[1]) + (t3[7] + t3[3]))
	if np == n {
		return r
	}
	s := float64(r)
	for i := np; i < n; i++ {
		s += float64(f16Table[k[i]] * q[i])
	}
	return float32(s)
}

// dotF16x8 is ggml's 8-lane (AVX2) loop: four accumulators over 32 elements per step.
func dotF16x8(q []float32, k []uint16) float32 {
	n := len(q)
	np := n &^ 31
	pq, pk := unsafe.Pointer(unsafe.SliceData(q)), unsafe.Pointer(unsafe.SliceData(k))
	var a0, a1, a2, a3 archsimd.Float32x8
	for i := 0; i < np; i += 32 {
		a0 = widenF16v(ldU16(pk, i)).MulAdd(ldF32(pq, i), a0)
		a1 = widenF16v(ldU16(pk, i+8)).MulAdd(ldF32(pq, i+8), a1)
		a2 = widenF16v(ldU16(pk, i+16)).MulAdd(ldF32(pq, i+16), a2)
		a3 = widenF16v(ldU16(pk, i+24)).MulAdd(ldF32(pq, i+24), a3)
	}
	var a [8]float32
	a0.Add(a2).Add(a1.Add(a3)).Store(&a)
	archsimd.ClearAVXUpperBits()
	r := ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
	if np == n {
		return r
	}
	s := float64(r)
	for i := np; i < n; i++ {
		s += float64(f16Table[k[i]] * q[i])
	}
	return float32(s)
}

// Constants of the vector code, lane by lane, loaded from memory where used. Building them
// with archsimd.Broadcast*, or copying a struct of vectors, compiles to legacy-SSE moves,
// and each of those after 256-bit code costs a state transition (measured 10-60× slower
// kernels); shift counts are vectors for the same reason (ShiftAllRight moves its count
// with a legacy MOVQ).
const (
	kSign = iota
	kSmall
	kBias
	kOne
	kKeep
	kS13
	kS31
	kS16
	kHalf
	kMag
	kScale
	kCount
)

var vecConsts = func() (t [kCount][8]uint32) {
	for i, v := range [kCount]uint32{0x80000000, 0x38800000, 0xfff, 1, 0x1fff, 13, 31, 16, math.Float32bits(0.5), 0x7fff, math.Float32bits(0x1p112)} {
		for l := range 8 {
			t[i][l] = v
		}
	}
	return t
}()

func vc(i int) archsimd.Uint32x8 { return archsimd.LoadUint32x8(&vecConsts[i]) }

// roundF16x8 is roundF16 on eight lanes (the lane select by a sign mask and bitwise ops).
func roundF16x8(x archsimd.Float32x8) archsimd.Float32x8 {
	u := x.AsUint32x8()
	sign := u.And(vc(kSign))
	a := u.AndNot(vc(kSign))
	norm := a.Add(vc(kBias)).Add(a.ShiftRight(vc(kS13)).And(vc(kOne))).AndNot(vc(kKeep))
	half := vc(kHalf).AsFloat32x8()
	sub := a.AsFloat32x8().Add(half).Sub(half).AsUint32x8()
	small := a.AsInt32x8().Sub(vc(kSmall).AsInt32x8()).ShiftRight(vc(kS31).AsInt32x8()).AsUint32x8() // all ones where a < 2⁻¹⁴
	return sub.And(small).Or(norm.AndNot(small)).Or(sign).AsFloat32x8()
}

// widenF16v converts eight f16 values to float32 like widenF16 (simd_amd64.go), with
// vector shift counts (see roundF16Consts).
func widenF16v(h archsimd.Uint16x8) archsimd.Float32x8 {
	u := h.ExtendToUint32()
	sign := u.ShiftRight(vc(kS16).Sub(vc(kOne))).ShiftLeft(vc(kS31)) // bit 15 to bit 31
	mag := u.And(vc(kMag)).ShiftLeft(vc(kS13)).AsFloat32x8().Mul(vc(kScale).AsFloat32x8())
	return mag.AsUint32x8().Or(sign).AsFloat32x8()
}

func simdRoundF16(x []float32) bool {
	if !useSIMD || len(x) < 8 {
		return false
	}
	n := len(x)
	p := unsafe.Pointer(unsafe.SliceData(x))
	i := 0
	for ; i+8 <= n; i += 8 {
		roundF16x8(ldF32(p, i)).Store((*[8]float32)(unsafe.Add(p, 4*i)))
	}
	archsimd.ClearAVXUpperBits()
	for ; i < n; i++ {
		x[i] = roundF16(x[i])
	}
	return true
}

func simdMadRoundF16(y []float32, a float32, x []uint16) bool {
	if !useSIMD || len(y) < 8 {
		return false
	}
	n := len(y)
	py, px := unsafe.Pointer(unsafe.SliceData(y)), unsafe.Pointer(unsafe.SliceData(x))
	av := archsimd.BroadcastFloat32x8(a)
	i := 0
	for ; i+8 <= n; i += 8 {
		p := (*[8]float32)(unsafe.Add(py, 4*i))
		roundF16x8(widenF16v(ldU16(px, i)).MulAdd(av, archsimd.LoadFloat32x8(p))).Store(p)
	}
	archsimd.ClearAVXUpperBits()
	for ; i < n; i++ {
		y[i] = roundF16(fma32(f16Table[x[i]], a, y[i]))
	}
	return true
}

func simdScaleRoundF16(y []float32, a float32) bool {
	if !useSIMD || len(y) < 8 {
		return false
	}
	n := len(y)
	py := unsafe.Pointer(unsafe.SliceData(y))
	av := archsimd.BroadcastFloat32x8(a)
	i := 0
	for ; i+8 <= n; i += 8 {
		p := (*[8]float32)(unsafe.Add(py, 4*i))
		roundF16x8(archsimd.LoadFloat32x8(p).Mul(av)).Store(p)
	}
	archsimd.ClearAVXUpperBits()
	for ; i < n; i++ {
		y[i] = roundF16(y[i] * a)
	}
	return true
}
