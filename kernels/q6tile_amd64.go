//go:build amd64

package kernels

//go:generate go run q6tile_gen.go

import (
	"sync"

	"github.com/tokenwise/tokenwise/tensor"
)

// The Q6_K prefill product on the AMX tile unit, in GGMLAMX's arithmetic. The rows kernels
// (amxrows_gen.go, bodyQ6K) spend, per block of 16 rows, sub-block and token, four VPDPBUSD,
// a subtraction, a VPMULLD and an add: a prompt's Q6_K products ran at about 50
// multiply-adds a cycle per core. Here each group of 16 rows is expanded once per product
// (q6KTileExpand) to v = sc_j·(q − 32), the sub-block's scale folded into the weight: the
// super-block's integer sum Σ_j sc_j·(Σ q·x − 32·Σx) is Σ v·x, exact in int32 in any order,
// so it is the rows kernels' to the bit. v needs 13 bits: it is kept as two byte planes,
// lo = v & 255 (unsigned, TDPBSUD with the tokens' signed quants) and hi = v >> 8 (signed,
// TDPBSSD), and Σ v·x = Σ lo·x + 256·Σ hi·x. The planes are in the repack's own run layout
// (run k: the 16 rows' elements 4k..4k+3), which is the tile's B layout, and the tokens'
// quants are A as they lie (16 tokens, 64 columns each, the token stride apart), so neither
// side is transposed. Per super-block and 16 tokens: eight tile products, two stores, and per
// token the rows kernels' float steps (convert, times d_w·d_x, fused-add) in the same order.

// q6TileMinTokens: shorter passes stay on the rows kernels (the expansion is paid per group
// of rows and product).
const q6TileMinTokens = 16

// q6TileRuns reports whether a product of n tokens of w takes the Q6_K tile: a Q6_K matrix in
// GGMLAMX's arithmetic, the AMX tile on, and at least q6TileMinTokens tokens.
func q6TileRuns(w *Mat, n int) bool {
	return useAMX && amxRowsRun() && w.DType == tensor.Q6_K && amxArithmetic(w) && n >= q6TileMinTokens
}

// q6TileIdx is q6KTileExpand's VPERMW indexes: word i of a run's rows 0..7 half takes row
// i/4's scale, of the rows 8..15 half row 8 + i/4's.
var q6TileIdx = func() *[64]uint16 {
	var idx [64]uint16
	for i := range 32 {
		idx[i], idx[32+i] = uint16(i/4), uint16(8+i/4)
	}
	return &idx
}()

//go:noescape
func q6KTileExpand(w *byte, nb int, dst *byte, idx *uint16)

//go:noescape
func q6KTile16(cfg *[64]byte, planes, w *byte, nb int, x *int8, tokBytes int, dT, dT8, out *float32, ldo int, buf *byte)

// q6TileScratch is one worker's expanded group (nb × 8192 bytes) and the tile's C stores.
type q6TileScratch struct {
	planes []byte
	buf    [2048]byte
}

var q6TileScratchPool = sync.Pool{New: func() any { return new(q6TileScratch) }}

// q6KTileRows computes the whole 16-row groups of [lo,hi) of the Q6_K matrix w for the
// first n/16·16 of a's n tokens on the AMX tile and returns the tokens it took (0 where it
// did not run: too few tokens, no whole group, or the tile off); the caller does the rest.
func q6KTileRows(out []float32, w *Mat, a *qactK, n, lo, hi int) int {
	g0, g1 := (lo+15)/16, hi/16
	if !q6TileRuns(w, n) || g1 <= g0 {
		return 0
	}
	n16 := n / 16 * 16
	nb := w.Cols / 256
	pk := amxPacked(w)
	groupBytes := nb * amxGroupBytes(w.DType)
	rows := w.Rows
	tokBytes := nb * 256
	_ = out[(n16-1)*rows+16*g1-1]
	_ = a.q[n16*tokBytes-1]
	_ = a.amxD[n16*nb-1]
	s := q6TileScratchPool.Get().(*q6TileScratch)
	defer q6TileScratchPool.Put(s)
	s.planes = grow(s.planes, nb*8192)
	amxBlocks.Add(int64(g1-g0) * int64(n16/16))
	for g := g0; g < g1; g++ {
		grp := &pk[g*groupBytes]
		q6KTileExpand(grp, nb, &s.planes[0], &q6TileIdx[0])
		for t0 := 0; t0 < n16; t0 += 16 {
			q6KTile16(amxTileCfg, &s.planes[0], grp, nb, &a.q[t0*tokBytes], tokBytes,
				&a.amxD[t0/8*nb*8], &a.amxD[(t0/8+1)*nb*8], &out[t0*rows+16*g], rows, &s.buf[0])
		}
	}
	return n16
}
