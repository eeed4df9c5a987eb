//go:build amd64

package kernels

// q4_1AMXRuns reports whether the AMX-arithmetic Q4_1 kernels run: AVX-512 VNNI (every CPU
// with AMX has it; elsewhere the build's products go through the Go reference).
func q4_1AMXRuns() bool { return useVNNI }

// asmQ4_1AMX computes rows [lo,hi) of w for n tokens with the AMX-arithmetic kernels
// (q4_1amx_amd64.s), eight tokens per call; a group of 16 rows that [lo,hi) cuts is computed
// whole into a scratch and its rows in range copied. It reports false where the kernels do
// not run (quantRows then takes the Go reference, dotQ4_1AMX).
func asmQ4_1AMX(out []float32, w *Mat, a *qact, n, lo, hi int) bool {
	if !q4_1AMXRuns() || w.amx == nil || hi <= lo {
		return false
	}
	pk := q4_1Packed(w)
	nb, rows := w.Cols/32, w.Rows
	_ = out[(n-1)*rows+hi-1]
	// The groups [lo,hi) cuts: at most the first and the last.
	first, last := lo/16, (hi-1)/16
	var cut [2]int
	ncut := 0
	if 16*first < lo || 16*first+16 > hi {
		cut[ncut], ncut = first, ncut+1
	}
	if last != first && 16*last+16 > hi {
		cut[ncut], ncut = last, ncut+1
	}
	g0, g1 := (lo+15)/16, hi/16 // the whole groups
	for t0 := 0; t0 < n; t0 += 8 {
		T := min(8, n-t0)
		x := &a.q[t0*nb*32]
		d, s := &a.amxD[t0/8*nb*8], &a.amxS[t0/8*nb*8]
		if g1 > g0 {
			q4_1AMXCall(T, &pk[g0*nb*320], nb, g1-g0, x, d, s, &out[t0*rows+16*g0], rows)
		}
		for _, g := range cut[:ncut] {
			var tmp [8 * 16]float32
			q4_1AMXCall(T, &pk[g*nb*320], nb, 1, x, d, s, &tmp[0], 16)
			for t := range T {
				for r := max(lo, 16*g); r < min(hi, 16*g+16); r++ {
					out[(t0+t)*rows+r] = tmp[16*t+r-16*g]
				}
			}
		}
	}
	return true
}

// asmQ6KAMX is asmQ4_1AMX for Q6_K (q6kamx_amd64.s).
func asmQ6KAMX(out []float32, w *Mat, a *qactK, n, lo, hi int) bool {
	if !q4_1AMXRuns() || w.amxK == nil || hi <= lo {
		return false
	}
	pk := q6KPacked(w)
	nb, rows := w.Cols/256, w.Rows
	_ = out[(n-1)*rows+hi-1]
	first, last := lo/16, (hi-1)/16
	var cut [2]int
	ncut := 0
	if 16*first < lo || 16*first+16 > hi {
		cut[ncut], ncut = first, ncut+1
	}
	if last != first && 16*last+16 > hi {
		cut[ncut], ncut = last, ncut+1
	}
	g0, g1 := (lo+15)/16, hi/16
	for t0 := 0; t0 < n; t0 += 8 {
		T := min(8, n-t0)
		x := &a.q[t0*nb*256]
		d, c := &a.amxD[t0/8*nb*8], &a.amxComp[t0/8*nb*128]
		if g1 > g0 {
			q6KAMXCall(T, &pk[g0*nb*4384], nb, g1-g0, x, d, c, &out[t0*rows+16*g0], rows)
		}
		for _, g := range cut[:ncut] {
			var tmp [8 * 16]float32
			q6KAMXCall(T, &pk[g*nb*4384], nb, 1, x, d, c, &tmp[0], 16)
			for t := range T {
				for r := max(lo, 16*g); r < min(hi, 16*g+16); r++ {
					out[(t0+t)*rows+r] = tmp[16*t+r-16*g]
				}
			}
		}
	}
	return true
}
