package kernels

import "math"

// Single-precision sine and cosine with the arithmetic of glibc's sinf/cosf (the fast
// polynomial versions from Arm's optimized-routines, as built with FMA for x86-64): ggml's
// rope calls sinf/cosf, and its rotations must be bit-identical for parity (see Rope). The
// results are within 0.56 ulp of the true values, but about 1% of them differ from the
// correctly rounded float32 that math.Sin/Cos would give.

// trigPoly holds one set of polynomial coefficients: the cosine part is negated in the
// second set, which quadrants 2 and 3 use.
type trigPoly struct {
	c0, c1, c2, c3, c4, s1, s2, s3 float64
}

var trigPolys = [2]trigPoly{
	{0x1p0, -0x1.ffffffd0c621cp-2, 0x1.55553e1068f19p-5, -0x1.6c087e89a359dp-10, 0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
	{-0x1p0, 0x1.ffffffd0c621cp-2, -0x1.55553e1068f19p-5, 0x1.6c087e89a359dp-10, -0x1.99343027bf8c3p-16,
		-0x1.555545995a603p-3, 0x1.1107605230bc4p-7, -0x1.994eb3774cf24p-13},
}

// trigSign is the sign of the sine in quadrants 0..3.
var trigSign = [4]float64{1, -1, -1, 1}

// invPio4 holds 2/π in overlapping 32-bit windows advanced by 8 bits (192 bits in all).
var invPio4 = [24]uint32{
	0xa2, 0xa2f9, 0xa2f983, 0xa2f9836e,
	0xf9836e4e, 0x836e4e44, 0x6e4e4415, 0x4e441529,
	0x441529fc, 0x1529fc27, 0x29fc2757, 0xfc2757d1,
	0x2757d1f5, 0x57d1f534, 0xd1f534dd, 0xf534ddc0,
	0x34ddc0db, 0xddc0db62, 0xc0db6295, 0xdb629599,
	0x6295993c, 0x95993c43, 0x993c4390, 0x3c439041,
}

func abstop12(x float32) uint32 { return (math.Float32bits(x) >> 20) & 0x7ff }

// trigPolyEval evaluates the sine polynomial (n even) or the cosine one (n odd) at the
// reduced argument x (x2 = x²), with fused multiply-adds where GCC contracts them.
func trigPolyEval(x, x2 float64, p *trigPoly, n int) float32 {
	if n&1 == 0 {
		x3 := x * x2
		s1 := math.FMA(x2, p.s3, p.s2)
		x7 := x3 * x2
		s := math.FMA(x3, p.s1, x)
		return float32(math.FMA(x7, s1, s))
	}
	x4 := x2 * x2
	c2 := math.FMA(x2, p.c4, p.c3)
	c1 := math.FMA(x2, p.c1, p.c0)
	x6 := x4 * x2
	c := math.FMA(x4, p.c2, c1)
	return float32(math.FMA(x6, c2, c))
}

// reduceFast returns x modulo π/2 in [−π/4, π/4] and the quadrant, for |x| < 120.
func reduceFast(x float64) (float64, int) {
	r := x * 0x1.45F306DC9C883p+23 // 2/π · 2²⁴: the quadrant lands in bits 24..31
	n := (int32(r) + 0x800000) >> 24
	return math.FMA(-float64(n), 0x1.921FB54442D18p0, x), int(n)
}

// reduceLarge is the reduction for |x| >= 120 in 2.62 fixed point against 2/π's bits.
func reduceLarge(xi uint32) (float64, int) {
	arr := invPio4[(xi>>26)&15:]
	shift := (xi >> 23) & 7
	xi = (xi & 0xffffff) | 0x800000
	xi <<= shift
	res0 := uint64(xi * arr[0])
	res1 := uint64(xi) * uint64(arr[4])
	res2 := uint64(xi) * uint64(arr[8])
	res0 = (res2 >> 32) | (res0 << 32)
	res0 += res1
	n := (res0 + 1<<61) >> 62
	res0 -= n << 62
	return float64(int64(res0)) * 0x1.921FB54442D18p-62, int(n)
}

// sinf32 is glibc's sinf.
func sinf32(y float32) float32 {
	x := float64(y)
	top := abstop12(y)
	switch {
	case top < abstop12(0x1.921FB6p-1): // |y| < π/4
		if top < abstop12(0x1p-12) {
			return y
		}
		return trigPolyEval(x, x*x, &trigPolys[0], 0)
	case top < abstop12(120):
		x, n := reduceFast(x)
		p := &trigPolys[(n>>1)&1]
		return trigPolyEval(x*trigSign[n&3], x*x, p, n)
	case top < abstop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		x, n := reduceLarge(xi)
		q := n + int(xi>>31)
		return trigPolyEval(x*trigSign[q&3], x*x, &trigPolys[(q>>1)&1], n)
	}
	return float32(math.NaN())
}

// cosf32 is glibc's cosf.
func cosf32(y float32) float32 {
	x := float64(y)
	top := abstop12(y)
	switch {
	case top < abstop12(0x1.921FB6p-1):
		if top < abstop12(0x1p-12) {
			return 1
		}
		return trigPolyEval(x, x*x, &trigPolys[0], 1)
	case top < abstop12(120):
		x, n := reduceFast(x)
		p := &trigPolys[(n>>1)&1]
		return trigPolyEval(x*trigSign[n&3], x*x, p, n^1)
	case top < abstop12(float32(math.Inf(1))):
		xi := math.Float32bits(y)
		x, n := reduceLarge(xi)
		q := n + int(xi>>31)
		return trigPolyEval(x*trigSign[q&3], x*x, &trigPolys[(q>>1)&1], n^1)
	}
	return float32(math.NaN())
}
