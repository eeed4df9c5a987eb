package kernels

import (
	"math/rand/v2"
	"testing"
)

// checkSumWords compares SumWords with a plain loop for lengths around the assembly's
// 32-word blocks (lengths under 32 take the portable loop only).
func checkSumWords(t *testing.T, label string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(81, 82))
	w := make([]uint64, 4096+77)
	for i := range w {
		w[i] = rng.Uint64()
	}
	for _, n := range []int{0, 1, 31, 32, 33, 64, 95, 1000, 4096, len(w)} {
		var want uint64
		for _, v := range w[:n] {
			want += v
		}
		if got := SumWords(w[:n]); got != want {
			t.Fatalf("%s, %d words: %d, want %d", label, n, got, want)
		}
	}
}

func TestSumWords(t *testing.T) { checkSumWords(t, "default") }
