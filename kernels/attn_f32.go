package kernels

import "math"

// AttendF32 writes into out the attention of one query head q over the cached positions
// whose rows are rows, in order, of an f32 cache: position j's key and value are
// k[rows[j]·stride+off:][:len(q)] and the same slice of v. scores is scratch of at least
// len(rows). The model's attention over an f32 cache and its calibration both call it.
//
// The arithmetic is fixed here, whatever runs it (attendF32Ref spells it out; the AVX2
// kernel, attn_f32_amd64.go, gives the same bits, tested by TestAttendF32SIMDEqualsRef):
//   - score j = (q·key_j)·scale, the dot in eight lanes (lane l sums the products of the
//     dimensions d ≡ l mod 8, in order, with fused multiply-adds) added as a tree,
//     ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7));
//   - e_j = attnExp(score_j − max), ggml's vectorized expf (expGGML), flushed to zero where
//     it leaves float32's normal range, summed in eight lanes (lane j mod 8) and the same tree;
//   - out = Σ_j v_j·(e_j·(1/sum)), each element a chain of fused multiply-adds in j order.
//
// So a token's attention depends on its rows alone (batch-invariant), and the SIMD kernel
// computes a whole head in three passes with its accumulators in registers. Why by hand:
// the version before it (a call to Dot and one to AddScaled per position, a float64 exp per
// score) took 37–41 ns per cached position, this one 10–15 (BenchmarkAttendF32, head size
// 64, 64 to 1024 positions, Intel Xeon model 207, one core), and attention over the cache
// is most of a decode step's work past a few hundred positions.
func AttendF32(out, q, k, v []float32, rows []int32, off, stride int, scale float32, scores []float32) {
	scores = scores[:len(rows)]
	out = out[:len(q)]
	if len(rows) == 0 {
		clear(out)
		return
	}
	if simdAttendF32(out, q, k, v, rows, off, stride, scale, scores) { // AVX2 (attn_f32_amd64.go)
		return
	}
	attendF32Ref(out, q, k, v, rows, off, stride, scale, scores)
}

// AttnSharedMax is the most queries one AttendF32Shared call takes.
const AttnSharedMax = 16

// AttendF32Shared writes into outs[i] the attention of query head qs[i] over the first
// ns[i] of rows, for up to AttnSharedMax queries that read the same KV head of one
// sequence's cache (the query heads of a group, for one or several tokens): each result is
// AttendF32(outs[i], qs[i], k, v, rows[:ns[i]], off, stride, scale, ·), bit for bit. What
// it shares is the reading: the cache rows that several queries attend are loaded once for
// all of them. scratch holds at least Σ ns[i] floats, and with len(qs)·head size more the
// scores of pairs of queries run in 512-bit registers. Why: one query head's attention
// streams its rows from the second-level cache at 7–10 ns a position on this machine; the
// queries of a KV head (three in SmolLM2, fifteen in a five-token verify pass) read the
// same rows. BenchmarkAttendF32Shared.
func AttendF32Shared(outs, qs [][]float32, ns []int, k, v []float32, rows []int32, off, stride int, scale float32, scratch []float32) {
	if len(qs) != len(outs) || len(qs) != len(ns) {
		panic("kernels: AttendF32Shared: queries, outputs and lengths differ in number")
	}
	if simdAttendF32Shared(outs, qs, ns, k, v, rows, off, stride, scale, scratch) {
		return
	}
	for i, q := range qs {
		AttendF32(outs[i], q, k, v, rows[:ns[i]], off, stride, scale, scratch)
	}
}

// attendF32Ref is AttendF32's arithmetic in scalar Go (its fallback and its reference).
func attendF32Ref(out, q, k, v []float32, rows []int32, off, stride int, scale float32, scores []float32) {
	hd := len(q)
	mx := float32(math.Inf(-1))
	for j, r := range rows {
		kr := k[int(r)*stride+off:][:hd]
		var l [8]float32
		for d, x := range q {
			l[d%8] = fma32(kr[d], x, l[d%8])
		}
		scores[j] = tree8(&l) * scale
		mx = max(mx, scores[j])
	}
	var l [8]float32
	for j, s := range scores {
		e := attnExp(s - mx)
		scores[j] = e
		l[j%8] += e
	}
	inv := 1 / tree8(&l)
	clear(out)
	for j, r := range rows {
		w := scores[j] * inv
		vr := v[int(r)*stride+off:][:hd]
		for d := range out {
			out[d] = fma32(vr[d], w, out[d])
		}
	}
}

// tree8 adds eight lanes as AttendF32 does: ((l0+l1)+(l2+l3))+((l4+l5)+(l6+l7)), the
// order of two rounds of horizontal pair adds.
func tree8(l *[8]float32) float32 {
	return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))
}

// attnExp is expGGML flushed to zero where ggml's exponent step n = round(x·log₂e) falls
// below −126 (x under about −87.7, where its scaling by 2ⁿ leaves the normal range), and
// for NaN: a softmax weight that small is nothing beside the largest, which is 1.
func attnExp(x float32) float32 {
	if !(fma32(x, 0x1.715476p+0, 0x1.8p23)-0x1.8p23 >= -126) { // NaN too, as the vector code
		return 0
	}
	return expGGML(x)
}
