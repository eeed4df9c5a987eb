//go:build amd64

package kernels

import "github.com/tokenwise/tokenwise/tensor"

//go:noescape
func smallNPrepVNNI(q *int8, blocks int, xo *int8, e *int32)

// smallNRuns reports whether the small-n kernels take w's product of n tokens.
func smallNRuns(w *Mat, n int) bool {
	nb := w.Cols / 32
	if !smallN || !useAsmQ8 || nb == 0 || nb > maxSmallNBlocks {
		return false
	}
	switch w.DType {
	case tensor.Q8_0:
		// Decode too where the kernels are the 512-bit ones: 1.1-1.35× asmMatVecQ8_0
		// (BenchmarkSmallN/Q8_0 n=1 with the small-n kernels on and off, same bits: e.g.
		// 49152×576, SmolLM2's head, 2420 → 2020 µs on one thread, Intel Xeon model 207);
		// the AVX2 ones are not faster than it. Prefill goes to the Q8_0 tiles.
		return (n >= 2 || useVNNI) && n <= smallNMax
	case tensor.Q4_0, tensor.Q4_1:
		// Decode too: 2.5-3.5× the one-row kernels (BenchmarkSmallN n=1). And prefill:
		// these dtypes have no prefill tile in assembly, and the archsimd 4×4 panel
		// (quantPanel) took SmolLM2-135M Q4_1 to 84 prompt tokens/s at 128 tokens where
		// these kernels, in row chunks that stay in cache across the token groups (see
		// asmSmallN), give several times that (BenchmarkQ4Prefill).
		return n >= 1
	}
	return false
}

// prepSmallN makes a.sn for w's product of n tokens where the small-n kernels take it.
func prepSmallN(a *qact, w *Mat, n int) {
	a.sn.n = 0
	if !smallNRuns(w, n) {
		return
	}
	sn := &a.sn
	nb := w.Cols / 32
	q := a.q[:n*nb*32]
	switch {
	case !useVNNI: // the AVX2 kernels take the quants as they are
	case w.DType == tensor.Q8_0:
		sn.xo = grow(sn.xo, len(q))
		smallNPrepVNNI(&q[0], n*nb, &sn.xo[0], nil)
	case w.DType == tensor.Q4_0:
		sn.e = grow(sn.e, n*nb*8)
		smallNPrepVNNI(&q[0], n*nb, nil, &sn.e[0])
	}
	// Eight more floats: an AVX2 call for tokens 4..7 of a group loads each block's eight
	// lanes from lane 4.
	groups := (n + 7) / 8
	sn.dT = grow(sn.dT, groups*nb*8+8)
	if w.DType == tensor.Q4_1 {
		sn.sT = grow(sn.sT, groups*nb*8+8)
	}
	byTokenGroups(sn.dT, a.d, n, nb)
	if w.DType == tensor.Q4_1 {
		byTokenGroups(sn.sT, a.s, n, nb)
	}
	sn.n, sn.dt = n, w.DType
}

// asmSmallN computes rows [lo,hi) of a Q8_0, Q4_0 or Q4_1 matrix for n tokens with the
// small-n kernels (smalln_amd64.s): two rows' blocks loaded once for up to eight tokens
// (AVX-512 VNNI; four with AVX2, which has half the registers).
// Every value has the bits of the Go reference (actDot) on its row and token, so which
// kernel a pass takes never shows in its results. It reports false where it does not run
// (prepSmallN did not prepare a for this product).
func asmSmallN(out []float32, w *Mat, a *qact, n, lo, hi int) bool {
	sn := &a.sn
	if sn.n != n || sn.dt != w.DType || hi <= lo || !smallNRuns(w, n) {
		return false
	}
	nb := w.Cols / 32
	rows, rb := w.Rows, w.rowBytes
	_ = w.Data[hi*rb-1]
	_ = out[(n-1)*rows+hi-1]
	x := a.q[:n*nb*32]
	var e []int32
	step, call := 8, smallNCall
	switch {
	case !useVNNI:
		step, call = 4, smallNCallAVX2
	case w.DType == tensor.Q8_0:
		x = sn.xo[:n*nb*32]
	case w.DType == tensor.Q4_0:
		e = sn.e[:n*nb*8]
	}
	dT, sT := sn.dT[:(n+7)/8*nb*8+8], sn.dT
	if w.DType == tensor.Q4_1 {
		sT = sn.sT[:len(dT)]
	}
	// A call streams its rows once for a group of step tokens. Up to smallNMax tokens the
	// whole band goes through each group (decode, verification: the band is read from memory
	// about once either way); past it, bands of about smallNChunkBytes of weights, an even
	// number of rows, are taken one at a time through every token group, so the groups
	// after the first read the band from L1/L2.
	chunk := hi - lo
	if n > smallNMax {
		chunk = max(2, smallNChunkBytes/rb&^1)
	}
	for r0 := lo; r0 < hi; r0 += chunk {
		r1 := min(hi, r0+chunk)
		for t0 := 0; t0 < n; t0 += step {
			T := min(step, n-t0)
			g := t0/8*nb*8 + t0%8 // the group's transposed scales, from token t0's lane
			xt, dt, st := &x[t0*nb*32], &dT[g], &sT[g]
			var et *int32
			if e != nil {
				et = &e[t0*nb*8]
			}
			if pairs := (r1 - r0) / 2; pairs > 0 {
				call(w.DType, T, &w.Data[r0*rb], rb, pairs, nb, xt, et, dt, st, &out[t0*rows+r0], rows)
			}
			if (r1-r0)%2 == 1 { // the last row alone, as a pair of itself
				r := r1 - 1
				var res [16]float32
				call(w.DType, T, &w.Data[r*rb], 0, 1, nb, xt, et, dt, st, &res[0], 2)
				for t := range T {
					out[(t0+t)*rows+r] = res[2*t]
				}
			}
		}
	}
	return true
}
