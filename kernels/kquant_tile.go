//go:build amd64

package kernels

//go:generate go run kquant_tile_gen.go

// The Q4_K prefill tile (kquant_tile_amd64.s, written by kquant_tile_gen.go): a block of
// rows times sixteen tokens per call (or eight: groups), each row's super-block unpacked
// once for all of them. q4KRowAVX2 finishes each (row, token) pair of a super-block by
// itself: horizontal sums of its integer vectors, two scalar conversions, products and
// fused multiply-adds, about as many instructions as the integer work. The tile reduces a
// row's token vectors together and runs the float steps (d_w·d_x, dmin_w·d_x, the two fused
// multiply-adds of gemm_q4_K_8x8_q8_K) on 8 (AVX2) or 16 (512-bit) pairs per instruction.
// The arithmetic is the same: every pair gets the bits of dotQ4_KAct. BenchmarkQ4KTile
// (kernel/, one goroutine, 3072×1024, n = 16..128): 32–43 GMAC per CPU-second per token,
// 53–59 with the AVX2 tile, 80–90 with the 512-bit one (docs/kernels.md).

//go:noescape
func q4KTileAVX2(w *byte, nb int, q *int8, qStride int, ts *q4KTileSB, acc *float32, rows, rowBytes, groups int)

// tileOutZMM writes blocks × 16 rows of the sixteen tokens' acc − accM (acc: 32 floats
// a row, the tokens' acc then their accM) to out, token t's row r at out[t·tokenStride/4 +
// r]: TILE_OUT16 (tileout_amd64.h), the AMX tile's epilogue.
//
//go:noescape
func tileOutZMM(acc, out *float32, tokenStride, blocks int)

//go:noescape
func q4KTileZMM(w *byte, nb int, q *int8, qStride int, ts *q4KTileSB, acc *float32, rows, rowBytes, groups int)

// kqTile selects the Q4_K prefill tile: kqTileOff (q4KRowAVX2/VNNI for every token),
// kqTileAVX2, or kqTileZMM (AVX-512 BW and VNNI). setISA sets it; TOKENWISE_KQ_TILE=0
// keeps it off, to measure one path against the other (BenchmarkQ4KTile runs all of them).
const (
	kqTileOff = iota
	kqTileAVX2
	kqTileZMM
)

// kqTileTokens is the tile's token count (two groups of eight); kqTileMaxSB how many
// super-blocks one call takes (2048 columns: sixteen tokens' activations, 32 KiB, stay in
// L1 while the call's rows run over them, and the transposed scales, 2.5 KiB, sit on the
// stack). A longer row is taken in chunks of super-blocks, the accumulators carried from
// one to the next, so the sums keep their order.
const (
	kqTileTokens = 16
	kqTileMaxSB  = 8
)

// q4KTileSB is one super-block's activation scales for sixteen tokens, transposed: d[t] is
// token t's d_x, bsp[k][t] its pair sums (bs_4k+bs_4k+1, bs_4k+2+bs_4k+3) of the Q8_K
// bsums, which VPMADDWD multiplies with the mins (mn_2k, mn_2k+1).
type q4KTileSB struct {
	d   [kqTileTokens]float32
	bsp [4][kqTileTokens][2]int16
}

// fillQ4KTile transposes super-blocks b0..b0+n-1 of the nt tokens from t0 (of nb
// super-blocks each) into ts.
func fillQ4KTile(ts []q4KTileSB, a *qactK, t0, nt, nb, b0, n int) {
	for i := range n {
		for t := range nt {
			tb := (t0+t)*nb + b0 + i
			ts[i].d[t] = a.d[tb]
			bs := a.bsums[tb*16 : tb*16+16]
			for k := range 4 {
				ts[i].bsp[k][t] = [2]int16{bs[4*k] + bs[4*k+1], bs[4*k+2] + bs[4*k+3]}
			}
		}
	}
}

// q4KTileRows computes rows [lo,hi) of a Q4_K matrix times tokens [from,n) (n−from a
// multiple of eight) with the tile: sixteen at a time, eight in the last call where n−from
// is an odd multiple of eight.
func q4KTileRows(out []float32, w *Mat, a *qactK, from, n, lo, hi int) {
	rows, nb := w.Rows, w.Cols/256
	var acc [kqAcc]float32 // 32 per row: acc for the sixteen tokens, then accM
	var ts [kqTileMaxSB]q4KTileSB
	const block = kqAcc / 32
	for t0 := from; t0 < n; t0 += kqTileTokens {
		nt := min(kqTileTokens, n-t0)
		for r0 := lo; r0 < hi; r0 += block {
			nr := min(block, hi-r0)
			clear(acc[:nr*32])
			for b0 := 0; b0 < nb; b0 += kqTileMaxSB {
				nbc := min(kqTileMaxSB, nb-b0)
				if r0 == lo || nb > kqTileMaxSB {
					fillQ4KTile(ts[:], a, t0, nt, nb, b0, nbc)
				}
				row, q := &w.Data[r0*w.rowBytes+b0*144], &a.q[(t0*nb+b0)*256]
				if kqTile == kqTileZMM {
					q4KTileZMM(row, nbc, q, nb*256, &ts[0], &acc[0], nr, w.rowBytes, nt/8)
				} else {
					q4KTileAVX2(row, nbc, q, nb*256, &ts[0], &acc[0], nr, w.rowBytes, nt/8)
				}
			}
			// Sixteen tokens' blocks of sixteen rows: transposed in registers
			// (tileOutZMM). This loop, token by token, took 16% of the 512-bit tile's
			// product in pprof of BenchmarkQ4KTile/kernel/n128/zmm (it was row by row
			// before, the stores going to sixteen lines at once: a third of the time).
			done := 0
			if kqTile == kqTileZMM && nt == kqTileTokens && nr >= 16 {
				done = nr / 16 * 16
				_ = out[(t0+nt-1)*rows+r0+done-1]
				tileOutZMM(&acc[0], &out[t0*rows+r0], 4*rows, nr/16)
			}
			for t := range nt {
				o := out[(t0+t)*rows+r0+done:][:nr-done]
				for r := range o {
					o[r] = acc[(done+r)*32+t] - acc[(done+r)*32+16+t]
				}
			}
		}
	}
}
