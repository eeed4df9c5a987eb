package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// tiledRef is llama.cpp's tiled flash attention for one query at position pos (attending
// first..pos), written query by query without any of AttendTiled's layout: cache tiles of
// AttnTile positions from 0, each score a fused multiply-add chain times scale, the running
// maximum and sum, weights from expGGML summed in the build's groups, and every accumulator
// element a chain over the tile's positions.
func tiledRef(q []float32, k, v []uint16, row func(p int) int, first, pos int, scale float32) []float32 {
	hd := len(q)
	m, s := float32(math.Inf(-1)), float32(0)
	acc := make([]float32, hd)
	lanes := 8
	if ggmlAVX512 {
		lanes = 16
	}
	for a := first &^ (AttnTile - 1); a <= pos; a += AttnTile {
		var sc [AttnTile]float32
		tmax := float32(math.Inf(-1))
		for j := range sc {
			p := a + j
			if p < first || p > pos {
				sc[j] = float32(math.Inf(-1))
				continue
			}
			kr := k[row(p):]
			var d float32
			for i := range hd {
				d = fma32(q[i], f16Table[kr[i]], d)
			}
			sc[j] = d * scale
			tmax = max(tmax, sc[j])
		}
		mnew := max(m, tmax)
		if mnew > m {
			ms := expf32(m - mnew)
			for i := range acc {
				acc[i] *= ms
			}
			s *= ms
		}
		m = mnew
		var sum float64
		for g := 0; g < AttnTile; g += lanes {
			var e [16]float32
			for l := range lanes {
				e[l] = expGGML(sc[g+l] - mnew)
				sc[g+l] = e[l]
			}
			var r float32
			if lanes == 16 {
				h := [8]float32{}
				for l := range 8 {
					h[l] = e[8+l] + e[l]
				}
				r = ((h[4] + h[0]) + (h[6] + h[2])) + ((h[5] + h[1]) + (h[7] + h[3]))
			} else {
				r = ((e[4] + e[0]) + (e[6] + e[2])) + ((e[5] + e[1]) + (e[7] + e[3]))
			}
			sum += float64(r)
		}
		s = float32(float64(s) + sum)
		for i := range acc {
			for j := range sc {
				p := a + j
				if p >= first && p <= pos {
					acc[i] = fma32(sc[j], f16Table[v[row(p)+i]], acc[i])
				}
			}
		}
	}
	inv := float32(0)
	if s != 0 {
		inv = 1 / s
	}
	for i := range acc {
		acc[i] *= inv
	}
	return acc
}

// TestAttendTiled: every output of AttendTiled (assembly where it runs) has the bits of
// tiledRef, for head sizes with and without a 64-column tail, query tiles that start
// inside a cache tile, partial tiles, a sliding window, scattered cache rows and both
// builds' softmax sums.
func TestAttendTiled(t *testing.T) {
	defer func(v bool) { ggmlAVX512 = v }(ggmlAVX512)
	r := rand.New(rand.NewPCG(21, 22))
	type tc struct{ hd, nq, pos0, window int }
	cases := []tc{
		{64, 64, 0, 0}, {128, 64, 64, 0}, {128, 37, 100, 0}, {96, 64, 5, 0}, {80, 13, 190, 0},
		{64, 1, 0, 0}, {128, 64, 250, 70}, {64, 50, 30, 17}, {256, 20, 64, 0},
	}
	for _, lanes16 := range []bool{false, true} {
		ggmlAVX512 = lanes16
		for _, c := range cases {
			const kvHeads = 2
			stride := kvHeads * c.hd
			slots := c.pos0 + c.nq + 9
			kf, vf := make([]float32, slots*stride), make([]float32, slots*stride)
			for i := range kf {
				kf[i] = float32(r.NormFloat64() * (1 + 2*r.Float64()))
				vf[i] = float32(r.NormFloat64())
			}
			k, v := make([]uint16, len(kf)), make([]uint16, len(vf))
			F16Encode(k, kf)
			F16Encode(v, vf)
			perm := r.Perm(slots)
			rows := make([]int32, c.pos0+c.nq)
			for p := range rows {
				rows[p] = int32(perm[p])
			}
			off := c.hd * r.IntN(kvHeads)
			qStride := 3 * c.hd
			// Scores of order 1, so that the weights spread over many positions and any
			// wrong score or sum shows; one case with values over many binades.
			q := randomF32(r, c.nq*qStride)
			if c.hd != 80 {
				for i := range q {
					q[i] = float32(0.3 * r.NormFloat64())
				}
			}
			qs := TileQueries{Q: q, QStride: qStride, N: c.nq, Pos0: c.pos0, Window: c.window}
			qs.Out, qs.OutStride = make([]float32, c.nq*qStride), qStride
			cache := TileCache{K: k, V: v, Rows: rows, Off: off, Stride: stride}
			scale := float32(1 / math.Sqrt(float64(c.hd)))
			var f FlashTiled
			f.AttendTiled(&qs, &cache, c.hd, scale)
			for i := range c.nq {
				pos := c.pos0 + i
				want := tiledRef(qs.Q[i*qStride:i*qStride+c.hd], k, v,
					func(p int) int { return int(rows[p])*stride + off }, qs.first(i), pos, scale)
				got := qs.Out[i*qStride : i*qStride+c.hd]
				for d := range want {
					if math.Float32bits(got[d]) != math.Float32bits(want[d]) {
						t.Fatalf("lanes16 %v, %+v: query %d dim %d = %v, want %v", lanes16, c, i, d, got[d], want[d])
					}
				}
			}
		}
	}
}

// TestAttendTiledReuse: a FlashTiled that served one head size and query count gives the
// same outputs for the next call as a fresh one (no state leaks between calls).
func TestAttendTiledReuse(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	hd, stride := 64, 64
	k, v := make([]uint16, 200*stride), make([]uint16, 200*stride)
	F16Encode(k, randomF32(r, len(k)))
	F16Encode(v, randomF32(r, len(v)))
	rows := make([]int32, 200)
	for p := range rows {
		rows[p] = int32(p)
	}
	cache := TileCache{K: k, V: v, Rows: rows, Stride: stride}
	run := func(f *FlashTiled, nq, pos0 int, q []float32) []float32 {
		qs := TileQueries{Q: q, QStride: hd, N: nq, Pos0: pos0, Out: make([]float32, nq*hd), OutStride: hd}
		f.AttendTiled(&qs, &cache, hd, 0.125)
		return qs.Out
	}
	var used FlashTiled
	run(&used, 64, 120, randomF32(r, 64*hd))
	q := randomF32(r, 7*hd)
	got := run(&used, 7, 3, q)
	want := run(&FlashTiled{}, 7, 3, q)
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("element %d = %v after reuse, %v fresh", i, got[i], want[i])
		}
	}
}

// TestAttendTiledRowsOutside: rows that do not cover the attended positions, or point past
// the cache, are refused, not read.
func TestAttendTiledRowsOutside(t *testing.T) {
	k := make([]uint16, 4*64)
	for _, rows := range [][]int32{{0, 1}, {0, 1, 2, 4}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Fatalf("rows %v: AttendTiled read past the cache", rows)
				}
			}()
			qs := TileQueries{Q: make([]float32, 4*64), QStride: 64, N: 4, Out: make([]float32, 4*64), OutStride: 64}
			var f FlashTiled
			f.AttendTiled(&qs, &TileCache{K: k, V: k, Rows: rows, Stride: 64}, 64, 1)
		}()
	}
}

// BenchmarkCausalAttention512: one head of a 512-token causal prefill (head size 128) over
// an f16 cache, per query token: the tiled path against the per-position one (FlashF16).
func BenchmarkCausalAttention512(b *testing.B) {
	const n, hd = 512, 128
	r := rand.New(rand.NewPCG(5, 6))
	k, v := make([]uint16, n*hd), make([]uint16, n*hd)
	F16Encode(k, randomF32(r, n*hd))
	F16Encode(v, randomF32(r, n*hd))
	q := make([]float32, n*hd)
	for i := range q {
		q[i] = float32(0.3 * r.NormFloat64())
	}
	out := make([]float32, n*hd)
	rows := make([]int32, n)
	for p := range rows {
		rows[p] = int32(p)
	}
	scale := float32(1 / math.Sqrt(hd))
	b.Run("tiled", func(b *testing.B) {
		var f FlashTiled
		cache := TileCache{K: k, V: v, Rows: rows, Stride: hd}
		for b.Loop() {
			for t0 := 0; t0 < n; t0 += AttnTile {
				qs := TileQueries{Q: q[t0*hd:], QStride: hd, Out: out[t0*hd:], OutStride: hd, N: AttnTile, Pos0: t0}
				f.AttendTiled(&qs, &cache, hd, scale)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
	})
	b.Run("per-position", func(b *testing.B) {
		var f FlashF16
		q16 := make([]float32, hd)
		for b.Loop() {
			for t := range n {
				copy(q16, q[t*hd:(t+1)*hd])
				RoundF16(q16)
				f.Attend(out[t*hd:(t+1)*hd], q16, k, v, rows[:t+1], 0, hd, scale)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/token")
	})
}
