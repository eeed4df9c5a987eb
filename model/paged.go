package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/tensor"
)

// Batched forward passes over a paged KV cache, for serving many sequences at once.
//
// A step runs a batch of chunks, one per sequence: a chunk of prompt (prefill) or the one
// token just sampled (decode). All the chunks' tokens go through each projection together
// as the rows of one matrix×matrix product, so a step reads every weight once however many
// sequences decode in it; that shared read is what makes batched decoding cheaper per
// token than decoding sequences one by one. Only attention is per sequence: each token
// attends over its own sequence's keys and values, found through the sequence's block
// table in a cache shared by all sequences (PagedCache).

// PagedCache holds the keys and values of many sequences in fixed-size blocks of token
// slots. Which blocks belong to which sequence is decided outside (package
// engine/kvcache); a forward pass is told each sequence's block table.
type PagedCache struct {
	m         *Model
	blockSize int
	numBlocks int
	k, v      [][]float32 // per layer: numBlocks × blockSize × kvDim (f32 cache)
	k16, v16  [][]uint16  // the same in half precision (Options.KVCache f16)

	run    run
	chunks []Chunk    // the pass's chunks
	slots  []int      // cache slot of each token of the pass
	tokSeq []int      // chunk index of each token of the pass
	tokPos []int      // position of each token of the pass
	tiles  []attnTile // the pass's runs of tokens attended in tiles (attention's scratch)
	rest   []int      // the pass's other tokens
	head   []float32  // final-normed rows that need logits
	logits []float32
}

// KVBytesPerToken is the cache memory one token takes in a float32 cache: a key and a
// value vector per layer. Model.KVBytesPerToken accounts for the model's cache dtype.
func KVBytesPerToken(c *Config) int { return KVBytesPerTokenOf(c, tensor.F32) }

// KVBytesPerTokenOf is KVBytesPerToken for a cache of dtype dt (f32 or f16).
func KVBytesPerTokenOf(c *Config, dt tensor.DType) int {
	size := 4
	if dt == tensor.F16 {
		size = 2
	}
	return 2 * c.NumLayers * c.NumKVHeads * c.HeadDim * size
}

// NewPagedCache allocates numBlocks blocks of blockSize tokens.
func (m *Model) NewPagedCache(numBlocks, blockSize int) (*PagedCache, error) {
	if numBlocks <= 0 || blockSize <= 0 {
		return nil, fmt.Errorf("paged cache: %d blocks of %d tokens: both must be > 0", numBlocks, blockSize)
	}
	if _, err := blockParts(m.layers[0]); err != nil {
		return nil, err
	}
	c := m.cfg
	kvDim := c.NumKVHeads * c.HeadDim
	pc := &PagedCache{m: m, blockSize: blockSize, numBlocks: numBlocks}
	size := numBlocks * blockSize * kvDim
	for range c.NumLayers {
		if m.kvF16 {
			pc.k16 = append(pc.k16, make([]uint16, size))
			pc.v16 = append(pc.v16, make([]uint16, size))
		} else {
			pc.k = append(pc.k, make([]float32, size))
			pc.v = append(pc.v, make([]float32, size))
		}
	}
	return pc, nil
}

// BlockSize is the number of token slots per block.
func (c *PagedCache) BlockSize() int { return c.blockSize }

// NumBlocks is the number of blocks.
func (c *PagedCache) NumBlocks() int { return c.numBlocks }

// Chunk is one sequence's part of a batched pass: Tokens at positions Start,
// Start+1, ..., whose keys and values go to (and whose attention reads from) the blocks of
// Blocks, the sequence's block table: position p lives in block Blocks[p/BlockSize].
type Chunk struct {
	Tokens []int
	Start  int
	Blocks []int
	Logits bool // return the logits of the chunk's last token
}

// Forward runs one batched pass and returns, for each chunk with Logits set, the logits of
// its last token (nil for the others). The logits are valid until the next Forward.
func (c *PagedCache) Forward(chunks []Chunk) ([][]float32, error) {
	m := c.m
	cfg := m.cfg
	n, maxCtx := 0, 0
	for i, ch := range chunks {
		if len(ch.Tokens) == 0 {
			return nil, fmt.Errorf("paged forward: chunk %d: no tokens", i)
		}
		end := ch.Start + len(ch.Tokens)
		if ch.Start < 0 || end > cfg.MaxPositions {
			return nil, fmt.Errorf("paged forward: chunk %d: positions [%d,%d) outside the context (%d)", i, ch.Start, end, cfg.MaxPositions)
		}
		if end > len(ch.Blocks)*c.blockSize {
			return nil, fmt.Errorf("paged forward: chunk %d: %d blocks hold %d tokens, the chunk ends at %d", i, len(ch.Blocks), len(ch.Blocks)*c.blockSize, end)
		}
		for _, b := range ch.Blocks {
			if b < 0 || b >= c.numBlocks {
				return nil, fmt.Errorf("paged forward: chunk %d: block %d outside the cache (%d blocks)", i, b, c.numBlocks)
			}
		}
		for j, id := range ch.Tokens {
			if id < 0 || id >= cfg.VocabSize {
				return nil, fmt.Errorf("paged forward: chunk %d: token %d at position %d outside the vocabulary (%d)", i, id, ch.Start+j, cfg.VocabSize)
			}
		}
		n += len(ch.Tokens)
		maxCtx = max(maxCtx, end)
	}
	if n == 0 {
		return nil, errors.New("paged forward: empty batch")
	}
	parts := make([]layerParts, len(m.layers))
	for i, l := range m.layers {
		p, err := blockParts(l)
		if err != nil {
			return nil, err
		}
		parts[i] = p
	}

	m.mu.Lock() // the pool and scratch are shared with Prefill/Decode
	defer m.mu.Unlock()
	r := &c.run
	c.start(chunks, n, maxCtx)
	t := 0
	for _, ch := range chunks {
		for _, id := range ch.Tokens {
			_ = m.embed.Row(id, r.x[t*cfg.HiddenSize:(t+1)*cfg.HiddenSize]) // Mat validated at load
			t++
		}
	}
	// x += attention(norm(x)); x += mlp(norm(x)): the block of every supported architecture.
	for i, p := range parts {
		h := r.norm(p.attnNorm, r.x)
		kernels.Add(r.x, c.attention(p.attn, i, h))
		h = r.norm(p.mlpNorm, r.x)
		kernels.Add(r.x, p.mlp.forward(r, h))
	}
	return c.headLogits(chunks), nil
}

// headLogits applies the final norm and the LM head to the last token of each chunk that
// wants logits, all rows in one product.
func (c *PagedCache) headLogits(chunks []Chunk) [][]float32 {
	m, cfg := c.m, c.m.cfg
	d := cfg.HiddenSize
	rows := 0
	for _, ch := range chunks {
		if ch.Logits {
			rows++
		}
	}
	out := make([][]float32, len(chunks))
	if rows == 0 {
		return out
	}
	c.head = grow(c.head, rows*d)
	c.logits = grow(c.logits, rows*cfg.VocabSize)
	t, row := 0, 0
	for i, ch := range chunks {
		t += len(ch.Tokens)
		if !ch.Logits {
			continue
		}
		kernels.RMSNormGGML(c.head[row*d:(row+1)*d], c.run.x[(t-1)*d:t*d], m.norm.w, m.norm.eps)
		out[i] = c.logits[row*cfg.VocabSize : (row+1)*cfg.VocabSize]
		row++
	}
	if rows == 1 {
		kernels.MatVec(m.pool, c.logits, &m.head, c.head, m.scratch)
	} else {
		kernels.MatMul(m.pool, c.logits, &m.head, c.head, rows, m.scratch)
	}
	return out
}

// start sizes the pass's buffers and computes each token's position, rotation and slot.
func (c *PagedCache) start(chunks []Chunk, n, maxCtx int) {
	m, cfg := c.m, c.m.cfg
	r := &c.run
	r.m, r.s, r.n, r.pos0 = m, nil, n, 0
	qd, kvd := cfg.NumHeads*cfg.HeadDim, cfg.NumKVHeads*cfg.HeadDim
	r.x = grow(r.x, n*cfg.HiddenSize)
	r.h = grow(r.h, n*cfg.HiddenSize)
	r.q = grow(r.q, n*qd)
	r.k = grow(r.k, n*kvd)
	r.v = grow(r.v, n*kvd)
	r.ctx = grow(r.ctx, n*qd)
	r.attnOut = grow(r.attnOut, n*cfg.HiddenSize)
	r.gate = grow(r.gate, n*cfg.IntermediateSize)
	r.up = grow(r.up, n*cfg.IntermediateSize)
	r.mlpOut = grow(r.mlpOut, n*cfg.HiddenSize)
	half := cfg.HeadDim / 2
	r.cos = grow(r.cos, n*half)
	r.sin = grow(r.sin, n*half)
	c.slots, c.tokSeq, c.tokPos = c.slots[:0], c.tokSeq[:0], c.tokPos[:0]
	t := 0
	for i, ch := range chunks {
		for j := range ch.Tokens {
			pos := ch.Start + j
			m.rope.Angles(r.cos[t*half:(t+1)*half], r.sin[t*half:(t+1)*half], pos)
			c.slots = append(c.slots, c.slot(ch.Blocks, pos))
			c.tokSeq = append(c.tokSeq, i)
			c.tokPos = append(c.tokPos, pos)
			t++
		}
	}
	r.workers(m, maxCtx)
	c.chunks = chunks
}

// slot is the cache slot of position pos of a sequence with block table blocks.
func (c *PagedCache) slot(blocks []int, pos int) int {
	return blocks[pos/c.blockSize]*c.blockSize + pos%c.blockSize
}

// attention is the paged counterpart of attention.forward: the same projections and
// rotations, but keys and values are stored at each token's slot and read back through its
// sequence's block table.
func (c *PagedCache) attention(a *attention, layer int, in []float32) []float32 {
	r, cfg := &c.run, c.m.cfg
	hd := cfg.HeadDim
	q, k, v := a.qkv(r, in)
	half := hd / 2
	kvDim := cfg.NumKVHeads * hd
	for t := range r.n {
		cos, sin := r.cos[t*half:(t+1)*half], r.sin[t*half:(t+1)*half]
		for h := range cfg.NumHeads {
			r.position(q[(t*cfg.NumHeads+h)*hd:(t*cfg.NumHeads+h+1)*hd], a.qNorm, cos, sin)
		}
		for h := range cfg.NumKVHeads {
			r.position(k[(t*cfg.NumKVHeads+h)*hd:(t*cfg.NumKVHeads+h+1)*hd], a.kNorm, cos, sin)
		}
		s := c.slots[t]
		if c.m.kvF16 {
			kernels.F16Encode(c.k16[layer][s*kvDim:(s+1)*kvDim], k[t*kvDim:(t+1)*kvDim])
			kernels.F16Encode(c.v16[layer][s*kvDim:(s+1)*kvDim], v[t*kvDim:(t+1)*kvDim])
		} else {
			copy(c.k[layer][s*kvDim:(s+1)*kvDim], k[t*kvDim:(t+1)*kvDim])
			copy(c.v[layer][s*kvDim:(s+1)*kvDim], v[t*kvDim:(t+1)*kvDim])
		}
	}

	ctx := r.ctx[:r.n*cfg.NumHeads*hd]
	group := cfg.NumHeads / cfg.NumKVHeads
	if c.m.kvF16 {
		kc, vc := c.k16[layer], c.v16[layer]
		// A chunk of kernels.AttnTile or more tokens is attended in tiles, as a pass of
		// that length is by a Sequence (and by llama.cpp); the other tokens one by one.
		// Deciding by chunk, not by pass, keeps a sequence's arithmetic independent of
		// what else is batched with it.
		tiles, rest := c.tiles[:0], c.rest[:0]
		t0 := 0
		for _, ch := range c.chunks {
			n := len(ch.Tokens)
			if n >= kernels.AttnTile && kernels.TiledAttnOK(hd) {
				for i := 0; i < n; i += kernels.AttnTile {
					tiles = append(tiles, attnTile{t0: t0 + i, n: min(kernels.AttnTile, n-i), pos0: ch.Start + i,
						kv: kvRows{blocks: ch.Blocks, bs: c.blockSize}})
				}
			} else {
				for i := range n {
					rest = append(rest, t0+i)
				}
			}
			t0 += n
		}
		c.tiles, c.rest = tiles, rest
		if len(tiles) > 0 {
			r.tiledAttention(tiles, q, ctx, kc, vc)
		}
		scale := ggmlScale(hd)
		r.m.pool.Run(len(rest)*cfg.NumHeads, 1, func(worker, lo, hi int) {
			for i := lo; i < hi; i++ {
				u, h := balanced(i, len(rest), cfg.NumHeads)
				t := rest[u]
				pos := c.tokPos[t]
				j := t*cfg.NumHeads + h
				rows := r.kvRows(worker, kvRows{blocks: c.chunks[c.tokSeq[t]].Blocks, bs: c.blockSize}, firstPos(cfg, pos), pos)
				attendF16(&r.flash[worker], r.q16[worker], ctx[j*hd:(j+1)*hd], q[j*hd:(j+1)*hd], kc, vc,
					rows, (h/group)*hd, kvDim, scale)
			}
		})
		return r.linear(a.o, ctx, r.attnOut)
	}
	kc, vc := c.k[layer], c.v[layer]
	scale := float32(1 / math.Sqrt(float64(hd)))
	bs := c.blockSize
	r.m.pool.Run(r.n*cfg.NumHeads, 1, func(worker, lo, hi int) {
		for u := lo; u < hi; u++ {
			t, h := balanced(u, r.n, cfg.NumHeads)
			pos := c.tokPos[t]
			blocks := c.chunks[c.tokSeq[t]].Blocks
			first := firstPos(cfg, pos)
			i := t*cfg.NumHeads + h
			qh := q[i*hd : (i+1)*hd]
			g := h / group
			scores := r.scores[worker][:pos+1-first]
			for j := range scores {
				p := first + j
				s := blocks[p/bs]*bs + p%bs
				scores[j] = kernels.Dot(qh, kc[s*kvDim+g*hd:s*kvDim+(g+1)*hd]) * scale
			}
			kernels.Softmax(scores)
			out := ctx[i*hd : (i+1)*hd]
			clear(out)
			for j, w := range scores {
				p := first + j
				s := blocks[p/bs]*bs + p%bs
				kernels.AddScaled(out, w, vc[s*kvDim+g*hd:s*kvDim+(g+1)*hd])
			}
		}
	})
	return r.linear(a.o, ctx, r.attnOut)
}

// layerParts are the pieces of a pre-norm decoder block.
type layerParts struct {
	attnNorm norm
	attn     *attention
	mlpNorm  norm
	mlp      *mlp
}

// blockParts takes apart the layer types whose block is x += attn(norm(x)); x +=
// mlp(norm(x)), which are all the architectures so far; a new layer type must be added
// here before it can be served.
func blockParts(l layer) (layerParts, error) {
	switch l := l.(type) {
	case *llamaLayer:
		return layerParts{l.attnNorm, &l.attn, l.mlpNorm, &l.mlp}, nil
	case *qwen2Layer:
		return layerParts{l.attnNorm, &l.attn, l.mlpNorm, &l.mlp}, nil
	case *qwen3Layer:
		return layerParts{l.attnNorm, &l.attn, l.mlpNorm, &l.mlp}, nil
	}
	return layerParts{}, fmt.Errorf("paged forward: layer type %T has no batched forward", l)
}
