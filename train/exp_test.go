package train

import (
	"math"
	"testing"
)

// TestExpNeg: expNeg is within 4e-7 relative (about 4 ulp) of exp over the softmax's range, and 0 below.
func TestExpNeg(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 2_000_000; i++ {
		x := -87 * float32(i) / 2_000_000
		want := math.Exp(float64(x))
		got := float64(expNeg(x))
		if d := math.Abs(got-want) / want; d > worst {
			worst = d
		}
	}
	if worst > 4e-7 {
		t.Fatalf("worst relative error %.3g", worst)
	}
	if expNeg(-88) != 0 || expNeg(float32(math.Inf(-1))) != 0 || expNeg(0) != 1 {
		t.Fatalf("expNeg(-88) = %g, (-Inf) = %g, (0) = %g", expNeg(-88), expNeg(float32(math.Inf(-1))), expNeg(0))
	}
	t.Logf("worst relative error %.3g", worst)
}

// BenchmarkSoftmaxExp: one LM-head row of SmolLM2's vocabulary (49152) through expNeg and
// through float64 math.Exp, as the pass had it.
//
//	go test ./train -run '^$' -bench SoftmaxExp -count 4
func BenchmarkSoftmaxExp(b *testing.B) {
	row := make([]float32, 49152)
	for i := range row {
		row[i] = -float32(i%977) / 50
	}
	out := make([]float32, len(row))
	b.Run("expNeg", func(b *testing.B) {
		for range b.N {
			var sum float64
			for j, v := range row {
				e := expNeg(v)
				out[j] = e
				sum += float64(e)
			}
			out[0] = float32(sum)
		}
	})
	b.Run("math.Exp", func(b *testing.B) {
		for range b.N {
			var sum float64
			for j, v := range row {
				e := math.Exp(float64(v))
				out[j] = float32(e)
				sum += e
			}
			out[0] = float32(sum)
		}
	})
}
