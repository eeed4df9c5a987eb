package kernels

import (
	"math"
	"math/big"
)

// expf32 is glibc's expf (Arm optimized-routines, built with FMA on x86-64): e^x =
// 2^(k/32)·2^(r/32) with a 32-entry table and a cubic polynomial in float64, rounded once
// to float32. Within 0.502 ulp, but ~0.05% of its results differ from the correctly
// rounded value, and ggml's flash attention takes its softmax weights from expf.
func expf32(x float32) float32 {
	abstop := (math.Float32bits(x) >> 20) & 0x7ff
	if abstop >= (math.Float32bits(88)>>20)&0x7ff {
		switch {
		case math.IsInf(float64(x), -1):
			return 0
		case math.IsNaN(float64(x)) || math.IsInf(float64(x), 1):
			return x + x
		case x > 0x1.62e42ep6:
			return float32(math.Inf(1))
		case x < -0x1.9fe368p6:
			return 0
		}
	}
	const n = 32
	const shift = 0x1.8p+52
	xd := float64(x)
	z := 0x1.71547652b82fep+0 * n * xd
	kd := z + shift
	ki := math.Float64bits(kd)
	kd -= shift
	r := z - kd
	t := exp2fTable[ki%n] + ki<<(52-5)
	s := math.Float64frombits(t)
	const c0, c1, c2 = 0x1.c6af84b912394p-5 / n / n / n, 0x1.ebfce50fac4f3p-3 / n / n, 0x1.62e42ff0c52d6p-1 / n
	zz := math.FMA(c0, r, c1)
	r2 := r * r
	y := math.FMA(c2, r, 1)
	y = math.FMA(zz, r2, y)
	return float32(y * s)
}

// exp2fTable[i] is the bits of 2^(i/32), correctly rounded, minus i<<47, so that adding
// k<<47 for k ≡ i (mod 32) gives 2^(k/32). The roots are taken in 256-bit arithmetic
// (math.Exp2 is off by an ulp for a few of them).
var exp2fTable = func() (t [32]uint64) {
	for i := range t {
		v := new(big.Float).SetPrec(256).SetMantExp(big.NewFloat(1), i) // 2^i
		for range 5 {
			v.Sqrt(v)
		}
		f, _ := v.Float64()
		t[i] = math.Float64bits(f) - uint64(i)<<47
	}
	return t
}()
