//go:build amd64

package kernels

import "github.com/tokenwise/tokenwise/tensor"

// asmSmallN computes rows [lo,hi) of a Q8_0, Q4_0 or Q4_1 matrix for n tokens (2 ≤ n ≤
// smallNMax) with the small-n kernels (smalln_amd64.s): two rows' blocks loaded once for up
// to eight tokens. Every value has the bits of the one-token kernels (the Go reference's),
// so which kernel a pass takes never shows in its results. It reports false where it does
// not run.
func asmSmallN(out []float32, w *Mat, a *qact, n, lo, hi int) bool {
	nb := w.Cols / 32
	if !smallN || !useVNNI || n < 2 || n > smallNMax || nb == 0 || nb > maxSmallNBlocks || hi <= lo {
		return false
	}
	switch w.DType {
	case tensor.Q8_0, tensor.Q4_0, tensor.Q4_1:
	default:
		return false
	}
	rows, rb := w.Rows, w.rowBytes
	_ = w.Data[hi*rb-1]
	_ = out[(n-1)*rows+hi-1]
	q, d := a.q[:n*nb*32], a.d[:n*nb]
	var s []float32
	if w.DType == tensor.Q4_1 {
		s = a.s[:n*nb]
	}
	// The tokens' scales transposed, eight per block (dxT[8b+t]), so a row block's scales
	// for all its tokens are one vector product.
	var dxT, sxT [8 * maxSmallNBlocks]float32
	for t0 := 0; t0 < n; t0 += 8 {
		T := min(8, n-t0)
		for t := range T {
			dt := d[(t0+t)*nb : (t0+t+1)*nb]
			for b, v := range dt {
				dxT[8*b+t] = v
			}
			if s != nil {
				for b, v := range s[(t0+t)*nb : (t0+t+1)*nb] {
					sxT[8*b+t] = v
				}
			}
		}
		x := &q[t0*nb*32]
		if pairs := (hi - lo) / 2; pairs > 0 {
			smallNCall(w.DType, T, &w.Data[lo*rb], rb, pairs, nb, x, &dxT[0], &sxT[0], &out[t0*rows+lo], rows)
		}
		if (hi-lo)%2 == 1 { // the last row alone, as a pair of itself
			r := hi - 1
			var res [16]float32
			smallNCall(w.DType, T, &w.Data[r*rb], 0, 1, nb, x, &dxT[0], &sxT[0], &res[0], 2)
			for t := range T {
				out[(t0+t)*rows+r] = res[2*t]
			}
		}
	}
	return true
}
