package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDotAddScaledTails checks Dot and AddScaled (SIMD in GOEXPERIMENT=simd builds) on lengths
// around the vector width against float64 references.
func TestDotAddScaledTails(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 31, 33, 64, 67, 130} {
		a, b := randVec(rng, n), randVec(rng, n+3)
		w := make([]float64, n)
		for i, v := range a {
			w[i] = float64(v)
		}
		checkDot(t, "Dot", Dot(a, b), w, b)
		y := randVec(rng, n)
		want := make([]float64, n)
		for i := range y {
			want[i] = float64(y[i]) + 0.375*float64(b[i])
		}
		AddScaled(y, 0.375, b)
		for i := range y {
			if math.Abs(float64(y[i])-want[i]) > 1e-6*(1+math.Abs(want[i])) {
				t.Fatalf("AddScaled n=%d [%d]: got %g, want %g", n, i, y[i], want[i])
			}
		}
	}
}
