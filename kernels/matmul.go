package kernels

import "github.com/tokenwise/tokenwise/tensor"

// MatMul computes out[t,r] = W[r,:]·X[t,:] for n tokens (X is n×Cols, out is n×Rows): the
// prefill product. Unlike MatVec it is compute-bound, so the work is arranged for reuse:
// each worker takes a band of weight rows, widens four rows at a time to float32 once
// (dtypes other than f32), and multiplies them against every token in 4×4 register
// blocks, loading each weight and activation once per four multiply-adds.
func MatMul(p *Pool, out []float32, w *Mat, x []float32, n int, s *Scratch) {
	MatMulMany(p, []Product{{w, out}}, x, n, s)
}

// blockBytes is the cache blocking of the prefill product: weight rows are widened (or
// read) about this many bytes of float32 at a time, and multiplied against about as many
// bytes of tokens at a time, so both stay in a core's L2 while every tile of the block
// reuses them. Without it a long prompt's tokens (512 tokens × 1024 columns: 2 MiB) came
// from L3 on every four weight rows.
const blockBytes = 384 << 10

// blockRows is how many weight rows (a multiple of 4) matMulRows takes at a time.
func blockRows(cols int) int { return max(4, blockBytes/(4*cols)&^3) }

// matMulBufLen is the scratch matMulRows needs per worker: a block of rows, four more for a
// padded last tile, and the parked accumulators of a token block's tiles (asmTiles4x4).
func matMulBufLen(cols int) int { return (blockRows(cols)+4)*cols + tileAccLen(blockRows(cols)) }

// tileCols is how many columns of four weight rows the AVX-512 prefill tile takes at a
// time (asmTiles4x4): 4 rows × 1024 floats is 16 KiB, a third of this Xeon's 48 KiB L1
// data cache, the tokens' chunks passing through the rest.
var tileCols = 1024

// tileAccLen is the floats asmTiles4x4 parks accumulators in for n tokens: 16 registers of
// 16 lanes per 4-token tile.
func tileAccLen(n int) int { return (n + 3) / 4 * 256 }

// matMulRows computes rows [lo,hi) of w for all n tokens; buf holds matMulBufLen(Cols) floats.
func matMulRows(out []float32, w *Mat, x []float32, n, lo, hi int, buf []float32) {
	cols, rows := w.Cols, w.Rows
	rb := blockRows(cols)
	tb := rb // tokens per block: as many bytes as the rows
	for r0 := lo; r0 < hi; r0 += rb {
		r1 := min(hi, r0+rb)
		var wb []float32
		if w.DType == tensor.F32 {
			wb = w.f32[r0*cols : r1*cols]
		} else {
			for r := r0; r < r1; r++ {
				_ = w.Row(r, buf[(r-r0)*cols:(r-r0+1)*cols]) // NewMat validated dtype and sizes
			}
			wb = buf[:(r1-r0)*cols]
		}
		for t0 := 0; t0 < n; t0 += tb {
			nt := min(tb, n-t0)
			xs, os := x[t0*cols:(t0+nt)*cols], out[t0*rows:(t0+nt)*rows]
			for r := r0; r < r1; r += 4 {
				nr := min(4, r1-r)
				matMulRows4(os, wb[(r-r0)*cols:(r-r0+nr)*cols], xs, nt, cols, rows, r, nr, buf[rb*cols:(rb+4)*cols], buf[(rb+4)*cols:])
			}
		}
	}
}

// matMulRows4 multiplies nr ≤ 4 weight rows (w) by n tokens into columns r..r+nr-1 of out;
// pad is scratch for 4×cols floats, acc for tileAccLen(n).
func matMulRows4(out, w, x []float32, n, cols, rows, r, nr int, pad, acc []float32) {
	switch {
	case nr == 4:
		matMulBlock4(out, w, x, n, cols, rows, r, acc)
	case useAVX512Tile && cols%16 == 0:
		// The last rows, padded to a tile by repeating the last one: every row of the
		// product then has the tile's arithmetic, wherever it falls.
		copy(pad, w)
		for i := nr; i < 4; i++ {
			copy(pad[i*cols:(i+1)*cols], w[(nr-1)*cols:nr*cols])
		}
		asmTiles4x4(out, pad, x, n, cols, rows, r, nr, acc)
	default:
		for i := range nr {
			wr := w[i*cols : (i+1)*cols]
			for t := range n {
				out[t*rows+r+i] = Dot(wr, x[t*cols:(t+1)*cols])
			}
		}
	}
}

// matMulBlock4 multiplies four weight rows (w, 4×cols) by all n tokens, writing columns
// r..r+3 of out; acc is scratch for asmTiles4x4 (tileAccLen(n) floats, or fewer: then it
// takes each row whole).
func matMulBlock4(out, w, x []float32, n, cols, rows, r int, acc []float32) {
	if asmTiles4x4(out, w, x, n, cols, rows, r, 4, acc) { // AVX-512 assembly (gemm_amd64.s)
		return
	}
	if t := asmPairs(out, w, x, n, cols, rows, r); t > 0 { // AVX2 assembly (gemm_amd64.s)
		if t == n {
			return
		}
		out, x, n = out[t*rows:], x[t*cols:], n-t
	}
	if simdBlock4(out, w, x, n, cols, rows, r) { // AVX2 (simd_amd64.go, GOEXPERIMENT=simd)
		return
	}
	t := 0
	for ; t+2 <= n; t += 2 {
		x0 := x[t*cols : (t+1)*cols : (t+1)*cols]
		x1 := x[(t+1)*cols : (t+2)*cols : (t+2)*cols]
		o0 := out[t*rows+r : t*rows+r+4 : t*rows+r+4]
		o1 := out[(t+1)*rows+r : (t+1)*rows+r+4 : (t+1)*rows+r+4]
		o0[0], o0[1], o0[2], o0[3], o1[0], o1[1], o1[2], o1[3] = block4x2(w, cols, x0, x1)
	}
	for ; t < n; t++ {
		xt := x[t*cols : (t+1)*cols]
		o := out[t*rows+r : t*rows+r+4 : t*rows+r+4]
		o[0], o[1], o[2], o[3] = dot4F32(w, cols, xt)
	}
}

// block4x2 returns the dot products of four weight rows (w, 4×n) with two token rows: eight
// accumulators, four weights and one activation fit the sixteen SSE registers of amd64
// (a 4×4 block spilled to the stack and ran slower than a matvec).
func block4x2(w []float32, n int, x0, x1 []float32) (c00, c01, c02, c03, c10, c11, c12, c13 float32) {
	w0, w1, w2, w3 := w[:n:n], w[n:2*n:2*n], w[2*n:3*n:3*n], w[3*n:4*n:4*n]
	w1, w2, w3 = w1[:len(w0)], w2[:len(w0)], w3[:len(w0)]
	x0, x1 = x0[:len(w0)], x1[:len(w0)]
	for i, a0 := range w0 {
		a1, a2, a3 := w1[i], w2[i], w3[i]
		b := x0[i]
		c00 += a0 * b
		c01 += a1 * b
		c02 += a2 * b
		c03 += a3 * b
		b = x1[i]
		c10 += a0 * b
		c11 += a1 * b
		c12 += a2 * b
		c13 += a3 * b
	}
	return
}

// lanesSum adds eight lane partial sums in a fixed order, the same in every kernel that
// splits a dot product across eight lanes.
func lanesSum(a *[8]float32) float32 {
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

// tile4x2Tail adds columns from..n-1 to a 4-row × 2-token tile (c[k]: row k with token 0,
// c[4+k]: with token 1), the columns past the vector loop of its kernels.
func tile4x2Tail(c *[8]float32, w []float32, n int, x []float32, from int) {
	for i := from; i < n; i++ {
		x0, x1 := x[i], x[n+i]
		for k := range 4 {
			c[k] += w[k*n+i] * x0
			c[4+k] += w[k*n+i] * x1
		}
	}
}

// dotLanes16 is the arithmetic of the AVX-512 prefill tile (tile4x4F32Z): sixteen lane
// accumulators, fused multiply-adds over len(w) (a multiple of 16) columns in order, then
// _mm512_reduce_add_ps's tree.
func dotLanes16(w, x []float32) float32 {
	var a [16]float32
	x = x[:len(w)]
	for i := 0; i+16 <= len(w); i += 16 {
		for l := range 16 {
			a[l] = fma32(w[i+l], x[i+l], a[l])
		}
	}
	return reduceAdd16(&a)
}
