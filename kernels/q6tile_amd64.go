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
// BenchmarkKQuantTile (two threads, Xeon Emerald Rapids, alternating with the rows kernels):
// 2048×8192 at 512 tokens 60.7 → 28.7 ms, 8192×2048 69.2 → 38.0, 1024×3072 at 128 tokens
// 2.14 → 1.00; Llama-3.2-1B Q6_K prefill of 512 tokens 117-121 → 179-210 tok/s.

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
func q6KTileSB(cfg *[64]byte, planes *byte, planesStride int, w *byte, wStride, G int, x *int8, tokBytes, tiles int, dT *float32, dTStride int, acc *float32, accStride int, buf *byte)

// q6TilePanel is the groups of 16 rows q6KTileRows takes through the super-blocks at a
// time: their planes (q6TilePanel·nb·8 KiB) and a token tile's quants of one super-block
// stay in the near caches while every token tile and group uses them.
const q6TilePanel = 4

// q6TileScratch is one worker's expanded panel (q6TilePanel × nb × 8192 bytes), its
// accumulators (a group's tokens × 16 floats, per group) and the tile's C stores.
type q6TileScratch struct {
	planes []byte
	acc    []float32
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
	s.planes = grow(s.planes, q6TilePanel*nb*8192)
	s.acc = grow(s.acc, q6TilePanel*n16*16)
	amxBlocks.Add(int64(g1-g0) * int64(n16/16))
	for p0 := g0; p0 < g1; p0 += q6TilePanel {
		G := min(q6TilePanel, g1-p0)
		for gi := range G {
			q6KTileExpand(&pk[(p0+gi)*groupBytes], nb, &s.planes[gi*nb*8192], &q6TileIdx[0])
		}
		acc := s.acc[:G*n16*16]
		clear(acc) // +0, as the rows kernels' registers start
		for b := range nb {
			q6KTileSB(amxTileCfg, &s.planes[b*8192], nb*8192, &pk[p0*groupBytes+b*3360], groupBytes, G,
				&a.q[b*256], tokBytes, n16/16, &a.amxD[8*b], nb*8*4, &acc[0], n16*64, &s.buf[0])
		}
		for gi := range G {
			for t := range n16 {
				copy(out[t*rows+16*(p0+gi):][:16], acc[(gi*n16+t)*16:][:16])
			}
		}
	}
	return n16
}
