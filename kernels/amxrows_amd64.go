//go:build amd64

package kernels

import (
	"unsafe"

	"github.com/tokenwise/tokenwise/tensor"
)

// amxRowsRun reports whether the AMX-arithmetic kernels run: AVX-512 VNNI (every CPU with AMX
// has it; elsewhere the build's products go through the Go references).
func amxRowsRun() bool { return useVNNI }

// asmAMX computes rows [lo,hi) of the Q4_0, Q4_1 or Q8_0 matrix w for n tokens with the
// AMX-arithmetic kernels; it reports false where they do not run, or prepare did not make
// their layouts for this product (quantRows then takes the references).
func asmAMX(out []float32, w *Mat, a *qact, n, lo, hi int) bool {
	if !amxRowsRun() || w.amx == nil || a.amxN != n || hi <= lo {
		return false
	}
	nb := w.Cols / 32
	aux := unsafe.Pointer(unsafe.SliceData(a.amxComp))
	if w.DType == tensor.Q4_1 {
		aux = unsafe.Pointer(unsafe.SliceData(a.sn.sT))
	}
	asmAMXRows(out, w, 0, n, lo, hi, nb, a.q, nb*32, a.sn.dT, aux, nb*8*4)
	return true
}

// asmKAMX is asmAMX for Q4_K, Q5_K and Q6_K, tokens [t0,n) (t0 a multiple of 8) of the
// a.amxN that prepKAMX laid out.
func asmKAMX(out []float32, w *Mat, a *qactK, t0, n, lo, hi int) bool {
	if !amxRowsRun() || w.amx == nil || a.amxN < n || hi <= lo {
		return false
	}
	nb := w.Cols / 256
	auxBytes := nb * 32 * 4
	if w.DType == tensor.Q6_K {
		auxBytes = nb * 128 * 4
	}
	asmAMXRows(out, w, t0, n, lo, hi, nb, a.q, nb*256, a.amxD, unsafe.Pointer(unsafe.SliceData(a.amxComp)), auxBytes)
	return true
}

// asmAMXRows runs w's kernels (amxrows_amd64.s) on rows [lo,hi) of nb blocks (super-blocks)
// and tokens [start,n) (start a multiple of 8), eight tokens per call: the repack holds nb·amxGroupBytes per group of 16 rows, a token's quants
// are tokBytes apart in q, and each eight tokens' d (nb·8 floats) and aux (auxBytes) follow
// the last eight's. A group of 16 rows that [lo,hi) cuts is computed whole into a scratch and
// its rows in range copied.
func asmAMXRows(out []float32, w *Mat, start, n, lo, hi, nb int, q []int8, tokBytes int, d []float32, aux unsafe.Pointer, auxBytes int) {
	pk := amxPacked(w)
	groupBytes := nb * amxGroupBytes(w.DType)
	rows := w.Rows
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
	// A pass of more than eight tokens takes the whole groups in runs of about
	// amxRowsRunBytes of the repack, each through all the tokens (cache blocking).
	run := max(g1-g0, 1)
	if n-start > 8 && amxRowsRunBytes > 0 {
		run = max(1, amxRowsRunBytes/groupBytes)
	}
	for r0 := g0; r0 < g1; r0 += run {
		r1 := min(g1, r0+run)
		for t0 := start; t0 < n; t0 += 8 {
			amxRowsCall(w.DType, min(8, n-t0), &pk[r0*groupBytes], nb, r1-r0, &q[t0*tokBytes], &d[t0/8*nb*8],
				unsafe.Add(aux, t0/8*auxBytes), &out[t0*rows+16*r0], rows)
		}
	}
	for t0 := start; t0 < n; t0 += 8 {
		T := min(8, n-t0)
		x := &q[t0*tokBytes]
		dt := &d[t0/8*nb*8]
		at := unsafe.Add(aux, t0/8*auxBytes)
		for _, g := range cut[:ncut] {
			var tmp [8 * 16]float32
			amxRowsCall(w.DType, T, &pk[g*groupBytes], nb, 1, x, dt, at, &tmp[0], 16)
			for t := range T {
				for r := max(lo, 16*g); r < min(hi, 16*g+16); r++ {
					out[(t0+t)*rows+r] = tmp[16*t+r-16*g]
				}
			}
		}
	}
}

// amxKQuantRows computes rows [lo,hi) of a k-quant matrix in GGMLAMX's arithmetic: a Q4_K
// product of enough tokens (prepareAMX) on the AMX tile with its fused float steps, for
// whole blocks of 16 rows and the first a.amx.n tokens, and the rest with the
// rows-interleaved kernels, which give a (row, token) the same bits. It reports false where
// neither runs (kQuantRows then takes the reference).
func amxKQuantRows(out []float32, w *Mat, a *qactK, n, lo, hi int) bool {
	if !amxRowsRun() || a.amxN != n {
		return false
	}
	if w.DType == tensor.Q4_K && a.amx.n > 0 {
		r := q4KAMXRows(out, w, &a.amx, lo, hi)
		if r > lo && a.amx.n < n {
			asmKAMX(out, w, a, a.amx.n, n, lo, r)
		}
		if r < hi {
			asmKAMX(out, w, a, 0, n, r, hi)
		}
		return true
	}
	if w.DType == tensor.Q6_K {
		if n16 := q6KTileRows(out, w, a, n, lo, hi); n16 > 0 {
			// The tile took the whole groups' first n16 tokens: the rows kernels do the rows
			// outside those groups, then every row's other tokens (the same bits).
			if g0 := (lo + 15) / 16; lo < 16*g0 {
				asmKAMX(out, w, a, 0, n16, lo, 16*g0)
			}
			if g1 := hi / 16; 16*g1 < hi {
				asmKAMX(out, w, a, 0, n16, 16*g1, hi)
			}
			if n16 < n {
				asmKAMX(out, w, a, n16, n, lo, hi)
			}
			return true
		}
	}
	return asmKAMX(out, w, a, 0, n, lo, hi)
}
