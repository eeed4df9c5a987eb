package kernels

// SumWords is the 64-bit (wrapping) sum of w: the read-bandwidth probe that calibrate times
// over an array much larger than the caches. It streams the way the decode products do
// (gemm_amd64.s: vector loads at base-only addresses, prefetched ahead), so the rate it
// measures is what a weight stream can reach on this machine; the portable loop below,
// eight scalar chains, reaches noticeably less (it issues eight loads per cache line).
func SumWords(w []uint64) uint64 {
	s0, i := asmSumWords(w)
	var s1, s2, s3, s4, s5, s6, s7 uint64
	for ; i+8 <= len(w); i += 8 {
		b := w[i : i+8 : i+8]
		s0 += b[0]
		s1 += b[1]
		s2 += b[2]
		s3 += b[3]
		s4 += b[4]
		s5 += b[5]
		s6 += b[6]
		s7 += b[7]
	}
	for ; i < len(w); i++ {
		s0 += w[i]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}
