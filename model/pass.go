package model

import (
	"math"

	"github.com/tokenwise/tokenwise/kernels"
)

// The one forward pass. Every caller — a Sequence's Prefill and Decode, the server's
// batched steps over a PagedCache, calibration — builds a list of chunks and calls
// Model.pass, which runs the architecture's layers (llama.go) over all the
// chunks' tokens at once, then Model.logits for the positions that asked for them.
//
// A chunk is one sequence's part of a pass: tokens at consecutive positions, and a kvView
// that says where that sequence's keys and values live. The view is the KV-cache
// interface attention sees, with two implementations of its storage: a Sequence's
// contiguous cache (the row of position p is p) and the paged cache shared by the server's
// sequences (the row of p is found through the sequence's block table). It is a struct,
// not a Go interface, because attention maps positions to rows in its innermost loops: the
// rows of a token's context are listed once per worker (run.kvRows) and read directly, with
// no call per position.

// kvStore holds keys and values: per layer, rows of num_kv_heads × head_dim values, in
// float32 or (Options.KVCache f16) half precision. Which rows a sequence uses is its view's
// business.
type kvStore struct {
	k, v     [][]float32
	k16, v16 [][]uint16
}

// kvView is one sequence's window on a kvStore: position p lives in row p (blocks nil, a
// Sequence) or in row blocks[p/bs]*bs + p%bs (a PagedCache block table).
type kvView struct {
	store  *kvStore
	blocks []int
	bs     int
}

func (v kvView) row(p int) int {
	if v.blocks == nil {
		return p
	}
	return v.blocks[p/v.bs]*v.bs + p%v.bs
}

// passChunk is a chunk of a pass: tokens at positions start.., their cache, and which
// tokens' logits the pass computes: the offsets at (ascending; several for drafted tokens
// verified in one pass) and, with last, the last token (if at does not already hold it).
type passChunk struct {
	tokens []int
	start  int
	kv     kvView
	at     []int
	last   bool
	prompt int // the sequence's prompt length, or 0 (Chunk.Prompt)
	// allowed: per logits row, nil or the only token ids it needs (Chunk.Allowed).
	allowed [][]int32
}

// logitRows calls f with the offset of each token of ch whose logits the pass computes.
func (ch *passChunk) logitRows(f func(off int)) {
	n := len(ch.tokens)
	for _, o := range ch.at {
		f(o)
	}
	if ch.last && (len(ch.at) == 0 || ch.at[len(ch.at)-1] != n-1) {
		f(n - 1)
	}
}

// numLogits is the number of logit rows ch asks for.
func (ch *passChunk) numLogits() int {
	n := len(ch.at)
	if ch.last && (n == 0 || ch.at[n-1] != len(ch.tokens)-1) {
		n++
	}
	return n
}

// run holds one pass's activations. Buffers are kept between passes and grown as needed.
type run struct {
	m      *Model
	n      int // tokens in this pass, over all chunks
	chunks []passChunk
	tokPos []int      // position of each token of the pass
	tokCh  []int      // chunk index of each token of the pass
	tiles  []attnTile // the pass's runs of tokens attended in tiles (attention's scratch)
	rest   []int      // the pass's other tokens

	x                          []float32 // residual stream, n×hidden
	h, q, k, v, ctx, attnOut   []float32
	gate, up, mlpOut, cos, sin []float32
	scores                     [][]float32 // per worker, one row of attention weights
	flash                      []kernels.FlashF16
	tiled                      []kernels.FlashTiled
	q16                        [][]float32 // per worker, one or two query heads rounded to f16
	rows                       [][]int32   // per worker, the cache rows of the attended positions
	rowsKey                    []rowsKey   // per worker, what rows holds
	units                      []attnUnit  // sharedUnits' buffer
	shared                     []attnUnit  // this pass's shared-attention units, or nil
	sharedLong                 bool        // some chunk has more than sharedTokens tokens
	shQ, shOut                 [][][]float32
	shN                        [][]int // per worker, a unit's queries, outputs and lengths

	headIn, logits []float32 // final-normed rows that want logits, and their logits
	sparse         []sparseRow
	denseIn, dense []float32 // the whole-vocabulary rows beside sparse ones, packed

	moe moeScratch // a mixture of experts' routing (moe.go)
}

// rowsKey names the positions a worker's rows slice holds: first..last through one block
// table (or none), so consecutive heads of one token reuse it. Rows are indices, not data:
// two sequences without a block table share the same rows.
type rowsKey struct {
	blocks      *int
	first, last int
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// pass runs the chunks' tokens through every layer (their keys and values are appended to
// their caches); the final hidden states stay in r.x for logits. The caller holds m.mu and
// has checked the chunks (positions inside their caches, ids inside the vocabulary).
func (m *Model) pass(r *run, chunks []passChunk) {
	r.start(m, chunks)
	r.shared = r.sharedUnits()
	d := m.cfg.HiddenSize
	t := 0
	for _, ch := range chunks {
		for _, id := range ch.tokens {
			_ = m.embed.Row(id, r.x[t*d:(t+1)*d]) // Mat validated at load
			t++
		}
	}
	for i, l := range m.layers {
		l.forward(r, i)
	}
}

// logits applies the final norm and the LM head to the rows the chunks of the last pass
// asked for, in chunk order, all in one product (a matrix×vector product for a single row,
// as a decode step), into dst when it holds them (else into the run's buffer). It returns
// the logits, rows × vocabulary.
func (m *Model) logits(r *run, dst []float32) []float32 {
	c := m.cfg
	d := c.HiddenSize
	rows := 0
	for i := range r.chunks {
		rows += r.chunks[i].numLogits()
	}
	if rows == 0 {
		return nil
	}
	r.headIn = grow(r.headIn, rows*d)
	t0, row := 0, 0
	for i := range r.chunks {
		ch := &r.chunks[i]
		ch.logitRows(func(o int) {
			t := t0 + o
			kernels.RMSNormGGML(r.headIn[row*d:(row+1)*d], r.x[t*d:(t+1)*d], m.norm.w, m.norm.eps)
			row++
		})
		t0 += len(ch.tokens)
	}
	out := dst
	if cap(out) < rows*c.VocabSize {
		r.logits = grow(r.logits, rows*c.VocabSize)
		out = r.logits
	}
	out = out[:rows*c.VocabSize]
	// Rows that need only a few tokens' logits (a grammar's mask) are computed apart, row by
	// row; the others in one product as before.
	sparse := r.sparse[:0]
	row = 0
	for i := range r.chunks {
		ch := &r.chunks[i]
		for j := range ch.numLogits() {
			if ch.allowed != nil && ch.allowed[j] != nil {
				sparse = append(sparse, sparseRow{row: row, ids: ch.allowed[j]})
			}
			row++
		}
	}
	r.sparse = sparse
	if len(sparse) > 0 && rows > 1 && !kernels.BatchInvariant() {
		// Outside the batch-invariant mode a float row's bits depend on whether it is
		// multiplied alone or with others: keep the one product, and mask afterwards.
		kernels.MatMul(m.pool, out, &m.head, r.headIn, rows, m.scratch)
		for _, sr := range sparse {
			maskOutside(out[sr.row*c.VocabSize:(sr.row+1)*c.VocabSize], sr.ids)
		}
		return out
	}
	if len(sparse) == 0 {
		if rows == 1 {
			kernels.MatVec(m.pool, out, &m.head, r.headIn, m.scratch)
		} else {
			kernels.MatMul(m.pool, out, &m.head, r.headIn, rows, m.scratch)
		}
		return out
	}
	for _, sr := range sparse {
		kernels.MatVecSubset(m.pool, out[sr.row*c.VocabSize:(sr.row+1)*c.VocabSize], &m.head, r.headIn[sr.row*d:(sr.row+1)*d], sr.ids, m.scratch)
	}
	if full := rows - len(sparse); full > 0 {
		// The whole-vocabulary rows, packed, through one product, then into their places.
		r.denseIn, r.dense = grow(r.denseIn, full*d), grow(r.dense, full*c.VocabSize)
		k, si := 0, 0
		for row := range rows {
			if si < len(sparse) && sparse[si].row == row {
				si++
				continue
			}
			copy(r.denseIn[k*d:(k+1)*d], r.headIn[row*d:(row+1)*d])
			k++
		}
		if full == 1 {
			kernels.MatVec(m.pool, r.dense, &m.head, r.denseIn, m.scratch)
		} else {
			kernels.MatMul(m.pool, r.dense, &m.head, r.denseIn, full, m.scratch)
		}
		k, si = 0, 0
		for row := range rows {
			if si < len(sparse) && sparse[si].row == row {
				si++
				continue
			}
			copy(out[row*c.VocabSize:(row+1)*c.VocabSize], r.dense[k*c.VocabSize:(k+1)*c.VocabSize])
			k++
		}
	}
	return out
}

// maskOutside sets every entry of row but those at ids (ascending) to -Inf.
func maskOutside(row []float32, ids []int32) {
	inf := float32(math.Inf(-1))
	k := 0
	for i := range row {
		if k < len(ids) && int(ids[k]) == i {
			k++
			continue
		}
		row[i] = inf
	}
}

// sparseRow is a logits row the LM head computes for a few tokens only.
type sparseRow struct {
	row int
	ids []int32
}

// start sizes the pass's buffers and computes each token's position and rotation.
func (r *run) start(m *Model, chunks []passChunk) {
	c := m.cfg
	n, maxCtx := 0, 0
	for _, ch := range chunks {
		n += len(ch.tokens)
		maxCtx = max(maxCtx, ch.start+len(ch.tokens))
	}
	r.m, r.n, r.chunks = m, n, chunks
	qd, kvd := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	r.x = grow(r.x, n*c.HiddenSize)
	r.h = grow(r.h, n*c.HiddenSize)
	r.q = grow(r.q, n*qd)
	r.k = grow(r.k, n*kvd)
	r.v = grow(r.v, n*kvd)
	r.ctx = grow(r.ctx, n*qd)
	r.attnOut = grow(r.attnOut, n*c.HiddenSize)
	r.gate = grow(r.gate, n*c.IntermediateSize)
	r.up = grow(r.up, n*c.IntermediateSize)
	r.mlpOut = grow(r.mlpOut, n*c.HiddenSize)
	half := c.HeadDim / 2
	r.cos = grow(r.cos, n*half)
	r.sin = grow(r.sin, n*half)
	r.tokPos, r.tokCh = r.tokPos[:0], r.tokCh[:0]
	t := 0
	for i, ch := range chunks {
		for j := range ch.tokens {
			pos := ch.start + j
			m.rope.Angles(r.cos[t*half:(t+1)*half], r.sin[t*half:(t+1)*half], pos)
			r.tokPos = append(r.tokPos, pos)
			r.tokCh = append(r.tokCh, i)
			t++
		}
	}
	r.workers(m, maxCtx)
}

// forget drops the run's references to the caches of its last pass: the kept buffers must
// not keep a released sequence's cache reachable.
func (r *run) forget() {
	for i := range r.chunks {
		r.chunks[i] = passChunk{}
	}
	r.chunks = r.chunks[:0]
	clear(r.sparse) // the allowed ids are the caller's
	r.sparse = r.sparse[:0]
}

// workers sizes the per-worker attention scratch for contexts of up to ctx positions.
func (r *run) workers(m *Model, ctx int) {
	nw := m.pool.Threads()
	if len(r.scores) != nw {
		r.scores = make([][]float32, nw)
		r.flash = make([]kernels.FlashF16, nw)
		r.tiled = make([]kernels.FlashTiled, nw)
		r.q16 = make([][]float32, nw)
		r.rows = make([][]int32, nw)
		r.rowsKey = make([]rowsKey, nw)
		r.shQ, r.shOut, r.shN = make([][][]float32, nw), make([][][]float32, nw), make([][]int, nw)
		for w := range nw {
			r.shQ[w] = make([][]float32, 0, kernels.AttnSharedMax)
			r.shOut[w] = make([][]float32, 0, kernels.AttnSharedMax)
			r.shN[w] = make([]int, 0, kernels.AttnSharedMax)
		}
	}
	for w := range r.scores {
		if cap(r.rows[w]) < ctx {
			r.rows[w] = make([]int32, ctx)
		}
		r.rows[w] = r.rows[w][:ctx]
		r.rowsKey[w] = rowsKey{}
		if m.kvF16 {
			r.q16[w] = grow(r.q16[w], 2*m.cfg.HeadDim) // two heads: attendF16Pair
		} else {
			// a shared unit's queries (sharedUnits) take a row of weights each
			r.scores[w] = grow(r.scores[w], kernels.AttnSharedMax*(ctx+m.cfg.HeadDim))
		}
	}
}
