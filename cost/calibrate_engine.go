package cost

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/tensor"
)

// What Calibrate measures for the engine model (engine.go). Everything runs through the
// kernels package's public entry points, the ones the model calls, so a faster kernel shows
// up in the next calibration without a change here.

// matVecCols are the row widths at which the decode product is measured: the hidden sizes
// and MLP widths of the models tokenwise runs, from SmolLM2-135M's 576 to the 8192-wide
// down-projection rows of a 1B model. engine.go interpolates between them in log(cols).
var matVecCols = []int{576, 1024, 2048, 8192}

// matVecSetsMiB are the weights cycled through per pass, besides ReadMiB (memory): a
// decode step streams all of a model's weights once, and a small model's stay partly in
// the last-level cache between steps (this project's Xeon reports 260 MiB of L3). Sets of
// half the last-level cache or more are not measured: predictions take the memory rate
// there (Rates.matVecBW says why).
var matVecSetsMiB = []int{32, 128}

// matVecMatrixMiB is the size of each matrix the sets are made of: a layer's projections
// are 0.2-33 MB; a few MiB keeps per-call costs (measured apart) a small correction.
const matVecMatrixMiB = 2

// matMulTokens and matMulRows: the prefill product at each width of matVecCols and these
// token counts, on matrices of matMulRows rows (fewer if --read-mib cannot hold them) and
// of one 4-row group per thread. Two row counts separate the product's two costs: each call
// converts all its tokens' activations once (to 8-bit blocks, f16 or bf16) whatever its
// rows, and then every row costs the same. Measured on one 2048-row size only, a layer of
// 576 rows would be predicted too fast; on 128 rows (an earlier version) q8_0 at 8192
// columns read 14-23 GFLOP/s against the 84 a Llama-1B prefill reaches.
var matMulTokens = []int{4, 16, 64, 256}

const matMulRows = 2048

// minTimed is how long one timing runs at least: long enough for the clock and a few
// scheduler ticks to wash out, short enough that a calibration takes seconds.
const minTimed = 0.01

// fastestCall times f: each of repeats (at least 3) timings calls it in doubling batches
// until minTimed of wall time has passed, and the fastest seconds per call is returned.
// (Sizing one fixed loop from a first timing instead would let a single preemption during
// that timing shrink every loop to a few microseconds, each then at the mercy of the
// scheduler.) The fastest, not the median: on a shared machine a neighbour only ever slows a
// timing down — one that holds a core for a moment multiplies a microsecond hand-over — so
// the fastest is the closest to what the engine does on the machine alone, which is what a
// prediction is for. The same holds for the peaks (best).
func fastestCall(clock string, threads, repeats int, f func()) float64 {
	return fastestOf(clock, threads, max(repeats, 3), minTimed, f)
}

// shortCall is fastestCall for a call of microseconds whose cost is mostly the workers'
// hand-over: twelve timings of 2 ms. A neighbour that holds the other core turns a 0.4 µs
// hand-over into hundreds; more, shorter timings give more chances to catch a moment
// without one.
func shortCall(clock string, threads int, f func()) float64 {
	return fastestOf(clock, threads, 12, minTimed/5, f)
}

func fastestOf(clock string, threads, repeats int, minT float64, f func()) float64 {
	f() // warm: page in, grow scratch buffers
	fastest := math.Inf(1)
	for range repeats {
		calls := 0
		el := timed(clock, threads, func() {
			start := time.Now()
			for batch := 1; ; batch *= 2 {
				for range batch {
					f()
				}
				calls += batch
				if time.Since(start).Seconds() >= minT {
					return
				}
			}
		})
		fastest = min(fastest, el/float64(calls))
	}
	return fastest
}

// callUs is the fixed cost of one product call in microseconds: a matrix×vector product of
// 4 rows per thread (a few kB of weights, in cache), activation conversion and hand-over
// included.
func callUs(pool *kernels.Pool, s *kernels.Scratch, dt tensor.DType, data []byte, clock string, threads int) (float64, error) {
	const cols = 1024
	rows := 4 * pool.Threads()
	rb, err := dt.BytesFor(cols)
	if err != nil {
		return 0, err
	}
	m, err := kernels.NewMat(dt, rows, cols, data[:rows*rb])
	if err != nil {
		return 0, err
	}
	x, out := randomVec(cols, 21), make([]float32, rows)
	return 1e6 * shortCall(clock, threads, func() { kernels.MatVec(pool, out, &m, x, s) }), nil
}

// matVecGrid measures the decode product at each width of matVecCols over each weight set,
// made of matVecMatrixMiB matrices cut from data (whose rows were built from random rows, so
// any cut is valid weights: every dtype's element or block boundaries fall on row widths that
// are multiples of 32). The per-call cost is taken out, since engine.go adds it per call.
func matVecGrid(pool *kernels.Pool, s *kernels.Scratch, dt tensor.DType, data []byte, readMiB, llcMiB int, call float64, clock string, threads, repeats int) ([]MatVecRate, error) {
	var sets []int
	for _, m := range matVecSetsMiB {
		if m < readMiB && (llcMiB <= 0 || 2*m < llcMiB) {
			sets = append(sets, m)
		}
	}
	sets = append(sets, readMiB)
	var out []MatVecRate
	for _, cols := range matVecCols {
		rb, err := dt.BytesFor(cols)
		if err != nil {
			return nil, err
		}
		rows := max(4, (matVecMatrixMiB<<20)/rb/4*4)
		mb := rows * rb
		x, y := randomVec(cols, int64(cols)), make([]float32, rows)
		for _, set := range sets {
			n := max(1, min(set<<20, len(data))/mb)
			mats := make([]kernels.Mat, n)
			for i := range mats {
				if mats[i], err = kernels.NewMat(dt, rows, cols, data[i*mb:(i+1)*mb]); err != nil {
					return nil, err
				}
			}
			sec := fastestCall(clock, threads, repeats, func() {
				for i := range mats {
					kernels.MatVec(pool, y, &mats[i], x, s)
				}
			})
			stream := max(sec-float64(n)*call*1e-6, sec/2) // the call costs; never more than half
			out = append(out, MatVecRate{Cols: cols, SetMiB: set, GBs: float64(n*mb) / stream / 1e9})
		}
	}
	return out, nil
}

// matMulGrid measures the prefill product at each width of matVecCols and each token count
// of matMulTokens, on matrices of matMulRows rows cut from data.
func matMulGrid(pool *kernels.Pool, s *kernels.Scratch, dt tensor.DType, data []byte, clock string, threads, repeats int) ([]MatMulRate, error) {
	maxT := matMulTokens[len(matMulTokens)-1]
	var out []MatMulRate
	for _, cols := range matVecCols {
		rb, err := dt.BytesFor(cols)
		if err != nil {
			return nil, err
		}
		rows := max(8, min(matMulRows, len(data)/rb)/8*8)
		// As in a prefill, whose pass reads each layer's weights once from memory, each call
		// takes the next of the matrices that fill data (--read-mib, beyond the last-level
		// cache), so its weights have been evicted since their last turn and the rate
		// includes fetching them (for f16 and bf16, widening them to float32 block by block
		// before the tiles reuse them). An earlier version cycled through 32 MiB, which this
		// machine's 260 MiB L3 holds: a 32-token SmolLM2-135M prefill, whose products
		// widen each weight for only 32 tokens, was predicted 1.25-1.6 times too fast.
		bigs := make([]kernels.Mat, max(1, len(data)/(rows*rb)))
		for i := range bigs {
			if bigs[i], err = kernels.NewMat(dt, rows, cols, data[i*rows*rb:(i+1)*rows*rb]); err != nil {
				return nil, err
			}
		}
		// The fixed cost is timed directly on a matrix of one 4-row group per thread (the
		// conversion, the hand-over and next to no rows), not extrapolated from two big
		// timings whose difference a neighbour can swamp.
		few := 4 * pool.Threads()
		small, err := kernels.NewMat(dt, few, cols, data[:few*rb])
		if err != nil {
			return nil, err
		}
		x, y := randomVec(maxT*cols, int64(cols)+1), make([]float32, maxT*rows)
		for _, t := range matMulTokens {
			next := 0
			sb := fastestCall(clock, threads, repeats, func() {
				kernels.MatMul(pool, y, &bigs[next], x, t, s)
				next = (next + 1) % len(bigs)
			})
			ss := shortCall(clock, threads, func() { kernels.MatMul(pool, y, &small, x, t, s) })
			// Time = call + rows × per-row; noise can make the difference of the two
			// timings meaningless, then the whole time counts per row.
			perRow := (sb - ss) / float64(rows-few)
			call := ss - perRow*float64(few)
			if perRow <= 0 || call < 0 {
				perRow, call = sb/float64(rows), 0
			}
			out = append(out, MatMulRate{Cols: cols, Tokens: t, GFLOPS: 2 * float64(t) * float64(cols) / perRow / 1e9, CallUs: call * 1e6})
		}
	}
	return out, nil
}

// engineCosts measures the non-product work of a forward pass with the pool's threads. The
// vector operations run on the calling goroutine alone, as in the model, so they are timed
// as one thread's work whatever the clock.
func engineCosts(pool *kernels.Pool, clock string, threads, repeats int) (*EngineCosts, error) {
	e := &EngineCosts{}
	nop := func(int, int, int) {}
	e.RunUs = 1e6 * shortCall(clock, threads, func() { pool.Run(pool.Threads(), 1, nop) })

	// Each timed call of a scalar operation starts with a short vector dot product, as every
	// vector operation in the model follows a product. Measured here: after a timing loop had
	// run for a while, Go's scalar float code (SSE) ran ~80× slower (RoPE: 160 instead of 2
	// ns per element), and fast again right after any routine ending in VZEROUPPER, such as
	// the kernels' assembly. Likely cause: the upper halves of the AVX-512 registers left in
	// use after a signal (the Go runtime preempts a loop that runs for 10 ms).
	z := randomVec(64, 30)
	clean := func() { kernels.Dot(z, z) }
	const d = 1024
	x, w, y := randomVec(d, 31), randomVec(d, 32), make([]float32, d)
	e.NormNs = 1e9 / d * fastestCall(clock, 1, repeats, func() { clean(); kernels.RMSNormGGML(y, x, w, 1e-6) })
	e.AddNs = 1e9 / d * fastestCall(clock, 1, repeats, func() { clean(); kernels.Add(y, x) })
	// SiLUMul overwrites gate; a fresh copy each time keeps the values (and their timing)
	// those of an activation rather than decaying towards subnormals. The copy is counted.
	const di = 3072
	g0, g, u := randomVec(di, 33), make([]float32, di), randomVec(di, 34)
	e.SiLUNs = 1e9 / di * fastestCall(clock, 1, repeats, func() { clean(); copy(g, g0); kernels.SiLUMul(g, u) })
	const heads, hd = 16, 128
	q0, qv := randomVec(heads*hd, 35), make([]float32, heads*hd)
	cos, sin := make([]float32, hd/2), make([]float32, hd/2)
	rope := kernels.NewRope(hd, 1e6, 1, nil)
	pos := 0
	e.AnglesNs = 1e9 / (hd / 2) * fastestCall(clock, 1, repeats, func() { clean(); rope.Angles(cos, sin, pos); pos = (pos + 1) % 256 })
	rope.Angles(cos, sin, 17)
	// Rotations compound: after millions of them some pairs (|cos|²+|sin|² a rounding
	// below 1) have decayed to subnormals and slowed 100-fold. So each call rotates a fresh
	// copy, as the model rotates fresh projections; the copy is counted.
	e.RopeNs = 1e9 / (heads * hd) * fastestCall(clock, 1, repeats, func() {
		clean()
		copy(qv, q0)
		for h := range heads {
			kernels.RopeHalf(qv[h*hd:(h+1)*hd], cos, sin)
		}
	})
	for _, hd := range []int{64, 128} {
		a, err := attnCost(pool, hd, false, e.RunUs, clock, threads, repeats)
		if err != nil {
			return nil, err
		}
		e.AttnF32 = append(e.AttnF32, a)
		if a, err = attnCost(pool, hd, true, e.RunUs, clock, threads, repeats); err != nil {
			return nil, err
		}
		e.AttnF16 = append(e.AttnF16, a)
		tr, err := attnTiledCost(pool, hd, e.RunUs, clock, threads, repeats)
		if err != nil {
			return nil, err
		}
		e.AttnTiled = append(e.AttnTiled, tr)
	}
	return e, nil
}

// attnTiledCost times one layer's tiled attention (kernels.FlashTiled, f16 cache) for 16
// query heads over 8 KV heads at head dimension hd, as model/layers.go runs it for a query
// tile of 64 tokens (one pool hand-over, the heads split among the workers): at positions
// 0–63 (one cache tile, the diagonal one) and 448–511 (eight). The difference gives the
// cost per cache tile, the rest the cost per query tile.
func attnTiledCost(pool *kernels.Pool, hd int, runUs float64, clock string, threads, repeats int) (TileRate, error) {
	const heads, kvHeads, T = 16, 8, kernels.AttnTile
	const far = 7 * T
	kvDim := kvHeads * hd
	group := heads / kvHeads
	q := randomVec(T*heads*hd, 44)
	out := make([]float32, T*heads*hd)
	kc, vc := randomVec((far+T)*kvDim, 45), randomVec((far+T)*kvDim, 46)
	kc16, vc16 := make([]uint16, len(kc)), make([]uint16, len(vc))
	kernels.F16Encode(kc16, kc)
	kernels.F16Encode(vc16, vc)
	rows := make([]int32, far+T)
	for p := range rows {
		rows[p] = int32(p)
	}
	tiles := make([]kernels.FlashTiled, pool.Threads())
	scale := float32(1 / math.Sqrt(float64(hd)))
	layer := func(pos0 int) func() {
		return func() {
			pool.Run(heads, 1, func(worker, lo, hi int) {
				for h := lo; h < hi; h++ {
					qs := kernels.TileQueries{Q: q[h*hd:], QStride: heads * hd, Out: out[h*hd:], OutStride: heads * hd, N: T, Pos0: pos0}
					c := kernels.TileCache{K: kc16, V: vc16, Rows: rows, Off: (h / group) * hd, Stride: kvDim}
					tiles[worker].AttendTiled(&qs, &c, hd, scale)
				}
			})
		}
	}
	t1 := fastestCall(clock, threads, repeats, layer(0))
	t8 := fastestCall(clock, threads, repeats, layer(far))
	perTile := (t8 - t1) / float64(heads*7)
	if perTile <= 0 {
		perTile = t8 / float64(heads*8) // noise in the short timing: all of it per tile
	}
	perQTile := max(0, (t1-runUs*1e-6)/heads-perTile)
	if math.IsInf(perTile, 0) || math.IsNaN(perTile) {
		return TileRate{}, fmt.Errorf("tiled attention at head dimension %d: %g s per query tile over 8 cache tiles", hd, t8)
	}
	return TileRate{HeadDim: hd, TileNs: perTile * 1e9, HeadNs: perQTile * 1e9}, nil
}

// attnCost times one layer's attention for 16 query heads over 8 KV heads at head dimension
// hd, as model/layers.go runs it for one token (one pool hand-over, the heads split among the
// workers), at two context lengths; the difference gives the cost per head and position, the
// rest the cost per head. With f16 the cache is f16 and each head runs llama.cpp's flash
// attention (kernels.FlashF16.Attend, the fused kernels the model calls); else an f32 cache (kernels.AttendF32,
// the model's f32 attention).
func attnCost(pool *kernels.Pool, hd int, f16 bool, runUs float64, clock string, threads, repeats int) (AttnRate, error) {
	const heads, kvHeads, short, long = 16, 8, 32, 512
	kvDim := kvHeads * hd
	group := heads / kvHeads
	q := randomVec(heads*hd, 41)
	out := make([]float32, heads*hd)
	kc, vc := randomVec(long*kvDim, 42), randomVec(long*kvDim, 43)
	kc16, vc16 := make([]uint16, len(kc)), make([]uint16, len(vc))
	kernels.F16Encode(kc16, kc)
	kernels.F16Encode(vc16, vc)
	nw := pool.Threads()
	scores := make([][]float32, nw)
	q16 := make([][]float32, nw)
	flash := make([]kernels.FlashF16, nw)
	for w := range nw {
		scores[w], q16[w] = make([]float32, long), make([]float32, hd)
	}
	rows := make([]int32, long) // a sequence's cache: position p in row p
	for p := range rows {
		rows[p] = int32(p)
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	layer := func(positions int) func() {
		return func() {
			pool.Run(heads, 1, func(worker, lo, hi int) {
				for i := lo; i < hi; i++ {
					g := i / group
					qh, o := q[i*hd:(i+1)*hd], out[i*hd:(i+1)*hd]
					if f16 {
						qr := q16[worker]
						copy(qr, qh)
						kernels.RoundF16(qr)
						flash[worker].Attend(o, qr, kc16, vc16, rows[:positions], g*hd, kvDim, scale)
						continue
					}
					kernels.AttendF32(o, qh, kc, vc, rows[:positions], g*hd, kvDim, scale, scores[worker])
				}
			})
		}
	}
	ts := fastestCall(clock, threads, repeats, layer(short))
	tl := fastestCall(clock, threads, repeats, layer(long))
	perPos := (tl - ts) / float64(heads*(long-short))
	if perPos <= 0 {
		// Noise (a busy neighbour during the short timing): charge it all per position.
		perPos = tl / float64(heads*long)
	}
	perHead := max(0, (ts-runUs*1e-6)/heads-perPos*short)
	if perPos <= 0 || math.IsInf(perPos, 0) || math.IsNaN(perPos) {
		return AttnRate{}, fmt.Errorf("attention at head dimension %d: %g s per pass over %d positions", hd, tl, long)
	}
	return AttnRate{HeadDim: hd, Ns: perPos * 1e9, HeadNs: perHead * 1e9}, nil
}

// fastest is e with each cost replaced by o's where that is smaller (two calibrations of
// the same machine: the slower number saw a neighbour).
func (e *EngineCosts) fastest(o *EngineCosts) *EngineCosts {
	r := *e
	r.RunUs, r.NormNs, r.AddNs = min(e.RunUs, o.RunUs), min(e.NormNs, o.NormNs), min(e.AddNs, o.AddNs)
	r.SiLUNs, r.RopeNs, r.AnglesNs = min(e.SiLUNs, o.SiLUNs), min(e.RopeNs, o.RopeNs), min(e.AnglesNs, o.AnglesNs)
	r.AttnF32, r.AttnF16 = fasterAttn(e.AttnF32, o.AttnF32), fasterAttn(e.AttnF16, o.AttnF16)
	r.AttnTiled = slices.Clone(e.AttnTiled)
	for i := range r.AttnTiled {
		for _, t := range o.AttnTiled {
			if a := r.AttnTiled[i]; t.HeadDim == a.HeadDim && t.HeadNs+8*t.TileNs < a.HeadNs+8*a.TileNs {
				r.AttnTiled[i] = t
			}
		}
	}
	return &r
}

// fasterAttn keeps, per head dimension, the measurement whose cost at 64 positions is lower
// (its two numbers come from one pair of timings and are kept together).
func fasterAttn(a, b []AttnRate) []AttnRate {
	out := slices.Clone(a)
	for i := range out {
		for _, o := range b {
			if o.HeadDim == out[i].HeadDim && o.HeadNs+64*o.Ns < out[i].HeadNs+64*out[i].Ns {
				out[i] = o
			}
		}
	}
	return out
}

// randomVec is n N(0, 1) values from a fixed seed.
func randomVec(n int, seed int64) []float32 {
	rng := rand.New(rand.NewPCG(uint64(seed), 99))
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}
