package kernels

import "github.com/tokenwise/tokenwise/tensor"

// MatMul computes out[t,r] = W[r,:]·X[t,:] for n tokens (X is n×Cols, out is n×Rows): the
// prefill product. Unlike MatVec it is compute-bound, so the work is arranged for reuse:
// each worker takes a band of weight rows, widens four rows at a time to float32 once
// (dtypes other than f32), and multiplies them against every token in 4×4 register
// blocks, loading each weight and activation once per four multiply-adds.
func MatMul(p *Pool, out []float32, w *Mat, x []float32, n int, s *Scratch) {
	if n == 1 {
		MatVec(p, out, w, x, s)
		return
	}
	cols, rows := w.Cols, w.Rows
	x = x[:n*cols]
	out = out[:n*rows]
	p.Run(rows, 4, func(worker, lo, hi int) {
		buf := s.buf(worker, 4*cols)
		for r := lo; r < hi; r += 4 {
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
			if nr == 4 {
				matMulBlock4(out, wb, x, n, cols, rows, r)
			} else {
				for i := range nr {
					wr := wb[i*cols : (i+1)*cols]
					for t := range n {
						out[t*rows+r+i] = Dot(wr, x[t*cols:(t+1)*cols])
					}
				}
			}
		}
	})
}

// matMulBlock4 multiplies four weight rows (w, 4×cols) by all n tokens, writing columns
// r..r+3 of out.
func matMulBlock4(out, w, x []float32, n, cols, rows, r int) {
	w0, w1, w2, w3 := w[:cols:cols], w[cols:2*cols:2*cols], w[2*cols:3*cols:3*cols], w[3*cols:4*cols:4*cols]
	t := 0
	for ; t+4 <= n; t += 4 {
		x0 := x[t*cols : (t+1)*cols : (t+1)*cols]
		x1 := x[(t+1)*cols : (t+2)*cols : (t+2)*cols]
		x2 := x[(t+2)*cols : (t+3)*cols : (t+3)*cols]
		x3 := x[(t+3)*cols : (t+4)*cols : (t+4)*cols]
		c := block4x4(w0, w1, w2, w3, x0, x1, x2, x3)
		for j := range 4 {
			o := out[(t+j)*rows+r : (t+j)*rows+r+4 : (t+j)*rows+r+4]
			o[0], o[1], o[2], o[3] = c[j][0], c[j][1], c[j][2], c[j][3]
		}
	}
	for ; t < n; t++ {
		xt := x[t*cols : (t+1)*cols]
		o := out[t*rows+r : t*rows+r+4 : t*rows+r+4]
		o[0], o[1], o[2], o[3] = dot4F32(w, cols, xt)
	}
}

// block4x4 returns the 16 dot products of four weight rows with four token rows. Sixteen
// accumulators plus eight loads fit the amd64 register file.
func block4x4(w0, w1, w2, w3, x0, x1, x2, x3 []float32) (c [4][4]float32) {
	n := len(w0)
	w1, w2, w3 = w1[:n], w2[:n], w3[:n]
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	var c00, c01, c02, c03, c10, c11, c12, c13, c20, c21, c22, c23, c30, c31, c32, c33 float32
	for i := range n {
		a0, a1, a2, a3 := w0[i], w1[i], w2[i], w3[i]
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
		b = x2[i]
		c20 += a0 * b
		c21 += a1 * b
		c22 += a2 * b
		c23 += a3 * b
		b = x3[i]
		c30 += a0 * b
		c31 += a1 * b
		c32 += a2 * b
		c33 += a3 * b
	}
	c[0] = [4]float32{c00, c01, c02, c03}
	c[1] = [4]float32{c10, c11, c12, c13}
	c[2] = [4]float32{c20, c21, c22, c23}
	c[3] = [4]float32{c30, c31, c32, c33}
	return
}
