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
		kernels.RMSNormGGML(out[t*d:(t+1)*d], in[t*d:(t+1)*d], n.w, n.eps)
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

// linearsShared writes each of ls applied to the same input in (Q, K, V; gate, up) into the
// matching out buffer, with one fused product (the activations converted once, one hand-over
// to the workers for all of them).
func (r *run) linearsShared(ls []linear, in []float32, outs ...[]float32) {
	ps := make([]kernels.Product, len(ls))
	for i, l := range ls {
		ps[i] = kernels.Product{W: &ls[i].w, Out: outs[i][:r.n*l.w.Rows]}
	}
	kernels.MatMulMany(r.m.pool, ps, in, r.n, r.m.scratch)
	for i, l := range ls {
		if l.b != nil {
			for t := range r.n {
				kernels.Add(outs[i][t*l.w.Rows:(t+1)*l.w.Rows], l.b)
			}
		}
	}
}

// qkv projects the pass's normed tokens to queries, keys and values.
func (a *attention) qkv(r *run, in []float32) (q, k, v []float32) {
	n := r.n
	q, k, v = r.q[:n*a.q.w.Rows], r.k[:n*a.k.w.Rows], r.v[:n*a.v.w.Rows]
	r.linearsShared([]linear{a.q, a.k, a.v}, in, q, k, v)
	return q, k, v
}

// forward runs attention for the pass's tokens: project, position, append k and v to this
// sequence's cache, attend over the cache, project back.
func (a *attention) forward(r *run, layer int, in []float32) []float32 {
	c := r.m.cfg
	hd := c.HeadDim
	q, k, v := a.qkv(r, in)
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
	ctx := r.ctx[:r.n*c.NumHeads*hd]
	group := c.NumHeads / c.NumKVHeads
	if r.m.kvF16 {
		kc, vc := r.s.k16[layer], r.s.v16[layer]
		kernels.F16Encode(kc[r.pos0*kvDim:(r.pos0+r.n)*kvDim], k[:r.n*kvDim])
		kernels.F16Encode(vc[r.pos0*kvDim:(r.pos0+r.n)*kvDim], v[:r.n*kvDim])
		if r.n >= kernels.AttnTile && kernels.TiledAttnOK(hd) { // as llama.cpp picks its tiled path
			var tiles []attnTile
			for t0 := 0; t0 < r.n; t0 += kernels.AttnTile {
				tiles = append(tiles, attnTile{t0: t0, n: min(kernels.AttnTile, r.n-t0), pos0: r.pos0 + t0})
			}
			r.tiledAttention(tiles, q, ctx, kc, vc)
			return r.linear(a.o, ctx, r.attnOut)
		}
		scale := ggmlScale(hd)
		r.m.pool.Run(r.n*c.NumHeads, 1, func(worker, lo, hi int) {
			for i := lo; i < hi; i++ {
				t, h := balanced(i, r.n, c.NumHeads)
				pos := r.pos0 + t
				j := t*c.NumHeads + h
				rows := r.kvRows(worker, kvRows{}, firstPos(c, pos), pos)
				attendF16(&r.flash[worker], r.q16[worker], ctx[j*hd:(j+1)*hd], q[j*hd:(j+1)*hd], kc, vc,
					rows, (h/group)*hd, kvDim, scale)
			}
		})
		return r.linear(a.o, ctx, r.attnOut)
	}
	kc, vc := r.s.k[layer], r.s.v[layer]
	copy(kc[r.pos0*kvDim:], k[:r.n*kvDim])
	copy(vc[r.pos0*kvDim:], v[:r.n*kvDim])

	scale := float32(1 / math.Sqrt(float64(hd)))
	r.m.pool.Run(r.n*c.NumHeads, 1, func(worker, lo, hi int) {
		for i := lo; i < hi; i++ {
			t, h := balanced(i, r.n, c.NumHeads)
			pos := r.pos0 + t
			first := firstPos(c, pos)
			j := t*c.NumHeads + h
			qh := q[j*hd : (j+1)*hd]
			g := h / group
			scores := r.scores[worker][:pos+1-first]
			for j := range scores {
				p := first + j
				scores[j] = kernels.Dot(qh, kc[p*kvDim+g*hd:p*kvDim+(g+1)*hd]) * scale
			}
			kernels.Softmax(scores)
			out := ctx[j*hd : (j+1)*hd]
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
		kernels.RMSNormGGML(x, x, n.w, n.eps)
	}
	if r.m.ropeInterleaved {
		kernels.RopeInterleaved(x, cos, sin)
	} else {
		kernels.RopeHalf(x, cos, sin)
	}
}

// forward runs the SwiGLU block for the pass's tokens.
func (m *mlp) forward(r *run, in []float32) []float32 {
	g, u := r.gate[:r.n*m.gate.w.Rows], r.up[:r.n*m.up.w.Rows]
	r.linearsShared([]linear{m.gate, m.up}, in, g, u)
	kernels.SiLUMul(g, u)
	return r.linear(m.down, g, r.mlpOut)
}

func (a *attention) linears() []linear { return []linear{a.q, a.k, a.v, a.o} }

func (m *mlp) linears() []linear { return []linear{m.gate, m.up, m.down} }

// firstPos is the first position a token at pos attends to (a sliding window, or 0).
func firstPos(c *Config, pos int) int {
	if w := c.SlidingWindow; w > 0 && pos-w+1 > 0 {
		return pos - w + 1
	}
	return 0
}

// ggmlScale is llama.cpp's attention scale 1.0f/sqrtf(head_dim), in float32 throughout.
func ggmlScale(hd int) float32 { return 1 / float32(math.Sqrt(float64(hd))) }

// kvRows maps a position to its row of a cache: the position itself (blocks nil, a
// Sequence) or its slot through a block table (PagedCache).
type kvRows struct {
	blocks []int
	bs     int
}

func (k kvRows) row(p int) int {
	if k.blocks == nil {
		return p
	}
	return k.blocks[p/k.bs]*k.bs + p%k.bs
}

// attendF16 writes into out the attention of one query head qh over the cache rows rows of
// an f16 cache (the head's vectors at offset off of each kvDim-wide row), as llama.cpp's
// flash attention computes it (kernels.FlashF16); q16 is scratch of len(qh).
func attendF16(fl *kernels.FlashF16, q16, out, qh []float32, kc, vc []uint16, rows []int32, off, kvDim int, scale float32) {
	copy(q16, qh)
	kernels.RoundF16(q16)
	fl.Attend(out, q16, kc, vc, rows, off, kvDim, scale)
}

// kvRows returns worker's list of the cache rows of positions first..last, filled from the
// block table (or the positions themselves) unless it already holds them: the heads of one
// token, which a worker takes in turn, share it.
func (r *run) kvRows(worker int, t kvRows, first, last int) []int32 {
	key := rowsKey{first: first, last: last + 1} // last+1: the zero key is never valid
	if t.blocks != nil {
		key.blocks = &t.blocks[0]
	}
	rows := r.rows[worker][:last+1-first]
	if r.rowsKey[worker] != key {
		for j := range rows {
			rows[j] = int32(t.row(first + j))
		}
		r.rowsKey[worker] = key
	}
	return rows
}

// balanced maps unit i of a pass's tokens × heads to a token and head so that contiguous
// ranges of units (what the pool hands each worker) carry equal attention work under the
// causal mask: tokens are taken from both ends in turn (0, n−1, 1, n−2, …), so the worker
// that gets the short early contexts also gets the long late ones.
func balanced(i, n, heads int) (t, h int) {
	u, h := i/heads, i%heads
	if u%2 == 0 {
		return u / 2, h
	}
	return n - 1 - u/2, h
}

// attnTile is a run of up to kernels.AttnTile consecutive tokens of one sequence, tokens
// t0..t0+n−1 of the pass at positions pos0.., whose cache rows come from kv.
type attnTile struct {
	t0, n, pos0 int
	kv          kvRows
}

// tiledAttention writes into ctx the attention of every head of the tokens of tiles over
// the f16 cache kc, vc, with llama.cpp's tiled arithmetic (kernels.FlashTiled), which it
// runs for passes of kernels.AttnTile or more tokens.
func (r *run) tiledAttention(tiles []attnTile, q, ctx []float32, kc, vc []uint16) {
	c := r.m.cfg
	hd := c.HeadDim
	kvDim := c.NumKVHeads * hd
	group := c.NumHeads / c.NumKVHeads
	stride := c.NumHeads * hd
	scale := ggmlScale(hd)
	nt := len(tiles)
	r.m.pool.Run(nt*c.NumHeads, 1, func(worker, lo, hi int) {
		for i := lo; i < hi; i++ {
			// Heads outermost, tiles from both ends in turn within a head (balanced): a
			// worker's contiguous range of units carries its share of the causal work.
			ti, _ := balanced(i%nt, nt, 1)
			h := i / nt
			tl := tiles[ti]
			at := tl.t0*stride + h*hd
			qs := kernels.TileQueries{Q: q[at:], QStride: stride, Out: ctx[at:], OutStride: stride,
				N: tl.n, Pos0: tl.pos0, Window: c.SlidingWindow}
			first := firstPos(c, tl.pos0)
			cache := kernels.TileCache{K: kc, V: vc, Rows: r.kvRows(worker, tl.kv, first, tl.pos0+tl.n-1),
				RowBase: first, Off: (h / group) * hd, Stride: kvDim}
			r.tiled[worker].AttendTiled(&qs, &cache, hd, scale)
		}
	})
}
