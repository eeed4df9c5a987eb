//go:build amd64

package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestQuantizeQ8KZMM: the AVX-512 Q8_K activation quantizer (q8KQuantZMM) gives the Go loop's
// scales, quants and sums bit for bit, on blocks of normal values over many magnitudes, an
// all-zero block, blocks whose largest magnitude appears twice with opposite signs (the
// first decides the scale's sign), values that round to a half, and an infinity-free block
// with one huge outlier.
func TestQuantizeQ8KZMM(t *testing.T) {
	if kqTile != kqTileZMM {
		t.Skip("no AVX-512 BW/VNNI here: qactK.quantize runs its Go loop only")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const nb = 40
	x := make([]float32, nb*256)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(8)-4)))
	}
	clear(x[256:512])         // zero block
	for b := 2; b <= 3; b++ { // small values around the ties
		for i := range 256 {
			x[b*256+i] *= 1e-6
		}
	}
	x[512+7], x[512+100] = -3.5, 3.5   // tie, negative first: 3.5 is quantized to +127
	x[768+3], x[768+200] = 2.25, -2.25 // tie, positive first
	for i := range 256 {
		x[1024+i] = float32(i-128) * 0.5 // many exact halves after scaling
	}
	x[1280+17] = 1e30
	x[1536+255] = -1e-30 // tiny block max at the end
	for i := 1536; i < 1536+255; i++ {
		x[i] = 0
	}
	var asm, ref qactK
	asm.quantize(x)
	ref.d, ref.q, ref.bsums = make([]float32, nb), make([]int8, nb*256), make([]int16, nb*16)
	ref.quantizeGo(x, nb)
	for b := range nb {
		if math.Float32bits(asm.d[b]) != math.Float32bits(ref.d[b]) {
			t.Fatalf("block %d: d %g, Go %g", b, asm.d[b], ref.d[b])
		}
		if !slices.Equal(asm.q[b*256:b*256+256], ref.q[b*256:b*256+256]) {
			t.Fatalf("block %d: quants differ:\n%v\n%v", b, asm.q[b*256:b*256+256], ref.q[b*256:b*256+256])
		}
		if !slices.Equal(asm.bsums[b*16:b*16+16], ref.bsums[b*16:b*16+16]) {
			t.Fatalf("block %d: sums %v, Go %v", b, asm.bsums[b*16:b*16+16], ref.bsums[b*16:b*16+16])
		}
	}
}
