//go:build goexperiment.simd && amd64

package kernels

import (
	"math"
	"simd/archsimd"
	"unsafe"
)

// simdAttendF32 is AttendF32 in AVX2 for head sizes that are a multiple of 8: scores eight
// positions at a time (eight key rows against q, each in one accumulator, reduced together
// by two rounds of horizontal adds), the softmax eight scores at a time with expGGML's
// operations, and the weighted sum with the output's 64 values held in eight registers
// across all positions. Same bits as attendF32Ref.
func simdAttendF32(out, q, k, v []float32, rows []int32, off, stride int, scale float32, scores []float32) bool {
	hd := len(q)
	if !useSIMD || hd%8 != 0 {
		return false
	}
	// Bounds, checked once: every row's slices lie inside k and v.
	var hi int32
	for _, r := range rows {
		hi = max(hi, r)
		if r < 0 {
			panic("kernels: negative cache row")
		}
	}
	if end := int(hi)*stride + off + hd; end > len(k) || end > len(v) || off < 0 {
		panic("kernels: cache row out of range")
	}
	if !useAsmGEMM { // TOKENWISE_NO_ASM: the same passes in archsimd
		mx := attnScores(q, k, rows, off, stride, scale, scores)
		attnSoftmax(scores, mx, ggmlAVX512)
		attnValues(out, v, rows, off, stride, scores)
		return true
	}
	attnSoftmax(scores, attnScoresAsm(q, k, rows, off, stride, scale, scores), ggmlAVX512)
	n, pv := len(rows), unsafe.Pointer(&v[off])
	c := hd &^ 63
	if c > 0 {
		attnValues64AVX2(&out[0], c/64, (*float32)(pv), &rows[0], n, stride, &scores[0], 0)
	}
	if c < hd {
		attnValuesFrom(out, v, rows, off, stride, scores, c)
	}
	return true
}

// attnAsmSwitch turns the assembly passes on or off (off: the archsimd ones) and returns
// what was set, for tests and benchmarks that run both. The switch is useAsmGEMM.
func attnAsmSwitch(on bool) bool {
	was := useAsmGEMM
	useAsmGEMM = on && !noAsm && cpuISA >= ISAAVX2
	return was
}

// avx512AttnSwitch turns the 512-bit passes on or off where the CPU has them and returns
// what was set (tests).
func avx512AttnSwitch(on bool) bool {
	was := useAVX512Attn
	useAVX512Attn = on && useAsmQ8 && cpuISA >= ISAAVX512
	return was
}

// The passes in assembly (attn_f32_amd64.s).

//go:noescape
func attnValues64AVX2(out *float32, chunks int, v *float32, rows *int32, n int, stride int, w *float32, acc int)

//go:noescape
func attnScoresGroupAVX2(qs **float32, nq int, hdb int, k *float32, rows *int32, groups int, stride int, scale float32, scores **float32, mx *float32)

//go:noescape
func attnScoresPairsAVX512(qp *float32, npairs int, hdb int, k *float32, rows *int32, groups int, stride int, scale float32, scores **float32, mx *float32, idx *int32)

// pairIdx are attnScoresPairsAVX512's VPERMT2PS indices: each 256-bit half's g0 and g1 low
// 128-bit lanes, then their high ones (attnScoresGroupAVX2's VPERM2F128 0x20 and 0x31 per half).
var pairIdx = [32]int32{
	0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27,
	4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31,
}

//go:noescape
func attnValues64x4AVX512(outs **float32, chunks int, v *float32, rows *int32, n int, stride int, ws **float32)

// simdAttendF32Shared is AttendF32Shared in assembly: the scores of every query over the
// rows all of them attend (whole groups of eight) in one pass over those rows, then each
// query's own last rows alone; each query's softmax; and the weighted sums four queries at
// a time over the shared rows (512-bit, where AVX-512 is on), each query's own rows then
// going on from where its chains stopped. Every value is computed as AttendF32 computes it.
func simdAttendF32Shared(outs, qs [][]float32, ns []int, k, v []float32, rows []int32, off, stride int, scale float32, scratch []float32) bool {
	nq := len(qs)
	if nq == 0 || nq > AttnSharedMax || !useSIMD || !useAsmGEMM {
		return false
	}
	hd := len(qs[0])
	if hd%8 != 0 || hd == 0 {
		return false
	}
	nmin, nmax := ns[0], 0
	for _, n := range ns {
		nmin, nmax = min(nmin, n), max(nmax, n)
	}
	if nmin <= 0 || nmax > len(rows) {
		return false
	}
	rows = rows[:nmax]
	var hi int32
	for _, r := range rows {
		hi = max(hi, r)
		if r < 0 {
			panic("kernels: negative cache row")
		}
	}
	if end := int(hi)*stride + off + hd; end > len(k) || end > len(v) || off < 0 {
		panic("kernels: cache row out of range")
	}
	var qp, sp, op [AttnSharedMax]*float32
	var mx [AttnSharedMax][8]float32
	var scArr [AttnSharedMax][]float32
	sc := scArr[:nq]
	at := 0
	for i := range nq {
		if len(qs[i]) != hd || len(outs[i]) < hd {
			panic("kernels: AttendF32Shared: query or output size")
		}
		sc[i] = scratch[at : at+ns[i]]
		at += ns[i]
		qp[i], sp[i], op[i] = &qs[i][0], &sc[i][0], &outs[i][0]
		for l := range mx[i] {
			mx[i][l] = float32(math.Inf(-1))
		}
	}
	pk := (*float32)(unsafe.Pointer(&k[off]))
	g := nmin / 8
	if g > 0 {
		done := 0
		if pairs := nq / 2; pairs > 0 && useAVX512Attn && len(scratch) >= at+2*pairs*hd {
			// Pairs of queries in 512-bit registers, their dimensions interleaved by eight
			// (in scratch after the scores).
			qpair := scratch[at : at+2*pairs*hd]
			for p := range pairs {
				a, b, dst := qs[2*p], qs[2*p+1], qpair[2*p*hd:]
				for d := 0; d < hd; d += 8 {
					copy(dst[2*d:2*d+8], a[d:d+8])
					copy(dst[2*d+8:2*d+16], b[d:d+8])
				}
			}
			attnScoresPairsAVX512(&qpair[0], pairs, 4*hd, pk, &rows[0], g, stride, scale, &sp[0], &mx[0][0], &pairIdx[0])
			done = 2 * pairs
		}
		if done < nq {
			attnScoresGroupAVX2(&qp[done], nq-done, 4*hd, pk, &rows[0], g, stride, scale, &sp[done], &mx[done][0])
		}
	}
	for i := range nq {
		m := mx[i][0]
		for _, t := range mx[i][1:] {
			m = max(m, t)
		}
		if j := 8 * g; j < ns[i] {
			m = max(m, attnScoresAsm(qs[i], k, rows[j:ns[i]], off, stride, scale, sc[i][j:]))
		}
		attnSoftmax(sc[i], m, ggmlAVX512)
	}
	pv := (*float32)(unsafe.Pointer(&v[off]))
	c := hd &^ 63
	var dummy [attnSharedDummy]float32
	for i0 := 0; c > 0 && i0 < nq; {
		if nq-i0 == 1 || !useAVX512Attn || c > len(dummy) { // its own chains from zero
			attnValues64AVX2(op[i0], c/64, pv, &rows[0], ns[i0], stride, sp[i0], 0)
			i0++
			continue
		}
		// Four queries over the shared rows (a short group padded with its first query,
		// whose extra results go to dummy), then each one's own rows.
		var o4, w4 [4]*float32
		for u := range 4 {
			if i := i0 + u; i < nq {
				o4[u], w4[u] = op[i], sp[i]
			} else {
				o4[u], w4[u] = &dummy[0], sp[i0]
			}
		}
		attnValues64x4AVX512(&o4[0], c/64, pv, &rows[0], nmin, stride, &w4[0])
		for i := i0; i < min(i0+4, nq); i++ {
			if ns[i] > nmin {
				attnValues64AVX2(op[i], c/64, pv, &rows[nmin], ns[i]-nmin, stride, &sc[i][nmin], 1)
			}
		}
		i0 += 4
	}
	if c < hd {
		for i := range nq {
			attnValuesFrom(outs[i][:hd], v, rows[:ns[i]], off, stride, sc[i], c)
		}
	}
	return true
}

// attnSharedDummy bounds the head size AttendF32Shared's 512-bit values pass takes (wider
// heads take the one-query pass).
const attnSharedDummy = 512

// attnScoresAsm is attnScores in assembly: whole groups of eight rows in one call, the last
// partial group through a copy of its rows padded with its last row (whose repeated score
// is dropped, and cannot change the maximum).
func attnScoresAsm(q, k []float32, rows []int32, off, stride int, scale float32, scores []float32) float32 {
	n, hd := len(rows), len(q)
	pk := (*float32)(unsafe.Pointer(&k[off]))
	mxv := [8]float32{}
	for i := range mxv {
		mxv[i] = float32(math.Inf(-1))
	}
	qp := &q[0]
	if g := n / 8; g > 0 {
		sp := &scores[0]
		attnScoresGroupAVX2(&qp, 1, 4*hd, pk, &rows[0], g, stride, scale, &sp, &mxv[0])
	}
	if j := n &^ 7; j < n {
		var pad [8]int32
		var tail [8]float32
		for r := range pad {
			pad[r] = rows[min(j+r, n-1)]
		}
		sp := &tail[0]
		attnScoresGroupAVX2(&qp, 1, 4*hd, pk, &pad[0], 1, stride, scale, &sp, &mxv[0])
		copy(scores[j:], tail[:n-j])
	}
	mx := mxv[0]
	for _, t := range mxv[1:] {
		mx = max(mx, t)
	}
	return mx
}

// attnScores fills scores and returns their maximum.
func attnScores(q, k []float32, rows []int32, off, stride int, scale float32, scores []float32) float32 {
	hd, n := len(q), len(rows)
	pq, pk := unsafe.Pointer(unsafe.SliceData(q)), unsafe.Pointer(unsafe.SliceData(k))
	row := func(j int) unsafe.Pointer { return unsafe.Add(pk, 4*(int(rows[j])*stride+off)) }
	sc := archsimd.BroadcastFloat32x8(scale)
	mxv := archsimd.BroadcastFloat32x8(float32(math.Inf(-1)))
	var tail [8]float32
	for j := 0; j < n; j += 8 {
		var p [8]unsafe.Pointer
		for r := range p {
			p[r] = row(min(j+r, n-1)) // past the end: the last row again, its score dropped
		}
		p0, p1, p2, p3, p4, p5, p6, p7 := p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]
		var a0, a1, a2, a3, a4, a5, a6, a7 archsimd.Float32x8
		for d := 0; d < hd; d += 8 {
			x := ldF32(pq, d)
			a0 = ldF32(p0, d).MulAdd(x, a0)
			a1 = ldF32(p1, d).MulAdd(x, a1)
			a2 = ldF32(p2, d).MulAdd(x, a2)
			a3 = ldF32(p3, d).MulAdd(x, a3)
			a4 = ldF32(p4, d).MulAdd(x, a4)
			a5 = ldF32(p5, d).MulAdd(x, a5)
			a6 = ldF32(p6, d).MulAdd(x, a6)
			a7 = ldF32(p7, d).MulAdd(x, a7)
		}
		// [r0, r1, r2, r3 | r4, r5, r6, r7] of row r's lanes: two rounds of pair adds give
		// (l0+l1)+(l2+l3) in the low half and (l4+l5)+(l6+l7) in the high one.
		g0 := a0.AddPairsGrouped(a1).AddPairsGrouped(a2.AddPairsGrouped(a3))
		g1 := a4.AddPairsGrouped(a5).AddPairsGrouped(a6.AddPairsGrouped(a7))
		s := g0.Select128FromPair(0, 2, g1).Add(g0.Select128FromPair(1, 3, g1)).Mul(sc)
		if j+8 > n { // the last, partial group: its scores go through tail, the max below
			s.Store(&tail)
			copy(scores[j:], tail[:n-j])
			break
		}
		s.Store((*[8]float32)(scores[j : j+8]))
		mxv = mxv.Max(s)
	}
	mxv.Store(&tail)
	archsimd.ClearAVXUpperBits()
	mx := tail[0]
	for _, t := range tail[1:] {
		mx = max(mx, t)
	}
	for _, t := range scores[n&^7:] {
		mx = max(mx, t)
	}
	return mx
}

// attnSoftmax turns scores into weights: e_j = attnExp(s_j − mx), then e_j·(1/Σe).
// avx512 picks the variant of ggml's expf (expGGML).
func attnSoftmax(scores []float32, mx float32, avx512 bool) {
	n := len(scores)
	ps := unsafe.Pointer(unsafe.SliceData(scores))
	k := func(i int) archsimd.Float32x8 { return archsimd.LoadFloat32x8(&siluK[i]) }
	m := archsimd.BroadcastFloat32x8(mx)
	var sum archsimd.Float32x8
	j := 0
	for ; j+8 <= n; j += 8 {
		x := ldF32(ps, j).Sub(m)
		z := x.MulAdd(k(1), k(0))
		nn := z.Sub(k(0))
		neg := archsimd.Float32x8{}.Sub(nn)
		b := neg.MulAdd(k(3), neg.MulAdd(k(2), x))
		u := b.Mul(b)
		h := k(4).MulAdd(b, k(5)).MulAdd(u, k(6).MulAdd(b, k(7)))
		var e archsimd.Float32x8
		if avx512 {
			scale := nn.ConvertToInt32().Add(archsimd.BroadcastInt32x8(127)).ShiftAllLeft(23).AsFloat32x8()
			e = h.MulAdd(u, k(8).MulAdd(b, k(9))).Mul(scale)
		} else {
			kk := z.AsUint32x8().ShiftAllLeft(23).Add(archsimd.BroadcastUint32x8(0x3f800000)).AsFloat32x8()
			e = h.MulAdd(u, k(8).Mul(b)).MulAdd(kk, kk)
		}
		e = e.Masked(nn.GreaterEqual(k(11))) // under 2⁻¹²⁶: zero
		e.Store((*[8]float32)(unsafe.Add(ps, 4*j)))
		sum = sum.Add(e)
	}
	var l [8]float32
	sum.Store(&l)
	archsimd.ClearAVXUpperBits()
	for ; j < n; j++ {
		e := attnExp(scores[j] - mx)
		scores[j] = e
		l[j%8] += e
	}
	inv := 1 / tree8(&l)
	iv := archsimd.BroadcastFloat32x8(inv)
	j = 0
	for ; j+8 <= n; j += 8 {
		p := (*[8]float32)(unsafe.Add(ps, 4*j))
		archsimd.LoadFloat32x8(p).Mul(iv).Store(p)
	}
	archsimd.ClearAVXUpperBits()
	for ; j < n; j++ {
		scores[j] *= inv
	}
}

// attnValues writes out = Σ_j w_j·v_j (w in scores), 64 output values at a time in eight
// registers, then any last 8-wide columns one register at a time.
func attnValues(out, v []float32, rows []int32, off, stride int, w []float32) {
	hd := len(out)
	po, pv := unsafe.Pointer(unsafe.SliceData(out)), unsafe.Pointer(unsafe.SliceData(v))
	c := 0
	for ; c+64 <= hd; c += 64 {
		var o0, o1, o2, o3, o4, o5, o6, o7 archsimd.Float32x8
		for j, r := range rows {
			x := archsimd.BroadcastFloat32x8(w[j])
			p := unsafe.Add(pv, 4*(int(r)*stride+off+c))
			o0 = ldF32(p, 0).MulAdd(x, o0)
			o1 = ldF32(p, 8).MulAdd(x, o1)
			o2 = ldF32(p, 16).MulAdd(x, o2)
			o3 = ldF32(p, 24).MulAdd(x, o3)
			o4 = ldF32(p, 32).MulAdd(x, o4)
			o5 = ldF32(p, 40).MulAdd(x, o5)
			o6 = ldF32(p, 48).MulAdd(x, o6)
			o7 = ldF32(p, 56).MulAdd(x, o7)
		}
		p := unsafe.Add(po, 4*c)
		o0.Store((*[8]float32)(p))
		o1.Store((*[8]float32)(unsafe.Add(p, 32)))
		o2.Store((*[8]float32)(unsafe.Add(p, 64)))
		o3.Store((*[8]float32)(unsafe.Add(p, 96)))
		o4.Store((*[8]float32)(unsafe.Add(p, 128)))
		o5.Store((*[8]float32)(unsafe.Add(p, 160)))
		o6.Store((*[8]float32)(unsafe.Add(p, 192)))
		o7.Store((*[8]float32)(unsafe.Add(p, 224)))
	}
	attnValuesFrom(out, v, rows, off, stride, w, c)
}

// attnValuesFrom is attnValues for the columns from c on, one register at a time.
func attnValuesFrom(out, v []float32, rows []int32, off, stride int, w []float32, c int) {
	hd := len(out)
	po, pv := unsafe.Pointer(unsafe.SliceData(out)), unsafe.Pointer(unsafe.SliceData(v))
	for ; c < hd; c += 8 {
		var o archsimd.Float32x8
		for j, r := range rows {
			o = ldF32(unsafe.Add(pv, 4*(int(r)*stride+off+c)), 0).MulAdd(archsimd.BroadcastFloat32x8(w[j]), o)
		}
		o.Store((*[8]float32)(unsafe.Add(po, 4*c)))
	}
	archsimd.ClearAVXUpperBits()
}
