package kernels

import (
	"fmt"
	"math"
)

// Tiled attention over a half-precision KV cache: what llama.cpp's CPU flash attention runs
// for a pass of AttnTile or more query tokens (ggml_compute_forward_flash_attn_ext_tiled),
// where the per-position path (FlashF16) serves shorter passes and decode. It differs from
// FlashF16 in its arithmetic, not only in speed:
//
//   - queries stay float32, and K and V are widened to float32;
//   - positions are taken AttnTile at a time (tiles aligned to multiples of AttnTile in
//     the cache); a score is one chain of fused multiply-adds over the head's elements,
//     then times the scale, with −Inf where the causal mask (or a sliding window) hides
//     the position;
//   - per query and tile: the tile's maximum moves the running maximum M (the float32
//     accumulator and the running sum S are scaled by expf(Mold−Mnew) when it rises); the
//     tile's weights are ggml_v_expf(s−M) and their sum, 16-lane groups each reduced by
//     _mm512_reduce_add_ps's tree and added up in float64 (8-lane groups and SSE's tree in
//     the AVX2 build), is added to S;
//   - the accumulator takes weight·V as one chain of fused multiply-adds per element over
//     the tile's positions in order (ggml's simd_gemm), and the output is it times 1/S.
//
// Query tiles do not change a query's arithmetic (every query row is computed on its own),
// so callers may group queries as they like; cache tiles do.

// AttnTile is the tile size of llama.cpp's tiled flash attention in queries and in cache
// positions (ggml_fa_tile_config's Q and KV).
const AttnTile = 64

// TiledAttnOK reports whether AttendTiled serves heads of hd elements: hd a positive
// multiple of 16 (llama.cpp's own condition on the float32 vector width of its AVX-512 build).
func TiledAttnOK(hd int) bool { return hd > 0 && hd%16 == 0 }

// TileQueries are up to AttnTile consecutive query tokens of one head: query i is
// Q[i·QStride:][:hd], sits at position Pos0+i, attends positions max(0, Pos0+i−Window+1)
// (or 0 without a window) through Pos0+i, and its output goes to Out[i·OutStride:][:hd].
type TileQueries struct {
	Q, Out             []float32
	QStride, OutStride int
	N, Pos0, Window    int
}

// first is the first position query i attends to.
func (t *TileQueries) first(i int) int {
	p := t.Pos0 + i
	if t.Window > 0 && p-t.Window+1 > 0 {
		return p - t.Window + 1
	}
	return 0
}

// TileCache is an f16 KV cache as AttendTiled reads it: position p's key is
// K[Rows[p−RowBase]·Stride+Off:][:hd], its value the same slice of V.
type TileCache struct {
	K, V        []uint16
	Rows        []int32
	RowBase     int
	Off, Stride int
}

// FlashTiled is one worker's scratch for AttendTiled; the zero value is ready to use.
type FlashTiled struct {
	hd       int
	qt       []float32 // queries transposed: qt[d·AttnTile+i]
	k32, v32 []float32 // the tile's keys and values widened, a row per position
	kq       []float32 // scores, then weights, transposed: kq[j·AttnTile+i]
	acc      []float32 // per query Σ weight·V, AttnTile rows of hd
	m, s     [AttnTile]float32
}

func (f *FlashTiled) init(hd int) {
	if f.hd == hd {
		return
	}
	f.hd = hd
	f.qt = make([]float32, hd*AttnTile)
	f.k32 = make([]float32, AttnTile*hd)
	f.v32 = make([]float32, AttnTile*hd)
	f.kq = make([]float32, AttnTile*AttnTile)
	f.acc = make([]float32, AttnTile*hd)
}

// AttendTiled writes the attention outputs of the queries qs (heads of hd elements) over
// the cache c, with llama.cpp's tiled arithmetic (above). Rows must cover every position
// some query attends to.
func (f *FlashTiled) AttendTiled(qs *TileQueries, c *TileCache, hd int, scale float32) {
	nq := qs.N
	if nq <= 0 {
		return
	}
	if nq > AttnTile || !TiledAttnOK(hd) {
		panic(fmt.Sprintf("kernels: AttendTiled: %d queries of %d elements (at most %d, a multiple of 16)", nq, hd, AttnTile))
	}
	lo, hi := qs.first(0), qs.Pos0+nq // positions read: [lo, hi)
	if lo < c.RowBase || hi-c.RowBase > len(c.Rows) {
		panic(fmt.Sprintf("kernels: AttendTiled: positions %d..%d, rows cover %d..%d", lo, hi-1, c.RowBase, c.RowBase+len(c.Rows)-1))
	}
	for _, r := range c.Rows[lo-c.RowBase : hi-c.RowBase] {
		if r < 0 || int(r)*c.Stride+c.Off+hd > min(len(c.K), len(c.V)) {
			panic(fmt.Sprintf("kernels: AttendTiled: cache row %d (stride %d, offset %d, %d elements) is outside the cache (%d, %d elements)", r, c.Stride, c.Off, hd, len(c.K), len(c.V)))
		}
	}
	f.init(hd)
	nq4 := (nq + 3) &^ 3
	qt := f.qt
	for d := range hd {
		row := qt[d*AttnTile : (d+1)*AttnTile]
		for i := range nq {
			row[i] = qs.Q[i*qs.QStride+d]
		}
		clear(row[nq:])
	}
	for i := range nq4 {
		f.m[i], f.s[i] = float32(math.Inf(-1)), 0
	}
	clear(f.acc[:nq4*hd])
	for a := lo &^ (AttnTile - 1); a < hi; a += AttnTile {
		f.tile(qs, c, hd, scale, a, max(a, lo), min(a+AttnTile, hi))
	}
	for i := range nq {
		inv := float32(0)
		if f.s[i] != 0 {
			inv = 1 / f.s[i]
		}
		out := qs.Out[i*qs.OutStride : i*qs.OutStride+hd]
		for d, v := range f.acc[i*hd : (i+1)*hd] {
			out[d] = v * inv
		}
	}
}

// tile takes the cache tile starting at position a, of which positions [kvlo, kvhi) are
// read (the others are masked for every query).
func (f *FlashTiled) tile(qs *TileQueries, c *TileCache, hd int, scale float32, a, kvlo, kvhi int) {
	nq := qs.N
	nq4 := (nq + 3) &^ 3
	for p := kvlo; p < kvhi; p++ {
		s := int(c.Rows[p-c.RowBase])*c.Stride + c.Off
		j := p - a
		widenHalves(f.k32[j*hd:(j+1)*hd], c.K[s:s+hd])
		widenHalves(f.v32[j*hd:(j+1)*hd], c.V[s:s+hd])
	}
	// Scores, transposed (a row per position, the queries along it): rows in groups of four,
	// so a group may take a row outside [kvlo, kvhi); its scores are masked below.
	j0, j1 := (kvlo-a)&^3, min((kvhi-a+3)&^3, AttnTile)
	for j := j0; j < j1; j += 4 {
		gemmBcast4(f.kq[j*AttnTile:], AttnTile, f.k32[j*hd:], hd, 1, f.qt, AttnTile, hd, AttnTile, true, scale)
	}
	if !f.softmaxVec(qs, a, kvlo, kvhi, j0, j1) {
		f.softmaxScalar(qs, a, kvlo, kvhi, j0, j1)
	}
	// acc += weights·V over the positions read (the other weights are 0: no change).
	k := kvhi - kvlo
	w := f.kq[(kvlo-a)*AttnTile:]
	v := f.v32[(kvlo-a)*hd:]
	for i := 0; i < nq4; i += 4 {
		for col := 0; col < hd; {
			cols := 64 // then 16 at a time for a tail (hd is a multiple of 16)
			if hd-col < 64 {
				cols = 16
			}
			gemmBcast4(f.acc[i*hd+col:], hd, w[i:], 1, AttnTile, v[col:], hd, k, cols, false, 1)
			col += cols
		}
	}
}

// softmaxScalar is the tile's online softmax a query at a time, in Go: the path where the
// assembly (softmaxVec) does not run.
func (f *FlashTiled) softmaxScalar(qs *TileQueries, a, kvlo, kvhi, j0, j1 int) {
	nq := qs.N
	nq4 := (nq + 3) &^ 3
	var e [AttnTile]float32
	for i := range nq4 {
		if i >= nq {
			for j := j0; j < j1; j++ {
				f.kq[j*AttnTile+i] = 0
			}
			continue
		}
		pi := qs.Pos0 + i
		fi := qs.first(i)
		tmax := float32(math.Inf(-1))
		for j := range AttnTile {
			p := a + j
			v := float32(math.Inf(-1))
			if p >= kvlo && p < kvhi && p >= fi && p <= pi {
				v = f.kq[j*AttnTile+i]
			}
			e[j] = v
			tmax = max(tmax, v)
		}
		if math.IsInf(float64(tmax), -1) { // nothing to attend in this tile: weights 0
			for j := j0; j < j1; j++ {
				f.kq[j*AttnTile+i] = 0
			}
			continue
		}
		mnew := f.rescale(i, tmax)
		f.s[i] = float32(float64(f.s[i]) + softmaxSumGGML(&e, mnew))
		for j := j0; j < j1; j++ {
			f.kq[j*AttnTile+i] = e[j]
		}
	}
}

// rescale moves query i's running maximum to take a tile whose largest score is tmax,
// scaling its accumulator and sum by expf(Mold−Mnew) when it rises, and returns Mnew.
func (f *FlashTiled) rescale(i int, tmax float32) float32 {
	mold := f.m[i]
	mnew := max(mold, tmax)
	if mnew > mold {
		ms := expf(mold - mnew)
		acc := f.acc[i*f.hd : (i+1)*f.hd]
		for d := range acc {
			acc[d] *= ms
		}
		f.s[i] *= ms
	}
	f.m[i] = mnew
	return mnew
}

// softmaxVec is the tile's online softmax with the columns' maxima, weights and sums in
// assembly (AVX-512, where llama.cpp runs its AVX-512 build); false where it does not run.
// Every score a query does not attend becomes −Inf first (all 64 rows: rows outside
// [j0, j1) hold an earlier tile's scores); a query with nothing to attend, and the padding
// queries, take M = +Inf, which turns all their weights to 0.
func (f *FlashTiled) softmaxVec(qs *TileQueries, a, kvlo, kvhi, j0, j1 int) bool {
	if !useAVX512Softmax() {
		return false
	}
	nq := qs.N
	kq := f.kq
	ninf := float32(math.Inf(-1))
	if !(a >= kvlo && a+AttnTile <= kvhi && a+AttnTile-1 <= qs.Pos0 && a >= qs.first(nq-1)) {
		for i := range nq {
			lo := max(qs.first(i), kvlo) - a
			hi := min(qs.Pos0+i+1, kvhi) - a
			for j := 0; j < max(0, min(lo, AttnTile)); j++ {
				kq[j*AttnTile+i] = ninf
			}
			for j := max(0, hi); j < AttnTile; j++ {
				kq[j*AttnTile+i] = ninf
			}
		}
	}
	var tmax, m [AttnTile]float32
	var sums [AttnTile]float64
	asmColMax64(kq, &tmax)
	inf := float32(math.Inf(1))
	for i := range AttnTile {
		m[i] = inf
		if i < nq && tmax[i] != ninf {
			m[i] = f.rescale(i, tmax[i])
		}
	}
	asmSoftmaxTile64(kq, &m, &sums)
	for i := range nq {
		if m[i] != inf {
			f.s[i] = float32(float64(f.s[i]) + sums[i])
		}
	}
	return true
}

// softmaxSumGGML replaces e[j] with ggml_v_expf(e[j]−m) and returns their sum as
// ggml_vec_soft_max_f32 forms it: 16-lane groups (8 in the AVX2 build), each reduced in
// float32 by the build's horizontal add, the group sums added in float64.
func softmaxSumGGML(e *[AttnTile]float32, m float32) float64 {
	for j, v := range e {
		e[j] = expGGML(v - m)
	}
	var sum float64
	if ggmlAVX512 {
		for g := 0; g < AttnTile; g += 16 {
			sum += float64(reduceAdd16((*[16]float32)(e[g : g+16])))
		}
		return sum
	}
	for g := 0; g < AttnTile; g += 8 {
		sum += float64(hsum8((*[8]float32)(e[g : g+8]))) // the same tree as hsum_float_8
	}
	return sum
}

// reduceAdd16 is _mm512_reduce_add_ps: halves of 8, of 4, then pairs.
func reduceAdd16(a *[16]float32) float32 {
	var t3 [8]float32
	for l := range 8 {
		t3[l] = a[8+l] + a[l]
	}
	t6 := [4]float32{t3[4] + t3[0], t3[5] + t3[1], t3[6] + t3[2], t3[7] + t3[3]}
	return (t6[0] + t6[2]) + (t6[1] + t6[3])
}

// widenHalves widens f16 values to float32.
func widenHalves(dst []float32, src []uint16) {
	n := asmWidenF16(dst, src)
	F16Decode(dst[n:], src[n:])
}

// gemmBcast4 sets C[4×cols] = (fresh ? 0 : C) + A[4×k]·B[k×cols], then times scale, with
// C row i at c[i·ldc:], A element (i, kk) at a[i·ars+kk·aks] and B row kk at b[kk·ldb:]:
// each output one chain of fused multiply-adds over kk, as ggml's simd_gemm. cols is 64
// or 16; the assembly serves both on AVX-512.
func gemmBcast4(c []float32, ldc int, a []float32, ars, aks int, b []float32, ldb, k, cols int, fresh bool, scale float32) {
	_ = c[3*ldc+cols-1]
	if k > 0 {
		_ = a[3*ars+(k-1)*aks]
		_ = b[(k-1)*ldb+cols-1]
	}
	if asmGemmBcast4(c, ldc, a, ars, aks, b, ldb, k, cols, fresh, scale) {
		return
	}
	for i := range 4 {
		for col := range cols {
			var acc float32
			if !fresh {
				acc = c[i*ldc+col]
			}
			for kk := range k {
				acc = fma32(a[i*ars+kk*aks], b[kk*ldb+col], acc)
			}
			c[i*ldc+col] = acc * scale
		}
	}
}
