package model

import (
	"math"
	"slices"
	"testing"
)

// route picks the k most probable experts in descending order, with the softmax over all
// experts as weights, renormalized to sum 1 when norm; non-finite logits still give k
// distinct experts (weight 0) rather than an index of -1.
func TestRoute(t *testing.T) {
	logits := []float32{0.5, 2, -1, 2.5, 1}
	var z float64
	for _, v := range logits {
		z += math.Exp(float64(v))
	}
	p := func(e int) float64 { return math.Exp(float64(logits[e])) / z }
	for _, norm := range []bool{false, true} {
		m := &moe{k: 3, norm: norm}
		s := &moeScratch{logits: slices.Clone(logits), sel: make([]int32, 3), w: make([]float32, 3)}
		m.route(s, 1, len(logits))
		if !slices.Equal(s.sel, []int32{3, 1, 4}) {
			t.Fatalf("norm %v: experts %v, want [3 1 4]", norm, s.sel)
		}
		sum := p(3) + p(1) + p(4)
		for j, e := range s.sel {
			want := p(int(e))
			if norm {
				want /= sum
			}
			if math.Abs(float64(s.w[j])-want) > 1e-6 {
				t.Errorf("norm %v: weight of expert %d = %g, want %g", norm, e, s.w[j], want)
			}
		}
	}
	nan := float32(math.NaN())
	m := &moe{k: 2, norm: true}
	s := &moeScratch{logits: []float32{nan, nan, nan, nan}, sel: make([]int32, 2), w: make([]float32, 2)}
	m.route(s, 1, 4)
	if !slices.Equal(s.sel, []int32{0, 1}) || s.w[0] != 0 || s.w[1] != 0 {
		t.Errorf("NaN logits: experts %v weights %v, want [0 1] with weight 0", s.sel, s.w)
	}
}
