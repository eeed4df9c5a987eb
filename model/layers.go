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
	out := r.h[:len(in)]
	kernels.RMSNormRowsGGML(out, in, n.w, n.eps)
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

// forward runs attention for the pass's tokens: project, position, append k and v to each
// token's sequence cache (its chunk's kvView), attend over that cache, project back.
// Attention is the one per-sequence part of a pass: a token reads only its own
// sequence's keys and values, so a sequence's arithmetic does not depend on what else the
// pass holds.
func (a *attention) forward(r *run, layer int, in []float32) []float32 {
	c := r.m.cfg
	hd := c.HeadDim
	q, k, v := a.qkv(r, in)
	half := hd / 2
	kvDim := c.NumKVHeads * hd
	f16 := r.m.kvF16
	for t := range r.n {
		cos, sin := r.cos[t*half:(t+1)*half], r.sin[t*half:(t+1)*half]
		for h := range c.NumHeads {
			r.position(q[(t*c.NumHeads+h)*hd:(t*c.NumHeads+h+1)*hd], a.qNorm, cos, sin)
		}
		for h := range c.NumKVHeads {
			r.position(k[(t*c.NumKVHeads+h)*hd:(t*c.NumKVHeads+h+1)*hd], a.kNorm, cos, sin)
		}
		kv := r.chunks[r.tokCh[t]].kv
		row := kv.row(r.tokPos[t])
		if f16 {
			kernels.F16Encode(kv.store.k16[layer][row*kvDim:(row+1)*kvDim], k[t*kvDim:(t+1)*kvDim])
			kernels.F16Encode(kv.store.v16[layer][row*kvDim:(row+1)*kvDim], v[t*kvDim:(t+1)*kvDim])
		} else {
			copy(kv.store.k[layer][row*kvDim:(row+1)*kvDim], k[t*kvDim:(t+1)*kvDim])
			copy(kv.store.v[layer][row*kvDim:(row+1)*kvDim], v[t*kvDim:(t+1)*kvDim])
		}
	}
	ctx := r.ctx[:r.n*c.NumHeads*hd]
	group := c.NumHeads / c.NumKVHeads
	if f16 {
		// Some tokens are attended in tiles (llama.cpp's path for a pass of kernels.AttnTile
		// or more tokens), the others one by one: attendsTiled decides, per token. A tile is
		// up to AttnTile consecutive tokens of one chunk that take the tiled path (how
		// queries are grouped does not change their arithmetic: kernels.AttendTiled).
		tiles, rest := r.tiles[:0], r.rest[:0]
		t0 := 0
		for i := range r.chunks {
			ch := &r.chunks[i]
			n := len(ch.tokens)
			for j := 0; j < n; {
				if !r.attendsTiled(ch, j) {
					rest = append(rest, t0+j)
					j++
					continue
				}
				k := j + 1
				for k < n && k-j < kernels.AttnTile && r.attendsTiled(ch, k) {
					k++
				}
				tiles = append(tiles, attnTile{t0: t0 + j, n: k - j, pos0: ch.start + j, kv: ch.kv})
				j = k
			}
			t0 += n
		}
		r.tiles, r.rest = tiles, rest
		if len(tiles) > 0 {
			r.tiledAttention(layer, tiles, q, ctx)
		}
		scale := ggmlScale(hd)
		// Where query heads share KV heads in pairs or more (grouped-query attention), a
		// unit is two consecutive heads of a token, which read the same cached rows once
		// (FlashF16.AttendPair, the bits of one Attend each).
		per := 1
		if group%2 == 0 {
			per = 2
		}
		units := c.NumHeads / per
		r.m.pool.Run(len(rest)*units, 1, func(worker, lo, hi int) {
			for i := lo; i < hi; i++ {
				u, h := balanced(i, len(rest), units)
				h *= per
				t := rest[u]
				pos := r.tokPos[t]
				kv := r.chunks[r.tokCh[t]].kv
				j := t*c.NumHeads + h
				rows := r.kvRows(worker, kv, firstPos(c, pos), pos)
				attendF16(&r.flash[worker], r.q16[worker], ctx[j*hd:(j+per)*hd], q[j*hd:(j+per)*hd], per,
					kv.store.k16[layer], kv.store.v16[layer], rows, (h/group)*hd, kvDim, scale)
			}
		})
		return r.linear(a.o, ctx, r.attnOut)
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	if units := r.shared; units != nil {
		fn := func(worker, lo, hi int) {
			for _, u := range units[lo:hi] {
				r.attendShared(worker, layer, u, q, ctx, scale)
			}
		}
		if r.sharedLong {
			// A prompt's units cost more the later their tokens: handed out one at a time.
			r.m.pool.RunChunks(len(units), 1, fn)
		} else {
			r.m.pool.Run(len(units), 1, fn)
		}
		return r.linear(a.o, ctx, r.attnOut)
	}
	r.m.pool.Run(r.n*c.NumHeads, 1, func(worker, lo, hi int) {
		for u := lo; u < hi; u++ {
			t, h := balanced(u, r.n, c.NumHeads)
			pos := r.tokPos[t]
			kv := r.chunks[r.tokCh[t]].kv
			kc, vc := kv.store.k[layer], kv.store.v[layer]
			rows := r.kvRows(worker, kv, firstPos(c, pos), pos)
			i := t*c.NumHeads + h
			kernels.AttendF32(ctx[i*hd:(i+1)*hd], q[i*hd:(i+1)*hd], kc, vc, rows, (h/group)*hd, kvDim, scale, r.scores[worker])
		}
	})
	return r.linear(a.o, ctx, r.attnOut)
}

// sharedTokens is the most tokens a chunk may have for the pool to split its work evenly
// in advance (kernels.Pool.Run): decode and verify passes. A longer chunk (a prompt) is
// split into units of up to kernels.AttnSharedMax consecutive queries, whose cost grows
// with their tokens' positions, and the units are handed out one at a time (RunChunks).
const sharedTokens = 8

// sharedAttn turns sharedUnits on (off: head by head, the same bits), for benchmarks.
var sharedAttn = true

// attnUnit is queries q0..q1−1 of one KV head kh of chunk ch, numbered token-major: query
// u is head kh·group + u mod group of the chunk's token u / group (t0: the chunk's first
// token in the pass).
type attnUnit struct{ ch, t0, kh, q0, q1 int }

// sharedUnits splits a pass over the f32 cache into units of queries that read the same
// cache rows (one KV head of one sequence, kernels.AttendF32Shared), or returns nil where
// the pass attends head by head: a sliding window (its tokens' first positions differ).
// A prompt's consecutive tokens share their rows too, up to the last one's position: with
// units of AttnSharedMax queries each cache row is read once for up to 16 queries instead
// of once per query. Before, a chunk of more than sharedTokens tokens attended head by
// head, and at 512 tokens attention took 47% of a Qwen3-0.6B Q4_K_M prefill over the f32
// cache (96.9 tok/s against 176.6 over the f16 cache, whose prompts take the tiled path).
// A (chunk, KV head)'s queries are split in parts so that the pool gets at least two units
// per worker (one token of SmolLM2 has three KV heads for two workers) and no part holds
// more than kernels.AttnSharedMax.
// Model.pass sets them once a pass (run.shared); every layer uses the same.
func (r *run) sharedUnits() []attnUnit {
	c := r.m.cfg
	if c.SlidingWindow > 0 || !sharedAttn || r.m.kvF16 {
		return nil
	}
	r.sharedLong = false
	for i := range r.chunks {
		if len(r.chunks[i].tokens) > sharedTokens {
			r.sharedLong = true
		}
	}
	group := c.NumHeads / c.NumKVHeads
	groups := len(r.chunks) * c.NumKVHeads
	want := 2 * r.m.pool.Threads()
	units, t0 := r.units[:0], 0
	for i := range r.chunks {
		nq := len(r.chunks[i].tokens) * group
		parts := max((want+groups-1)/groups, (nq+kernels.AttnSharedMax-1)/kernels.AttnSharedMax)
		parts = min(parts, nq)
		for kh := range c.NumKVHeads {
			for p := range parts {
				units = append(units, attnUnit{ch: i, t0: t0, kh: kh, q0: p * nq / parts, q1: (p + 1) * nq / parts})
			}
		}
		t0 += len(r.chunks[i].tokens)
	}
	r.units = units
	return units
}

// attendShared attends unit u's queries over their sequence's f32 cache at layer in one
// kernels.AttendF32Shared call (each query's result is AttendF32's: the same bits as the
// head-by-head path).
func (r *run) attendShared(worker, layer int, u attnUnit, q, ctx []float32, scale float32) {
	c := r.m.cfg
	hd := c.HeadDim
	group := c.NumHeads / c.NumKVHeads
	ch := &r.chunks[u.ch]
	kv := ch.kv
	qs, outs, ns := r.shQ[worker][:0], r.shOut[worker][:0], r.shN[worker][:0]
	for x := u.q0; x < u.q1; x++ {
		j, h := x/group, u.kh*group+x%group
		i := (u.t0+j)*c.NumHeads + h
		qs = append(qs, q[i*hd:(i+1)*hd])
		outs = append(outs, ctx[i*hd:(i+1)*hd])
		ns = append(ns, ch.start+j+1)
	}
	rows := r.kvRows(worker, kv, 0, ch.start+(u.q1-1)/group)
	kernels.AttendF32Shared(outs, qs, ns, kv.store.k[layer], kv.store.v[layer], rows, u.kh*hd, c.NumKVHeads*hd, scale, r.scores[worker])
}

// attendsTiled reports whether token j of ch is attended over the f16 cache in tiles
// (llama.cpp's arithmetic for a pass of kernels.AttnTile or more tokens) rather than on its
// own (its decode arithmetic).
//
// In the batch-invariant mode (kernels.BatchInvariant), for a chunk that knows its
// sequence's prompt length (Chunk.Prompt), the choice depends on the token's position and
// that length alone: a prompt token takes the path it would take if the prompt were
// prefilled alone from position 0 in passes of the model's prefill chunk (prefillChunk, as
// llama.cpp's ubatches of 512) — tiled where its pass would hold AttnTile tokens or more —
// and every later token (decoded, forced, drafted, or recomputed after a preemption) is
// attended on its own, as a decode step attends it. So where the scheduler cuts a prompt
// (its token budget, less what the step's other sequences take) does not change the
// sequence's arithmetic: its logits are the same bits alone or batched, and serve's equal
// generate's.
//
// Otherwise the chunk decides, as llama.cpp decides by pass: all its tokens are tiled when
// it holds AttnTile or more.
func (r *run) attendsTiled(ch *passChunk, j int) bool {
	if !kernels.TiledAttnOK(r.m.cfg.HeadDim) {
		return false
	}
	if ch.prompt <= 0 || !kernels.BatchInvariant() {
		return len(ch.tokens) >= kernels.AttnTile
	}
	p := ch.start + j
	if p >= ch.prompt {
		return false
	}
	c := r.m.chunk
	return min(c, ch.prompt-p/c*c) >= kernels.AttnTile
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

// attendF16 writes into out the attention of one query head qh over the cache rows rows of
// an f16 cache (the head's vectors at offset off of each kvDim-wide row), as llama.cpp's
// flash attention computes it (kernels.FlashF16); q16 is scratch of len(qh). With heads 2,
// qh holds two consecutive query heads of one KV head and out gets both results
// (FlashF16.AttendPair).
func attendF16(fl *kernels.FlashF16, q16, out, qh []float32, heads int, kc, vc []uint16, rows []int32, off, kvDim int, scale float32) {
	q16 = q16[:len(qh)]
	copy(q16, qh)
	kernels.RoundF16(q16)
	if heads == 2 {
		hd := len(qh) / 2
		fl.AttendPair(out[:hd], out[hd:2*hd], q16, kc, vc, rows, off, kvDim, scale)
		return
	}
	fl.Attend(out, q16, kc, vc, rows, off, kvDim, scale)
}

// kvRows returns worker's list of the cache rows of positions first..last of view t, filled
// from its block table (or the positions themselves) unless it already holds them: the heads
// of one token, which a worker takes in turn, share it.
func (r *run) kvRows(worker int, t kvView, first, last int) []int32 {
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
// t0..t0+n−1 of the pass at positions pos0.., whose keys and values are in kv.
type attnTile struct {
	t0, n, pos0 int
	kv          kvView
}

// tiledAttention writes into ctx the attention of every head of the tokens of tiles over
// their sequences' f16 caches at layer, with llama.cpp's tiled arithmetic
// (kernels.FlashTiled), which it runs for passes of kernels.AttnTile or more tokens.
func (r *run) tiledAttention(layer int, tiles []attnTile, q, ctx []float32) {
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
			cache := kernels.TileCache{K: tl.kv.store.k16[layer], V: tl.kv.store.v16[layer], Rows: r.kvRows(worker, tl.kv, first, tl.pos0+tl.n-1),
				RowBase: first, Off: (h / group) * hd, Stride: kvDim}
			r.tiled[worker].AttendTiled(&qs, &cache, hd, scale)
		}
	})
}
