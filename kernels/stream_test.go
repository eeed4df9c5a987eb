package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestSumWords: the streaming sum equals a plain loop's for lengths around the assembly's
// 32-word blocks, with and without AVX-512.
func TestSumWords(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 82))
	w := make([]uint64, 4096+77)
	for i := range w {
		w[i] = rng.Uint64()
	}
	defer func(v bool) { useAVX512Attn = v }(useAVX512Attn)
	for _, z := range []bool{false, useAVX512Attn} {
		useAVX512Attn = z
		for _, n := range []int{0, 1, 31, 32, 33, 64, 95, 1000, 4096, len(w)} {
			var want uint64
			for _, v := range w[:n] {
				want += v
			}
			if got := SumWords(w[:n]); got != want {
				t.Fatalf("avx512 %v, %d words: %d, want %d", z, n, got, want)
			}
		}
	}
}
