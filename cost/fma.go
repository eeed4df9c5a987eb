package cost

import "math"

// sink keeps the compiler from deleting the scalar loop.
var sink float64

func fmaScalar(n int) float64 {
	a0, a1, a2, a3, a4, a5, a6, a7 := 0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7
	const m, c = 0.999999, 1e-7
	for range n {
		a0 = math.FMA(a0, m, c)
		a1 = math.FMA(a1, m, c)
		a2 = math.FMA(a2, m, c)
		a3 = math.FMA(a3, m, c)
		a4 = math.FMA(a4, m, c)
		a5 = math.FMA(a5, m, c)
		a6 = math.FMA(a6, m, c)
		a7 = math.FMA(a7, m, c)
	}
	sink = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7
	return float64(n) * 8 * 2
}
