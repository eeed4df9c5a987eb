package kernels

import (
	"fmt"
	"os"

	"github.com/tokenwise/tokenwise/tensor"
)

// Product is one weight matrix of a MatMulMany call and the n×Rows buffer its results go to.
type Product struct {
	W   *Mat
	Out []float32
}

// MatMulMany computes ps[i].Out[t,r] = ps[i].W[r,:]·X[t,:] for n tokens, for matrices that
// read the same input: Q, K and V of attention, gate and up of SwiGLU. The activations are
// converted once (to 8-bit blocks, f16 or bf16, as the dtype needs) and the rows of all the
// matrices are split across the workers in one hand-over, instead of one conversion and one
// hand-over per matrix; a decode step of a small model is short enough for that to show.
// The matrices must share dtype and column count (else MatMulMany multiplies them one by
// one). n = 1 is the decode product (matrix×vector), n > 1 the prefill product.
func MatMulMany(p *Pool, ps []Product, x []float32, n int, s *Scratch) {
	if len(ps) == 0 {
		return
	}
	w0 := ps[0].W
	units := 0 // groups of four rows, counted per matrix
	for _, pr := range ps {
		if pr.W.DType != w0.DType || pr.W.Cols != w0.Cols {
			for _, pr := range ps {
				MatMulMany(p, []Product{pr}, x, n, s)
			}
			return
		}
		units += (pr.W.Rows + 3) / 4
	}
	x = x[:n*w0.Cols]
	rows := prepare(w0, x, n, s)
	// Work is split in groups of four rows that never straddle two matrices, so every row
	// is computed by the same (four-row blocked) kernel call as in a product on its own:
	// fusing changes no result bit.
	fn := func(worker, lo, hi int) {
		off := 0
		for _, pr := range ps {
			u := (pr.W.Rows + 3) / 4
			a, b := max(lo, off)-off, min(hi, off+u)-off
			if a < b {
				rows(worker, pr.Out[:n*pr.W.Rows], pr.W, 4*a, min(4*b, pr.W.Rows))
			}
			off += u
		}
	}
	if n == 1 {
		// Decode: rows handed out in chunks (decodeChunk), so a core slowed by a neighbour
		// does less instead of holding up the step. Qwen3-0.6B f16 decode, static halves vs
		// chunks of 64 rows (ggml's chunk for a matrix×vector product), alternating pairs:
		// 20.70/20.79, 18.45/20.22, 19.44/20.63 tok/s; the step's products alone (in one
		// process, 20 rounds) 51.6-51.9 vs 49.6-51.1 ms. Chunks of up to 256 rows against 64,
		// whole decode steps alternating in one process (36 each, two threads, Xeon Emerald
		// Rapids): SmolLM2-135M Q4_1 3.59 → 3.18 ms, Qwen3-0.6B Q4_K_M 22.09 → 20.03,
		// Llama-3.2-1B Q6_K 48.93 → 46.45, Qwen3-0.6B f32 93.8 → 90.7; the products alone
		// at 64, 128, 256 and 512 rows: 256 the fastest on each (41.0, 43.5, 44.8, 37.1 GB/s
		// on SmolLM2): a chunk's first kilobytes wait for the prefetchers to pick the stream
		// up again, and each chunk is a hand-out.
		p.RunChunks(units, decodeChunk(4*units, p.Threads()), fn)
		return
	}
	p.Run(units, 1, fn)
}

// decodeChunkRows is the most weight rows a worker takes at a time in a decode product.
const decodeChunkRows = 256

// decodeChunk is how many four-row units a worker takes at a time in a decode product of
// rows rows: decodeChunkRows, or fewer where that would leave a worker under two chunks,
// never under 64 rows (ggml's chunk), in multiples of 16 rows (a chunk boundary inside the
// AMX-arithmetic kernels' 16-row group computes the group twice).
func decodeChunk(rows, workers int) int {
	r := min(decodeChunkRows, rows/(2*workers)) &^ 15
	return max(r, 64) / 4
}

// rowsFunc computes rows [lo,hi) of w times the prepared activations into out.
type rowsFunc func(worker int, out []float32, w *Mat, lo, hi int)

// prepare converts the n activation rows x into what w's dtype multiplies with (as ggml does)
// and returns the row kernel that uses them.
func prepare(w *Mat, x []float32, n int, s *Scratch) rowsFunc {
	switch k := actKindOf(w.DType); {
	case w.DType == tensor.Q4_K || w.DType == tensor.Q5_K || w.DType == tensor.Q6_K:
		a := &s.actK
		a.quantize(x)
		if kqDecodeLayout(w.DType, n) {
			a.prepDecode()
		}
		prepareAMX(w, a, n)
		prepKAMX(a, w, n)
		return func(_ int, out []float32, w *Mat, lo, hi int) { kQuantRows(out, w, a, n, lo, hi) }
	case k == actQ8_0 || k == actQ8_1:
		a := &s.act
		a.quantize(x, k == actQ8_1)
		prepSmallN(a, w, n)
		prepAMX(a, w, n)
		return func(_ int, out []float32, w *Mat, lo, hi int) { quantRows(out, w, a, n, lo, hi) }
	case k == actF32 || k == actF16 || k == actBF16:
		xr := roundActivations(w, x, s)
		switch {
		case n > 1:
			return func(worker int, out []float32, w *Mat, lo, hi int) {
				matMulRows(out, w, xr, n, lo, hi, s.buf(worker, matMulBufLen(w.Cols)))
			}
		case batchInvariant:
			return func(worker int, out []float32, w *Mat, lo, hi int) {
				matVecTiled(out, w, xr, lo, hi, s.buf(worker, matVecTiledBufLen(w.Cols)))
			}
		}
		return func(worker int, out []float32, w *Mat, lo, hi int) {
			matVecRows(out, w, xr, lo, hi, s.buf(worker, w.Cols))
		}
	}
	panic(fmt.Sprintf("kernels: no product for %v weights", w.DType)) // NewMat admits only the dtypes above
}

// Batch invariance. The quantized products give every (row, token) the same bits whether
// the token is multiplied alone (MatVec, a decode step of one sequence) or with others
// (MatMul: a batched decode step, a prefill chunk, drafts verified in one pass): both run
// one row kernel per token. The float products (f32, f16, bf16) did not: MatVec sums each
// row in ggml_vec_dot_f16's order (four accumulators; the decode kernels llama.cpp runs),
// MatMul in its 4×4 tiles' (one accumulator per row and token, tinyBLAS's order), so a
// sequence's logits moved in the last bits with what else was in the step, and a seeded
// sample could then take another token.
//
// In the batch-invariant mode (the default) MatVec computes a float row in the batched
// product's own arithmetic (matVecTiled), so a row's bits depend only on the row and its
// token, for any n: a sequence decodes the same alone or batched, and a prefill's products
// are the same however its prompt is cut into chunks. This leaves prefill untouched (its
// tiles are the fast kernel) and costs decode nothing measurable (it is bound by memory,
// and one accumulator per row of four rows in flight keeps up with it): see
// docs/kernels.md, "Batch invariance". Off, MatVec takes ggml's decode order again (to
// compare decode with llama.cpp's bit for bit: TestMatVecF16RowOrder).

// batchInvariant is the mode; TOKENWISE_BATCH_INVARIANT=0 starts a program with it off.
var batchInvariant = os.Getenv("TOKENWISE_BATCH_INVARIANT") != "0"

// BatchInvariant reports whether the products are in the batch-invariant mode.
func BatchInvariant() bool { return batchInvariant }

// SetBatchInvariant turns the batch-invariant mode on or off and returns the mode before.
// Like SetISA it must not run concurrently with a forward pass or any other kernel call.
func SetBatchInvariant(on bool) (prev bool) {
	prev, batchInvariant = batchInvariant, on
	return prev
}

// matVecTiledBufLen is the scratch matVecTiled needs: four rows widened to float32, four
// more for a padded last tile, and one token tile's parked accumulators.
func matVecTiledBufLen(cols int) int { return 8*cols + tileAccLen(1) }

// matVecTiled is the decode product of rows [lo,hi) (lo a multiple of 4) in the batched
// product's arithmetic: each row gets the bits matMulRows gives it with the same token in a
// batch of any size. The assembly does it where it has that arithmetic for the dtype
// (asmMatVecTiled); the rest goes through matMulRows' own four-row kernel with one token.
func matVecTiled(out []float32, w *Mat, x []float32, lo, hi int, buf []float32) {
	cols := w.Cols
	r := asmMatVecTiled(out, w, x, lo, lo+(hi-lo)&^3)
	for ; r < hi; r += 4 {
		nr := min(4, hi-r)
		var wb []float32
		if w.DType == tensor.F32 {
			wb = w.f32[r*cols : (r+nr)*cols]
		} else {
			for i := range nr {
				_ = w.Row(r+i, buf[i*cols:(i+1)*cols]) // NewMat validated dtype and sizes
			}
			wb = buf[:nr*cols]
		}
		matMulRows4(out, wb, x, 1, cols, w.Rows, r, nr, buf[4*cols:8*cols], buf[8*cols:])
	}
}
