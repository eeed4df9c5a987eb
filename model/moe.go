package model

import (
	"slices"

	"github.com/tokenwise/tokenwise/kernels"
)

// The mixture-of-experts MLP of Qwen3-MoE (qwen3moe.go) and Mixtral (mixtral.go): a router
// scores the experts for each token, the token goes through the ExpertsPerTok best SwiGLU
// experts, and their outputs are summed with the router's weights.
//
// Routing, as transformers and llama.cpp (build_moe_ffn) compute it: the softmax of the
// router's logits over all experts; the k largest probabilities (in descending order, the
// order llama.cpp sums them in); and, with Config.NormTopKProb, those k divided by their sum.
// Qwen3-MoE renormalizes when its config says norm_topk_prob; Mixtral always does, which is
// the softmax over the k picked logits — the same numbers, written the other way round.
//
// The experts run as grouped products: the tokens of a pass are grouped by expert, and each
// expert that any token picked multiplies all of its tokens in one product (MatMulMany for
// gate and up, MatMul for down), so its weights are read once per pass however many tokens
// chose it. In prefill and in a batched decode step that is what makes an MoE layer cost the
// distinct experts the tokens touch, not tokens × k. Every product is row-wise batch
// invariant (kernels.BatchInvariant), and a token's k outputs are summed in its own slot
// order, so a token's result does not depend on what else the pass routed to its experts.

// moe is one layer's mixture of experts.
type moe struct {
	router         linear        // [experts, hidden]
	gate, up, down []kernels.Mat // per expert: [expert size, hidden], [expert size, hidden], [hidden, expert size]
	k              int           // experts per token
	norm           bool          // renormalize the k weights to sum 1
}

// moeScratch is a pass's routing and grouping state, kept between passes.
type moeScratch struct {
	logits []float32 // n × experts router logits, then probabilities
	sel    []int32   // n × k chosen experts, per token in descending weight
	w      []float32 // n × k their weights
	count  []int     // per expert, slots routed to it
	start  []int     // per expert, its first entry in order
	order  []int32   // slots (t·k + s) grouped by expert, tokens ascending
	g, u   []float32 // a decode step's gate and up activations, k × expert size
	y      []float32 // n × k × hidden: each slot's weighted expert output
	active []expertSlots
	bufs   []expertBufs // per worker
}

// ObserveRouting has f called in every later pass, after each mixture-of-experts layer has
// routed the pass's tokens, with the layer and the experts each token picked (tokens × k, in
// the pass's token order, each token's in descending weight; valid during the call): the
// router's statistics, which the cost model's count of the distinct experts a batch reads is
// checked against. nil stops it. A dense model never calls f.
func (m *Model) ObserveRouting(f func(layer int, experts []int32)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.routing = f
}

// route fills s.sel and s.w from the router logits of n tokens.
func (m *moe) route(s *moeScratch, n, experts int) {
	k := m.k
	for t := range n {
		p := s.logits[t*experts : (t+1)*experts]
		kernels.Softmax(p)
		sel, w := s.sel[t*k:(t+1)*k], s.w[t*k:(t+1)*k]
		// Top-k by insertion: k is small (2 or 8), experts at most a few hundred. Ties go
		// to the lower expert index.
		for j := range k {
			sel[j], w[j] = -1, -1
		}
		for e, v := range p {
			if !(v > w[k-1]) { // NaN (from non-finite activations) is never picked
				continue
			}
			j := k - 1
			for j > 0 && v > w[j-1] {
				sel[j], w[j] = sel[j-1], w[j-1]
				j--
			}
			sel[j], w[j] = int32(e), v
		}
		// Non-finite logits leave slots unfilled: give them the lowest unpicked experts with
		// weight 0, so the pass runs (its logits are NaN anyway) instead of indexing -1.
		for j := range k {
			if sel[j] >= 0 {
				continue
			}
			for e := int32(0); ; e++ {
				if !slices.Contains(sel, e) {
					sel[j], w[j] = e, 0
					break
				}
			}
		}
		if m.norm {
			var sum float32
			for _, v := range w {
				sum += v
			}
			// llama.cpp clamps the sum to f16's smallest normal before dividing.
			sum = max(sum, 6.103515625e-5)
			for j := range w {
				w[j] /= sum
			}
		}
	}
}

// forward runs the experts for the pass's normed tokens in into r.mlpOut.
func (m *moe) forward(r *run, layer int, in []float32) []float32 {
	c := r.m.cfg
	n, k, d, e := r.n, m.k, c.HiddenSize, c.NumExperts
	s := &r.moe
	s.logits = grow(s.logits, n*e)
	r.linear(m.router, in, s.logits)
	if cap(s.sel) < n*k {
		s.sel, s.order = make([]int32, n*k), make([]int32, n*k)
	}
	s.sel, s.order = s.sel[:n*k], s.order[:n*k]
	s.w = grow(s.w, n*k)
	m.route(s, n, e)
	if f := r.m.routing; f != nil {
		f(layer, s.sel)
	}
	s.y = grow(s.y, n*k*d)
	out := r.mlpOut[:n*d]
	if n == 1 {
		m.decode(r, in, out)
		return out
	}

	// Group the slots by expert (a counting sort: tokens stay ascending within an expert).
	if len(s.count) != e {
		s.count, s.start = make([]int, e), make([]int, e)
	}
	clear(s.count)
	for _, x := range s.sel {
		s.count[x]++
	}
	at := 0
	for x := range e {
		s.start[x] = at
		at += s.count[x]
	}
	for i, x := range s.sel {
		s.order[s.start[x]] = int32(i)
		s.start[x]++
	}
	// The experts the pass touches and their slots. With few tokens per expert (a batched
	// decode step: B tokens × k spread over up to E experts) each expert's products are too
	// small to split across the workers, and a hand-over per product would dominate; then
	// the workers take whole experts instead, each running its experts' products on its own.
	s.active = s.active[:0]
	from := 0
	for x := range e {
		if cnt := s.count[x]; cnt > 0 {
			s.active = append(s.active, expertSlots{x: x, slots: s.order[from : from+cnt]})
			from += cnt
		}
	}
	if n*k <= soloSlots*len(s.active) && len(r.m.solo) > 1 {
		s.workers(len(r.m.solo))
		r.m.pool.Run(len(s.active), 1, func(w, lo, hi int) {
			for _, a := range s.active[lo:hi] {
				m.expert(r.m.solo[w], r.m.soloScratch[w], &s.bufs[w], a, in, s, d, k, c.ExpertSize)
			}
		})
	} else {
		s.workers(1)
		for _, a := range s.active {
			m.expert(r.m.pool, r.m.scratch, &s.bufs[0], a, in, s, d, k, c.ExpertSize)
		}
	}
	m.sum(s, n, d, out)
	return out
}

// soloSlots: the pass takes experts per worker (rather than splitting each expert's products
// across the workers) when its experts average at most this many tokens. A batched decode
// step of 8 sequences over 64 experts, 8 per token (1.5 tokens per touched expert),
// BenchmarkMoEBatchedDecode on this machine's two shared cores: 23.7-35.8 ms solo, 26.1-56.8
// split. The threshold is not tuned beyond that; a prefill's experts (8+ tokens each) split.
var soloSlots = 4

// expertSlots is one touched expert and its slots (t·k + s).
type expertSlots struct {
	x     int
	slots []int32
}

// expertBufs is one worker's gathered inputs and activations.
type expertBufs struct{ x, g, u []float32 }

// workers sizes the per-worker buffers.
func (s *moeScratch) workers(n int) {
	if len(s.bufs) < n {
		s.bufs = append(s.bufs, make([]expertBufs, n-len(s.bufs))...)
	}
}

// expert runs expert a over its tokens on pool p: gather, gate and up in one product, SwiGLU,
// down, each slot's output scaled by its weight into s.y.
func (m *moe) expert(p *kernels.Pool, sc *kernels.Scratch, b *expertBufs, a expertSlots, in []float32, s *moeScratch, d, k, es int) {
	cnt := len(a.slots)
	b.x = grow(b.x, cnt*d)
	for j, sl := range a.slots {
		t := int(sl) / k
		copy(b.x[j*d:(j+1)*d], in[t*d:(t+1)*d])
	}
	b.g, b.u = grow(b.g, cnt*es), grow(b.u, cnt*es)
	kernels.MatMulMany(p, []kernels.Product{{W: &m.gate[a.x], Out: b.g}, {W: &m.up[a.x], Out: b.u}}, b.x, cnt, sc)
	kernels.SiLUMul(b.g, b.u)
	ys := b.x // the inputs are spent: the outputs go where they were
	if cnt == 1 {
		kernels.MatVec(p, ys, &m.down[a.x], b.g, sc)
	} else {
		kernels.MatMul(p, ys, &m.down[a.x], b.g, cnt, sc)
	}
	for j, sl := range a.slots {
		scaled(s.y[int(sl)*d:(int(sl)+1)*d], ys[j*d:(j+1)*d], s.w[sl])
	}
}

// decode is forward for a pass of one token: its k experts all read the same input, so their
// gate and up products are one MatMulMany (one hand-over to the workers for 2k matrices).
func (m *moe) decode(r *run, in, out []float32) {
	s := &r.moe
	k, d, es := m.k, r.m.cfg.HiddenSize, r.m.cfg.ExpertSize
	s.g, s.u = grow(s.g, k*es), grow(s.u, k*es)
	ps := make([]kernels.Product, 0, 2*k)
	for j, x := range s.sel {
		ps = append(ps, kernels.Product{W: &m.gate[x], Out: s.g[j*es : (j+1)*es]}, kernels.Product{W: &m.up[x], Out: s.u[j*es : (j+1)*es]})
	}
	kernels.MatMulMany(r.m.pool, ps, in, 1, r.m.scratch)
	kernels.SiLUMul(s.g, s.u)
	// The k down products read different inputs, so they cannot be one MatMulMany; the
	// workers take whole experts instead (one hand-over, not k), each product on one thread.
	down := func(p *kernels.Pool, sc *kernels.Scratch, j int) {
		y := s.y[j*d : (j+1)*d]
		kernels.MatVec(p, y, &m.down[s.sel[j]], s.g[j*es:(j+1)*es], sc)
		scaled(y, y, s.w[j])
	}
	if len(r.m.solo) > 1 {
		r.m.pool.Run(k, 1, func(w, lo, hi int) {
			for j := lo; j < hi; j++ {
				down(r.m.solo[w], r.m.soloScratch[w], j)
			}
		})
	} else {
		for j := range k {
			down(r.m.pool, r.m.scratch, j)
		}
	}
	m.sum(s, 1, d, out)
}

// sum writes each token's k weighted expert outputs, added in slot order (llama.cpp's:
// slot 0 + slot 1 + …), into out.
func (m *moe) sum(s *moeScratch, n, d int, out []float32) {
	k := m.k
	for t := range n {
		o := out[t*d : (t+1)*d]
		copy(o, s.y[t*k*d:(t*k+1)*d])
		for j := 1; j < k; j++ {
			kernels.Add(o, s.y[(t*k+j)*d:(t*k+j+1)*d])
		}
	}
}

// scaled writes dst = w·x.
func scaled(dst, x []float32, w float32) {
	for i, v := range x {
		dst[i] = v * w
	}
}

// linears lists the router and every expert's projections (the parameters).
func (m *moe) linears() []linear {
	out := []linear{m.router}
	for j := range m.gate {
		out = append(out, linear{w: m.gate[j]}, linear{w: m.up[j]}, linear{w: m.down[j]})
	}
	return out
}

// active lists what one token reads: the router and k experts (all experts have one size).
func (m *moe) active() []linear {
	return m.linears()[:1+3*m.k]
}

// moeBlock is Llama's decoder block with a mixture of experts for its MLP.
type moeBlock struct {
	attnNorm norm
	attn     attention
	mlpNorm  norm
	moe      moe
}

// forward: x += attention(norm(x)); x += experts(norm(x)).
func (l *moeBlock) forward(r *run, i int) {
	h := r.norm(l.attnNorm, r.x)
	kernels.Add(r.x, l.attn.forward(r, i, h))
	h = r.norm(l.mlpNorm, r.x)
	kernels.Add(r.x, l.moe.forward(r, i, h))
}

func (l *moeBlock) linears() []linear { return append(l.attn.linears(), l.moe.linears()...) }

func (l *moeBlock) active() []linear { return append(l.attn.linears(), l.moe.active()...) }
