package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// TestSmallN: under every ISA, quantRows for 1..17, 24, 33 and 40 tokens (the small-n
// kernels where they run; past 16 tokens Q4_0/Q4_1 go through them in row chunks) gives every row and token the bits of the Go reference (actDot: ggml's arithmetic)
// on that row and token, for row ranges that start and end off the kernels' row pairs,
// rows of 1 to 130 blocks, and blocks whose bytes are all random (Q8_0 quants of −128, Q4_1
// minimums, f16 scales of any size), next to blocks from the quantizer.
func TestSmallN(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	shapes := []struct{ rows, cols, lo, hi int }{
		{1, 32, 0, 1}, {2, 64, 0, 2}, {3, 96, 1, 3}, {7, 32 * 5, 0, 7}, {13, 1088, 3, 12}, {70, 32 * 130, 0, 70},
		{45, 32 * 130, 1, 44}, // past 16 tokens: chunks of 6 rows and a last one of 1
	}
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_1} {
		for _, sh := range shapes {
			w, _ := randMat(t, rng, dt, sh.rows, sh.cols)
			// Every other row: random bytes with a scale (and Q4_1 minimum) kept finite.
			bb := dt.BlockBytes()
			for r := 1; r < sh.rows; r += 2 {
				row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
				for i := range row {
					row[i] = byte(rng.IntN(256))
				}
				for b := 0; b < len(row); b += bb {
					for _, off := range []int{0, 2} {
						if off == 2 && dt != tensor.Q4_1 {
							break
						}
						h := tensor.F32ToF16(float32(rng.NormFloat64()) * float32(math.Pow(2, float64(rng.IntN(20)-10))))
						row[b+off], row[b+off+1] = byte(h), byte(h>>8)
					}
				}
			}
			const maxN = 40
			x := randVec(rng, maxN*sh.cols)
			for i := 0; i < len(x); i += 97 { // a few outliers: blocks with quants of ±127
				x[i] *= 1000
			}
			for i := 5 * 32; i < 6*32 && i < len(x); i++ { // a block of zeros (scale 0)
				x[i] = 0
			}
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 24, 33, maxN} {
				var a qact
				a.quantize(x[:n*sh.cols], dt == tensor.Q4_1)
				for _, i := range SupportedISAs() {
					withISA(t, i, func() {
						name := fmt.Sprintf("%v/%v/%dx%d rows %d..%d/n=%d", i, dt, sh.rows, sh.cols, sh.lo, sh.hi, n)
						got := make([]float32, n*sh.rows)
						prepSmallN(&a, &w, n) // as prepare does
						quantRows(got, &w, &a, n, sh.lo, sh.hi)
						for tk := range n {
							for r := sh.lo; r < sh.hi; r++ {
								want := actDot(&w, r, &a, tk)
								if g := got[tk*sh.rows+r]; math.Float32bits(g) != math.Float32bits(want) {
									t.Fatalf("%s: token %d row %d: %g, reference %g", name, tk, r, g, want)
								}
							}
						}
					})
				}
			}
		}
	}
}

// TestSmallNRuns: the small-n kernels take 2..smallNMax tokens of Q8_0 (1..smallNMax with
// AVX-512 VNNI) and any number of Q4_0 and Q4_1
// under the ISAs with their assembly (AVX-512 VNNI, or AVX2 with F16C), so TestSmallN checks
// them, and not only the paths they replace, wherever they run.
func TestSmallNRuns(t *testing.T) {
	if !smallN {
		t.Skip("TOKENWISE_SMALLN=0")
	}
	rng := rand.New(rand.NewPCG(33, 34))
	ran := map[ISA]bool{}
	for _, i := range SupportedISAs() {
		withISA(t, i, func() {
			for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_1} {
				w, _ := randMat(t, rng, dt, 5, 64)
				for _, n := range []int{1, 2, 3, smallNMax, smallNMax + 1, 100} {
					var a qact
					a.quantize(randVec(rng, n*64), true)
					prepSmallN(&a, &w, n)
					got := asmSmallN(make([]float32, n*5), &w, &a, n, 0, 5)
					want := pathSwitches()["asmF16C"] && (dt != tensor.Q8_0 || (n >= 2 || pathSwitches()["vnni"]) && n <= smallNMax)
					if got != want {
						t.Fatalf("%v %v n=%d: small-n kernel ran %v, want %v", i, dt, n, got, want)
					}
					ran[i] = ran[i] || got
				}
			}
		})
	}
	if useVNNI && !ran[ISAAVX512] || BestISA() >= ISAAVX2 && pathSwitches()["asmF16C"] && !ran[ISAAVX2] {
		t.Fatalf("small-n kernels ran under %v", ran)
	}
}
