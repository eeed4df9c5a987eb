package kernels

import (
	"fmt"

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
		// Decode: rows handed out 64 at a time (ggml's chunk for a matrix×vector product),
		// so a core slowed by a neighbour does less instead of holding up the step. Qwen3-0.6B
		// f16 decode, static halves vs chunks, alternating pairs: 20.70/20.79, 18.45/20.22,
		// 19.44/20.63 tok/s; the step's products alone (in one process, 20 rounds) 51.6-51.9
		// vs 49.6-51.1 ms.
		p.RunChunks(units, decodeChunkRows/4, fn)
		return
	}
	p.Run(units, 1, fn)
}

// decodeChunkRows is how many weight rows a worker takes at a time in a decode product.
const decodeChunkRows = 64

// rowsFunc computes rows [lo,hi) of w times the prepared activations into out.
type rowsFunc func(worker int, out []float32, w *Mat, lo, hi int)

// prepare converts the n activation rows x into what w's dtype multiplies with (as ggml does)
// and returns the row kernel that uses them.
func prepare(w *Mat, x []float32, n int, s *Scratch) rowsFunc {
	switch k := actKindOf(w.DType); {
	case w.DType == tensor.Q4_K || w.DType == tensor.Q6_K:
		a := &s.actK
		a.quantize(x)
		return func(_ int, out []float32, w *Mat, lo, hi int) { kQuantRows(out, w, a, n, lo, hi) }
	case k == actQ8_0 || k == actQ8_1:
		a := &s.act
		a.quantize(x, k == actQ8_1)
		return func(_ int, out []float32, w *Mat, lo, hi int) { quantRows(out, w, a, n, lo, hi) }
	case k == actF32 || k == actF16 || k == actBF16:
		xr := roundActivations(w, x, s)
		if n == 1 {
			return func(worker int, out []float32, w *Mat, lo, hi int) {
				matVecRows(out, w, xr, lo, hi, s.buf(worker, w.Cols))
			}
		}
		return func(worker int, out []float32, w *Mat, lo, hi int) {
			matMulRows(out, w, xr, n, lo, hi, s.buf(worker, matMulBufLen(w.Cols)))
		}
	}
	panic(fmt.Sprintf("kernels: no product for %v weights", w.DType)) // NewMat admits only the dtypes above
}
