//go:build amd64

package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// TestQ4KAMX: the AMX Q4_K product gives the Go reference's bits for every (row, token) —
// dotQ4_KAct, and under GGMLAMX dotQ4_KAMX for row counts that are a multiple of 32 — with one and two workers, on row counts that are not a multiple of its 16
// (the rest go to the 512-bit tile), token counts that are not a multiple of its pairs of
// 16 (likewise),
// and rows of 1, 3, 8 and 20 super-blocks; and it ran (amxBlocks moved). On a CPU or kernel
// without AMX it is skipped, saying so.
func TestQ4KAMX(t *testing.T) {
	if !AMXAvailable() {
		t.Skip("no AMX here (needs AMX-TILE, AMX-INT8 and AVX-512 BW, and the kernel's arch_prctl XTILEDATA permission): the 512-bit tile does these products")
	}
	prev, err := SetISA(ISAAVX512)
	if err != nil {
		t.Fatal(err)
	}
	defer SetISA(prev)
	if !SetAMX(true) {
		t.Fatal("AMXAvailable but SetAMX(true) left it off")
	}
	rng := rand.New(rand.NewPCG(43, 44))
	type shape struct{ rows, cols int }
	shapes := []shape{{37, 256}, {133, 768}, {16, 2048}, {52, 5120}, {64, 768}, {96, 512}}
	for _, build := range []GGMLBuild{GGMLAVX512, GGMLAMX} {
		defer SetGGMLBuild(SetGGMLBuild(build))
		for _, threads := range []int{1, 2} {
			p := NewPool(threads)
			s := NewScratch(p.Threads())
			for _, sh := range shapes {
				w, _ := randMat(t, rng, tensor.Q4_K, sh.rows, sh.cols)
				for _, n := range []int{32, 33, 47, 48, 81} {
					t.Run(fmt.Sprintf("%v/threads%d/%dx%d/n%d", build, threads, sh.rows, sh.cols, n), func(t *testing.T) {
						x := randVec(rng, n*sh.cols)
						// One wide token: activations spanning the int8 range and scales far apart.
						for i := range sh.cols {
							x[i] *= 1e3
						}
						got := make([]float32, n*sh.rows)
						before := amxBlocks.Load()
						MatMul(p, got, &w, x, n, s)
						if sh.rows >= 16*threads && amxBlocks.Load() == before {
							t.Fatal("the AMX tile did not run")
						}
						checkQ4KRef(t, &w, x, got, n)
					})
				}
			}
			p.Close()
		}
	}
}
