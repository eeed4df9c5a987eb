package tensor

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
)

// Quantizers for the k-quants Q4_K, Q5_K and Q6_K: ggml's quantize_row_q4_K_ref,
// quantize_row_q5_K_ref and quantize_row_q6_K_ref (what llama-quantize and gguf's converter run without an importance
// matrix), reimplemented from their definition so that a block's bytes are llama-quantize's.
// ggml builds these in its base library without FMA, so every float32 product and sum is
// rounded on its own: the explicit float32(...) conversions below keep Go from fusing a
// multiply into the following add (which it may do on arm64), and the loops run in ggml's
// order, since float sums are not associative.

// eachBlock runs f on blocks 0..n-1, split over GOMAXPROCS goroutines: the k-quant fits
// search 20 scales per sub-block, so quantizing Qwen3-0.6B to Q4_K_M took 8 minutes on one
// loaded core. Blocks are independent, so the bytes do not depend on the split.
func eachBlock(n int, f func(b int)) {
	workers := min(runtime.GOMAXPROCS(0), n/64)
	if workers <= 1 {
		for b := range n {
			f(b)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := w * n / workers; b < (w+1)*n/workers; b++ {
				f(b)
			}
		}()
	}
	wg.Wait()
}

// groupMaxEps is ggml's GROUP_MAX_EPS: a group whose largest magnitude is below it is zero.
const groupMaxEps = 1e-15

// nearestInt is ggml's nearest_int: adding 1.5·2²³ rounds to an integer (half to even) in
// the mantissa, valid for |v| < 2²².
func nearestInt(v float32) int32 {
	f := v + 12582912
	return int32(math.Float32bits(f)&0x007fffff) - 0x00400000
}

func sqrt32(v float32) float32 { return float32(math.Sqrt(float64(v))) } // correctly rounded, as sqrtf

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// qkx2 is one of the parameter sets ggml passes make_qkx2_quants for 32 values with squared
// error: the largest level, and the search of iscale = (rmin + rdelta·i + nmax)/(max − min)
// for i = 0..nstep.
type qkx2 struct {
	nmax  int32
	rmin  float32
	nstep int
}

var (
	qkx2Q4K = qkx2{nmax: 15, rmin: -1, nstep: 20}   // quantize_row_q4_K_ref
	qkx2Q5K = qkx2{nmax: 31, rmin: -0.5, nstep: 15} // quantize_row_q5_K_ref
)

// makeQKX2 is ggml's make_qkx2_quants for 32 values, rdelta 0.1 and squared error, with the
// levels and search of p: the affine fit scale·L − min that minimizes the weighted error over
// a small search of scales. It returns scale and the min (negated, as ggml's the_min), with
// the levels in L.
func makeQKX2(p qkx2, x, w *[32]float32, L *[32]uint8) (scale, theMin float32) {
	const rdelta = 0.1
	nmax, rmin, nstep := p.nmax, p.rmin, p.nstep
	fmax := float32(nmax)
	mn, mx := x[0], x[0]
	sumW := w[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < 32; i++ {
		if x[i] < mn {
			mn = x[i]
		}
		if x[i] > mx {
			mx = x[i]
		}
		sumW += w[i]
		sumX += float32(w[i] * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		*L = [32]uint8{}
		return 0, -mn
	}
	iscale := fmax / (mx - mn)
	scale = 1 / iscale
	var best float32
	for i := range 32 {
		l := min(max(nearestInt(float32(iscale*float32(x[i]-mn))), 0), nmax)
		L[i] = uint8(l)
		diff := float32(float32(scale*float32(l))+mn) - x[i]
		best += float32(w[i] * float32(diff*diff))
	}
	var aux [32]uint8
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + fmax) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i := range 32 {
			l := min(max(nearestInt(float32(iscale*float32(x[i]-mn))), 0), nmax)
			aux[i] = uint8(l)
			wl := float32(w[i] * float32(l))
			sumL += wl
			sumL2 += float32(wl * float32(l))
			sumXL += float32(wl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var cur float32
			for i := range 32 {
				diff := float32(float32(thisScale*float32(aux[i]))+thisMin) - x[i]
				cur += float32(w[i] * float32(diff*diff))
			}
			if cur < best {
				*L = aux
				best, scale, mn = cur, thisScale, thisMin
			}
		}
	}
	return scale, -mn
}

// fitKMin is the part quantize_row_q4_K_ref and quantize_row_q5_K_ref share for one block of
// 256: eight sub-blocks of 32, each fit by makeQKX2 with weights av_x + |x|, their scales and
// mins quantized to 6 bits against the largest and written with d and dmin (the block's first
// 16 bytes, the same in both layouts), then every value requantized to 0..p.nmax with the
// rounded scales into L.
func fitKMin(x []float32, blk []byte, p qkx2, L *[256]uint8) {
	var scales, mins [8]float32
	var maxScale, maxMin float32
	for j := range 8 {
		xs := (*[32]float32)(x[32*j:])
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrt32(sumX2 / 32)
		var w [32]float32
		for l, v := range xs {
			w[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2(p, xs, &w, (*[32]uint8)(L[32*j:]))
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	clear(blk[:16])
	sc := blk[4:16]
	for j := range 8 {
		ls := min(uint8(nearestInt(float32(invScale*scales[j]))), 63)
		lm := min(uint8(nearestInt(float32(invMin*mins[j]))), 63)
		if j < 4 {
			sc[j], sc[j+4] = ls, lm
		} else {
			sc[j+4] = ls&0xf | (lm&0xf)<<4
			sc[j-4] |= (ls >> 4) << 6
			sc[j] |= (lm >> 4) << 6
		}
	}
	d16, m16 := F32ToF16(maxScale/63), F32ToF16(maxMin/63)
	binary.LittleEndian.PutUint16(blk[0:], d16)
	binary.LittleEndian.PutUint16(blk[2:], m16)
	for j := range 8 {
		s, m := scaleMinK4(j, sc)
		d := float32(F16ToF32(d16) * float32(s))
		if d == 0 {
			continue // the levels stay makeQKX2's
		}
		dm := float32(F16ToF32(m16) * float32(m))
		for i := range 32 {
			L[32*j+i] = uint8(min(max(nearestInt(float32(x[32*j+i]+dm)/d), 0), p.nmax))
		}
	}
}

// quantQ4K is quantize_row_q4_K_ref for one block of 256 (144 bytes): fitKMin's levels
// 0..15, two sub-blocks of 32 to each 32 bytes of nibbles.
func quantQ4K(x []float32, blk []byte) {
	var L [256]uint8
	fitKMin(x, blk, qkx2Q4K, &L)
	q := blk[16:144]
	for j := 0; j < 256; j += 64 {
		for l := range 32 {
			q[l] = L[j+l] | L[j+l+32]<<4
		}
		q = q[32:]
	}
}

// quantQ5K is quantize_row_q5_K_ref for one block of 256 (176 bytes): fitKMin's levels
// 0..31, the low four bits packed as Q4_K's and the fifth bit of element l of sub-block s in
// bit s of qh[l].
func quantQ5K(x []float32, blk []byte) {
	var L [256]uint8
	fitKMin(x, blk, qkx2Q5K, &L)
	qh, q := blk[16:48], blk[48:176]
	clear(qh)
	for j := 0; j < 256; j += 64 {
		s := uint(j / 32)
		for l := range 32 {
			lo, hi := L[j+l], L[j+l+32]
			qh[l] |= lo>>4<<s | hi>>4<<(s+1)
			q[l] = lo&0xf | (hi&0xf)<<4
		}
		q = q[32:]
	}
}

// makeQX is ggml's make_qx_quants for 16 values with nmax 32 and rmse_type 1 (Q6_K's call):
// a symmetric scale from the value of largest magnitude, refined over 18 nearby scales by
// the x²-weighted least-squares fit. Levels (0..63, the −32 offset added) go to L.
func makeQX(x *[16]float32, L *[16]int8) float32 {
	const nmax = 32
	var mx, amax float32
	for _, v := range x {
		if av := abs32(v); av > amax {
			amax, mx = av, v
		}
	}
	if amax < groupMaxEps {
		*L = [16]int8{}
		return 0
	}
	fit := func(iscale float32, store bool) (sumLX, sumL2 float32) {
		for i, v := range x {
			l := min(max(nearestInt(float32(iscale*v)), -nmax), nmax-1)
			if store {
				L[i] = int8(l + nmax)
			}
			w := float32(v * v)
			sumLX += float32(float32(w*v) * float32(l))
			sumL2 += float32(float32(w*float32(l)) * float32(l))
		}
		return
	}
	iscale := -nmax / mx
	sumLX, sumL2 := fit(iscale, true)
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := float32(scale * sumLX)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(nmax + float32(0.1*float32(is))) / mx
		sumLX, sumL2 = fit(iscale, false)
		if sumL2 > 0 && float32(sumLX*sumLX) > float32(best*sumL2) {
			fit(iscale, true)
			scale = sumLX / sumL2
			best = float32(scale * sumLX)
		}
	}
	return scale
}

// quantQ6K is quantize_row_q6_K_ref for one block of 256: sixteen sub-blocks of 16 fit by
// makeQX, their scales quantized to int8 against the largest in magnitude (−128/max), and
// every value requantized to −32..31 with the rounded scales.
func quantQ6K(x []float32, blk []byte) {
	var L [256]int8
	var scales [16]float32
	var maxScale, maxAbs float32
	for ib := range 16 {
		scales[ib] = makeQX((*[16]float32)(x[16*ib:]), (*[16]int8)(L[16*ib:]))
		if a := abs32(scales[ib]); a > maxAbs {
			maxAbs, maxScale = a, scales[ib]
		}
	}
	clear(blk[:210])
	if maxAbs < groupMaxEps {
		return
	}
	iscale := -128 / maxScale
	d16 := F32ToF16(1 / iscale)
	binary.LittleEndian.PutUint16(blk[208:], d16)
	sc := blk[192:208]
	for ib := range 16 {
		sc[ib] = byte(int8(min(127, nearestInt(float32(iscale*scales[ib])))))
	}
	for j := range 16 {
		d := float32(F16ToF32(d16) * float32(int8(sc[j])))
		if d == 0 {
			continue
		}
		for i := range 16 {
			L[16*j+i] = int8(min(max(nearestInt(x[16*j+i]/d), -32), 31) + 32)
		}
	}
	ql, qh := blk[0:128], blk[128:192]
	for j := 0; j < 256; j += 128 {
		for l := range 32 {
			q1, q2, q3, q4 := uint8(L[j+l]), uint8(L[j+l+32]), uint8(L[j+l+64]), uint8(L[j+l+96])
			ql[l] = q1&0xf | (q3&0xf)<<4
			ql[l+32] = q2&0xf | (q4&0xf)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
		ql, qh = ql[64:], qh[32:]
	}
}
