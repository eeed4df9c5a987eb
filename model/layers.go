package model

import (
	"math"

	"github.com/tokenwise/tokenwise/kernels"
)

// The building blocks every architecture is made of. Each works on a whole pass of n
// tokens at once (n = prompt length in prefill, 1 in decode); rows of n×dim buffers are tokens.

// norm is an RMSNorm scale.
type norm struct {
	w   []float32
	eps float64
}

// linear is a projection y = W·x (+ b).
type linear struct {
	w kernels.Mat
	b []float32
}

// attention is causal multi-head attention with grouped KV heads and rotary positions.
type attention struct {
	q, k, v, o   linear
	qNorm, kNorm norm // per-head RMSNorm of q and k before RoPE (Qwen3); empty otherwise
}

// mlp is the SwiGLU feed-forward block: down(silu(gate(x)) · up(x)).
type mlp struct {
	gate, up, down linear
}

// norm applies n to every token row of in, into a scratch buffer it returns.
func (r *run) norm(n norm, in []float32) []float32 {
	d := len(n.w)
	out := r.h[:len(in)]
	for t := range len(in) / d {
		kernels.RMSNorm(out[t*d:(t+1)*d], in[t*d:(t+1)*d], n.w, n.eps)
	}
	return out
}

// linear writes l(in) for all n tokens into out: one matrix×vector product when decoding,
// one matrix×matrix product when prefilling.
func (r *run) linear(l linear, in, out []float32) []float32 {
	out = out[:r.n*l.w.Rows]
	if r.n == 1 {
		kernels.MatVec(r.m.pool, out, &l.w, in, r.m.scratch)
	} else {
		kernels.MatMul(r.m.pool, out, &l.w, in, r.n, r.m.scratch)
	}
	if l.b != nil {
		for t := range r.n {
			kernels.Add(out[t*l.w.Rows:(t+1)*l.w.Rows], l.b)
		}
	}
	return out
}

// forward runs attention for the pass's tokens: project, position, append k and v to this
// sequence's cache, attend over the cache, project back.
func (a *attention) forward(r *run, layer int, in []float32) []float32 {
	c := r.m.cfg
	hd := c.HeadDim
	q := r.linear(a.q, in, r.q)
	k := r.linear(a.k, in, r.k)
	v := r.linear(a.v, in, r.v)
	half := hd / 2
	for t := range r.n {
		cos, sin := r.cos[t*half:(t+1)*half], r.sin[t*half:(t+1)*half]
		for h := range c.NumHeads {
			r.position(q[(t*c.NumHeads+h)*hd:(t*c.NumHeads+h+1)*hd], a.qNorm, cos, sin)
		}
		for h := range c.NumKVHeads {
			r.position(k[(t*c.NumKVHeads+h)*hd:(t*c.NumKVHeads+h+1)*hd], a.kNorm, cos, sin)
		}
	}
	kvDim := c.NumKVHeads * hd
	kc, vc := r.s.k[layer], r.s.v[layer]
	copy(kc[r.pos0*kvDim:], k[:r.n*kvDim])
	copy(vc[r.pos0*kvDim:], v[:r.n*kvDim])

	ctx := r.ctx[:r.n*c.NumHeads*hd]
	group := c.NumHeads / c.NumKVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	r.m.pool.Run(r.n*c.NumHeads, 1, func(worker, lo, hi int) {
		for i := lo; i < hi; i++ {
			t, h := i/c.NumHeads, i%c.NumHeads
			pos := r.pos0 + t
			first := 0
			if w := c.SlidingWindow; w > 0 && pos-w+1 > first {
				first = pos - w + 1
			}
			qh := q[i*hd : (i+1)*hd]
			g := h / group
			scores := r.scores[worker][:pos+1-first]
			for j := range scores {
				p := first + j
				scores[j] = kernels.Dot(qh, kc[p*kvDim+g*hd:p*kvDim+(g+1)*hd]) * scale
			}
			kernels.Softmax(scores)
			out := ctx[i*hd : (i+1)*hd]
			clear(out)
			for j, s := range scores {
				p := first + j
				kernels.AddScaled(out, s, vc[p*kvDim+g*hd:p*kvDim+(g+1)*hd])
			}
		}
	})
	return r.linear(a.o, ctx, r.attnOut)
}

// position applies the optional per-head norm, then RoPE, to one head vector in place.
func (r *run) position(x []float32, n norm, cos, sin []float32) {
	if n.w != nil {
		kernels.RMSNorm(x, x, n.w, n.eps)
	}
	if r.m.ropeInterleaved {
		kernels.RopeInterleaved(x, cos, sin)
	} else {
		kernels.RopeHalf(x, cos, sin)
	}
}

// forward runs the SwiGLU block for the pass's tokens.
func (m *mlp) forward(r *run, in []float32) []float32 {
	g := r.linear(m.gate, in, r.gate)
	u := r.linear(m.up, in, r.up)
	kernels.SiLUMul(g, u)
	return r.linear(m.down, g, r.mlpOut)
}

func (a *attention) linears() []linear { return []linear{a.q, a.k, a.v, a.o} }

func (m *mlp) linears() []linear { return []linear{m.gate, m.up, m.down} }
