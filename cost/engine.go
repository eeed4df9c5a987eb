package cost

import (
	"github.com/tokenwise/tokenwise/kernels"
	"math"
	"slices"
)

// The engine model: how long tokenwise's forward pass takes on a calibrated CPU, call by
// call. The plain roofline (Rates.Time) divides a pass's bytes by one streaming rate and its
// FLOPs by one FLOP rate. On a CPU that misses three things that the measurements showed to
// decide small models' decode speed:
//
//  1. A product's rate depends on its shape: the row kernel pays a fixed cost per row (a
//     horizontal sum, the store, loop set-up), which narrow rows (SmolLM2's 576 weights)
//     amortize worse, and on the bytes cycled through per step — a model that (nearly) fits
//     the last-level cache streams faster than one that does not.
//  2. Every product call has a fixed cost: converting the activations, handing the rows to
//     the workers and waiting for the slowest. A decode step makes 4 calls per layer.
//  3. Between the products the calling goroutine alone runs the vector operations (RMSNorm,
//     RoPE, residual adds, SwiGLU) and attention, which grows with the context.
//
// So with a profile whose calibration measured them (EngineCosts, KernelRates.MatVec), a
// pass is timed as the engine (model/layers.go) runs it:
//
//	pass = Σ_layers [ Σ_products (max(FLOPs/FLOP rate(tokens, cols), bytes/BW(cols, set)) + call)
//	                  + tokens·(vector elements × their per-element costs)
//	                  + hand-over + Σ_heads·positions attention cost ]
//	       + the LM head product + per-token embedding row, rotary angles and final norm
//
// Each term is a measured rate times a count from the model's shape: no term is fitted to
// the model benchmarks.

// EngineCosts are the measured costs of a forward pass besides its matrix products, at one
// thread count.
type EngineCosts struct {
	// RunUs is one hand-over of work to the pool's workers and back with no work in it:
	// attention pays it once per layer per pass (the products' hand-over is in CallUs).
	RunUs float64 `json:"run_us"`
	// Per-element costs in nanoseconds of the vector operations the calling goroutine runs
	// alone between the products: RMSNorm, a residual add (also bias adds, the KV cache
	// append and the embedding row), SwiGLU's silu(gate)·up, a rotary rotation (per element
	// of a rotated head), and the rotary angles (per cos/sin pair, once per token).
	NormNs   float64 `json:"norm_ns"`
	AddNs    float64 `json:"add_ns"`
	SiLUNs   float64 `json:"silu_ns"`
	RopeNs   float64 `json:"rope_ns"`
	AnglesNs float64 `json:"angles_ns"`
	// AttnF32 and AttnF16 are attention's cost per query head per attended position, with
	// all threads working through the pool as the model splits it (heads of the pass's
	// tokens), by head dimension: for an f32 cache a dot product, the softmax and the
	// weighted sum of values; for an f16 cache llama.cpp's flash-attention online softmax.
	AttnF32 []AttnRate `json:"attn_f32"`
	AttnF16 []AttnRate `json:"attn_f16,omitempty"`
	// AttnTiled is attention's cost with an f16 cache for a sequence that adds
	// kernels.AttnTile or more tokens in one pass, which the model (as llama.cpp) runs in
	// 64×64 tiles (kernels.FlashTiled), by head dimension. Older profiles lack it; their
	// passes are costed with AttnF16.
	AttnTiled []TileRate `json:"attn_tiled,omitempty"`
}

// TileRate is the tiled attention's cost at one head dimension: TileNs per query head for
// each cache tile a query tile works through (a product of 64×64 scores and one of
// weights×values, the softmax between), HeadNs per query head and query tile (the queries
// transposed, the causal mask of the diagonal tile, the output).
type TileRate struct {
	HeadDim int     `json:"head_dim"`
	TileNs  float64 `json:"ns_per_head_tile"`
	HeadNs  float64 `json:"ns_per_head_query_tile"`
}

// AttnRate is attention's cost per query head and attended position at one head dimension.
// Ns is per query head and attended position; HeadNs per query head whatever the context
// (rounding the query, the softmax's set-up, clearing the output).
type AttnRate struct {
	HeadDim int     `json:"head_dim"`
	Ns      float64 `json:"ns_per_head_position"`
	HeadNs  float64 `json:"ns_per_head"`
}

// engine reports whether r carries what enginePass needs.
func (r Rates) engine() bool {
	return r.Engine != nil && len(r.MatVec) > 0 && len(r.Engine.AttnF32) > 0
}

// passCost is one pass's time and its parts, in seconds.
type passCost struct {
	Seconds float64
	// Compute and Memory are the products' FLOP and byte times (each product takes the
	// larger of its two; these sums say which bound dominates), Memory with the KV reads.
	Compute, Memory float64
	// Overhead is what the roofline alone would miss: calls, vector operations, attention.
	Overhead float64
	Head     float64 // the LM head product
}

// pass times a forward pass of batch sequences that each add n tokens after ctx cached ones
// (a prefill: ctx 0 and n the prompt; a decode step: n 1). w must be that pass's Work
// (Prefill or DecodeStep). Profiles without engine costs use the plain roofline on w.
func (s *Shape) pass(r Rates, w Work, n, batch, ctx int, dt, kv Precision) passCost {
	if !r.engine() {
		rb := r.forBatch(n * batch)
		t, c, m := rb.Time(w)
		h, _, _ := rb.Time(Work{FLOPs: w.LMHeadFLOPs, WeightBytes: w.LMHeadBytes})
		return passCost{Seconds: t, Compute: c, Memory: m, Head: h}
	}
	return s.enginePass(r, n, batch, ctx, dt, kv)
}

// enginePass is the call-by-call time of a pass on a calibrated CPU (see the top of this file).
func (s *Shape) enginePass(r Rates, n, batch, ctx int, dt, kv Precision) passCost {
	e := r.Engine
	tok := n * batch
	h, hd := float64(s.Hidden), float64(s.HeadDim)
	q, kvd := s.Heads*s.HeadDim, s.KVHeads*s.HeadDim
	// The weights cycled through per step decide how much of them the caches still hold.
	set := s.matmulWeightBytes(dt, tok) + float64(s.Vocab)*h*dt.Bytes
	var pc passCost
	var calls float64
	// product adds `times` calls of a rows×cols product over t tokens: the larger of its
	// FLOP and byte times (the roofline, per call), plus the call's fixed cost (for several
	// tokens: converting their activations, measured with the FLOP rate). One token
	// runs the matrix×vector kernel, whose measured streaming rate already includes its
	// arithmetic: its time is the byte time (its FLOPs, at the matrix×matrix kernel's best
	// rate, only say how far from compute-bound it is).
	product := func(rows, cols, t int, times float64) float64 {
		bytes := float64(rows) * float64(cols) * dt.Bytes
		flops := 2 * float64(t) * float64(rows) * float64(cols)
		mem := bytes / r.matVecBW(cols, set)
		comp, call := flops/r.FLOPS, r.CallUs*1e-6
		if t > 1 {
			comp, call = flops/r.matMulFLOPS(t, cols), r.matMulCall(t, cols)
		}
		pc.Compute += times * comp
		pc.Memory += times * mem
		calls += times * call
		return times * (max(comp, mem) + call)
	}
	// Every layer makes the same calls: Q, K and V in one fused call, the output
	// projection, then SwiGLU's gate and up fused and down. A MoE layer instead routes
	// (the router's product) to the experts its tokens touch, each over its share of the
	// tokens, plus the shared expert.
	dense := s.Layers
	if s.MoE() {
		dense = min(s.DenseLayers, s.Layers)
	}
	moe := float64(s.Layers - dense)
	attnProj := product(q+2*kvd, s.Hidden, tok, float64(s.Layers)) + product(s.Hidden, q, tok, float64(s.Layers))
	layers := attnProj + product(2*s.Intermediate, s.Hidden, tok, float64(dense)) + product(s.Hidden, s.Intermediate, tok, float64(dense))
	inter := float64(dense) * float64(s.Intermediate) // SwiGLU widths per token, all layers
	if moe > 0 {
		te := s.touchedExperts(tok)
		per := max(1, int(math.Round(float64(tok*s.ExpertsPerTok)/te)))
		layers += product(s.Experts, s.Hidden, tok, moe)
		layers += product(2*s.MoEIntermediate, s.Hidden, per, moe*te) + product(s.Hidden, s.MoEIntermediate, per, moe*te)
		inter += moe * float64(s.ExpertsPerTok*s.MoEIntermediate)
		if s.SharedExpertSize > 0 {
			layers += product(2*s.SharedExpertSize, s.Hidden, tok, moe) + product(s.Hidden, s.SharedExpertSize, tok, moe)
			inter += moe * float64(s.SharedExpertSize)
		}
	}
	// Vector operations per token, on the calling goroutine: two RMSNorms and two residual
	// adds per layer, the rotation of every query and key head (after its own RMSNorm in
	// Qwen3), the cache append of k and v, biases, and silu(gate)·up.
	rot := float64(s.Heads+s.KVHeads) * hd
	perLayerTok := 2*h*e.NormNs + 2*h*e.AddNs + rot*e.RopeNs + 2*float64(kvd)*e.AddNs
	if s.QKNorm {
		perLayerTok += rot * e.NormNs
	}
	if s.AttentionBias {
		perLayerTok += float64(q+2*kvd) * e.AddNs
	}
	vec := float64(tok) * (float64(s.Layers)*perLayerTok + inter*e.SiLUNs)
	// Per pass: each token's embedding row and rotary angles; the final norm of each
	// sequence's last token.
	vec += float64(tok)*(h*e.AddNs+hd/2*e.AnglesNs) + float64(batch)*h*e.NormNs
	vec *= 1e-9

	// Attention, one pool hand-over per layer: token j of a sequence (position ctx+j)
	// attends ctx+j+1 positions with every query head, and each query head has a fixed
	// cost. The pool splits the tokens × heads in contiguous equal counts, so when there are
	// fewer of them than a multiple of the threads the busiest worker sets the time.
	positions := float64(n)*float64(ctx) + float64(n)*float64(n+1)/2
	items := tok * s.Heads
	threads := max(1, r.Threads)
	balance := float64((items+threads-1)/threads*threads) / float64(items)
	perPos, perHead := e.attn(s.HeadDim, kv)
	attn := balance * 1e-9 * (float64(items)*perHead + float64(batch)*positions*float64(s.Heads)*perPos)
	if kv.Name == "f16" && n >= kernels.AttnTile && kernels.TiledAttnOK(s.HeadDim) && len(e.AttnTiled) > 0 {
		// Tiles instead: query tile t (tokens 64t..) works through the cache tiles up to
		// its last position's, for every query head.
		var qTiles, pairs int
		for t0 := 0; t0 < n; t0 += kernels.AttnTile {
			last := ctx + min(t0+kernels.AttnTile, n) - 1
			qTiles++
			pairs += last/kernels.AttnTile + 1
		}
		units := batch * qTiles * s.Heads
		bal := float64((units+threads-1)/threads*threads) / float64(units)
		perTile, perQTile := e.tiled(s.HeadDim)
		attn = bal * 1e-9 * float64(batch*s.Heads) * (float64(pairs)*perTile + float64(qTiles)*perQTile)
	}
	// The cache must also come from memory, overlapped with that work: at long contexts it
	// is the limit. The hand-over is paid either way.
	kvRead := float64(batch) * float64(ctx+n) * 2 * float64(kvd) * kv.Bytes / r.OtherBW
	attn = e.RunUs*1e-6 + max(attn, kvRead)
	pc.Memory += float64(s.Layers) * kvRead

	// The LM head: the last token of each sequence.
	pc.Head = product(s.Vocab, s.Hidden, batch, 1)
	pc.Seconds = layers + float64(s.Layers)*attn + vec + pc.Head
	pc.Overhead = calls + vec + float64(s.Layers)*attn
	return pc
}

// tiled is the tiled attention's cost per query head and cache tile, and per query head and
// query tile, at head dimension hd: the nearest measured dimension's, scaled by hd (the
// products are hd long).
func (e *EngineCosts) tiled(hd int) (perTile, perQTile float64) {
	best := e.AttnTiled[0]
	for _, t := range e.AttnTiled[1:] {
		if abs(t.HeadDim-hd) < abs(best.HeadDim-hd) {
			best = t
		}
	}
	f := float64(hd) / float64(best.HeadDim)
	return best.TileNs * f, best.HeadNs * f
}

func abs(x int) int { return max(x, -x) }

// attn is attention's cost per query head and position, and per query head, at head
// dimension hd: linear in hd between the measured dimensions (a dot product and a weighted
// sum are hd long), proportional to hd beyond them. An f16 cache without its own
// measurement uses the f32 one.
func (e *EngineCosts) attn(hd int, kv Precision) (perPos, perHead float64) {
	pts := e.AttnF32
	if kv.Name == "f16" && len(e.AttnF16) > 0 {
		pts = e.AttnF16
	}
	pts = slices.Clone(pts)
	slices.SortFunc(pts, func(a, b AttnRate) int { return a.HeadDim - b.HeadDim })
	x := float64(hd)
	first, last := pts[0], pts[len(pts)-1]
	switch {
	case x <= float64(first.HeadDim):
		f := x / float64(first.HeadDim)
		return first.Ns * f, first.HeadNs * f
	case x >= float64(last.HeadDim):
		f := x / float64(last.HeadDim)
		return last.Ns * f, last.HeadNs * f
	}
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		if x <= float64(b.HeadDim) {
			f := (x - float64(a.HeadDim)) / float64(b.HeadDim-a.HeadDim)
			return a.Ns + f*(b.Ns-a.Ns), a.HeadNs + f*(b.HeadNs-a.HeadNs)
		}
	}
	return last.Ns, last.HeadNs
}

// matVecBW is the streaming rate (bytes/s) of a product with rows of cols weights when a
// pass cycles through set bytes of weights: interpolated in log(cols), then in log(set),
// flat beyond the measured range.
//
// Where the last-level cache is known, a set of half of it or more is predicted at the
// memory rate (the largest set measured), whatever the table says between: a pass streams
// its weights in the same order every step, so a set near the cache's size evicts itself
// (each line is gone by the time the next step wants it), and the cache is shared with the
// KV cache, the activations, the other cores and, on a cloud host, other tenants. On this
// project's Xeon (260 MiB of L3) the f16 product over 576-wide rows cycling 128-256 MiB ran
// at 15-18 GB/s in one sweep and 24-28 GB/s in the next, minutes apart, against 21-25 GB/s
// over 512 MiB; SmolLM2-135M's 256 MiB of weights ran at the memory rate while a
// calibration that happened to find the cache quiet measured 33-42 GB/s for its size, and
// predicted its decode 1.3-1.6 times too fast.
func (r Rates) matVecBW(cols int, set float64) float64 {
	if len(r.MatVec) == 0 {
		return r.WeightBW
	}
	memSet := 0
	for _, m := range r.MatVec {
		memSet = max(memSet, m.SetMiB)
	}
	half := r.LLCBytes / 2
	pts := make([]gridPoint, 0, len(r.MatVec)+4)
	for _, m := range r.MatVec {
		at := float64(m.SetMiB) * (1 << 20)
		switch {
		case half <= 0 || m.SetMiB == memSet && at <= half:
		case m.SetMiB == memSet:
			at = half // the memory rate from half the cache on
		case at >= half:
			continue // cached sets measured at or beyond the cut
		}
		pts = append(pts, gridPoint{outer: at, inner: float64(m.Cols), v: m.GBs * 1e9})
	}
	return interpGrid(pts, set, float64(cols))
}

// matMulFLOPS is the FLOP rate of a product of t tokens with rows of cols weights:
// interpolated in log(tokens), then in log(cols), flat beyond the measured range. Without
// the shape table it is the rate by tokens alone (forBatch).
func (r Rates) matMulFLOPS(t, cols int) float64 {
	if len(r.MatMul) == 0 {
		return r.forBatch(max(t, 2)).FLOPS
	}
	pts := make([]gridPoint, len(r.MatMul))
	for i, m := range r.MatMul {
		pts[i] = gridPoint{outer: float64(m.Cols), inner: float64(m.Tokens), v: m.GFLOPS * 1e9}
	}
	return interpGrid(pts, float64(cols), float64(t))
}

// matMulCall is the fixed cost in seconds of a product call over t tokens with rows of cols
// weights (the activations' conversion grows with both), interpolated as matMulFLOPS; the
// one-token call cost where the table has none.
func (r Rates) matMulCall(t, cols int) float64 {
	pts := make([]gridPoint, 0, len(r.MatMul))
	for _, m := range r.MatMul {
		pts = append(pts, gridPoint{outer: float64(m.Cols), inner: float64(m.Tokens), v: m.CallUs * 1e-6})
	}
	if len(pts) == 0 {
		return r.CallUs * 1e-6
	}
	return interpGrid(pts, float64(cols), float64(t))
}

// gridPoint is a measurement at (outer, inner).
type gridPoint struct{ outer, inner, v float64 }

// interpGrid interpolates measurements on a grid: within each measured outer value along
// log(inner), then between the two outer values around `outer` along log(outer). Both
// clamp to the nearest measured value outside the grid.
func interpGrid(pts []gridPoint, outer, inner float64) float64 {
	byOuter := map[float64][]gridPoint{}
	var outers []float64
	for _, p := range pts {
		if _, ok := byOuter[p.outer]; !ok {
			outers = append(outers, p.outer)
		}
		byOuter[p.outer] = append(byOuter[p.outer], p)
	}
	slices.Sort(outers)
	at := func(o float64) float64 {
		row := byOuter[o]
		xs, ys := make([]float64, len(row)), make([]float64, len(row))
		slices.SortFunc(row, func(a, b gridPoint) int { return cmpFloat(a.inner, b.inner) })
		for i, p := range row {
			xs[i], ys[i] = p.inner, p.v
		}
		return interpLog(xs, ys, inner)
	}
	ys := make([]float64, len(outers))
	for i, o := range outers {
		ys[i] = at(o)
	}
	return interpLog(outers, ys, outer)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// interpLog is y at x, linear in log(x) between the points (xs ascending), flat beyond them.
func interpLog(xs, ys []float64, x float64) float64 {
	switch {
	case len(xs) == 0:
		return 0
	case x <= xs[0]:
		return ys[0]
	case x >= xs[len(xs)-1]:
		return ys[len(ys)-1]
	}
	for i := 1; i < len(xs); i++ {
		if x <= xs[i] {
			f := math.Log(x/xs[i-1]) / math.Log(xs[i]/xs[i-1])
			return ys[i-1] + f*(ys[i]-ys[i-1])
		}
	}
	return ys[len(ys)-1]
}
