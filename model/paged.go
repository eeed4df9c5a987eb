package model

import (
	"errors"
	"fmt"
	"slices"

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
	kv        kvStore // per layer: numBlocks × blockSize rows, slices of mem
	mem       kvMem

	run    run
	chunks []passChunk
	out    [][]float32
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
	c := m.cfg
	kvDim := c.NumKVHeads * c.HeadDim
	pc := &PagedCache{m: m, blockSize: blockSize, numBlocks: numBlocks}
	size := numBlocks * blockSize * kvDim
	// One allocation for the keys of all layers and one for the values, taken from the
	// memory the model keeps of the last released cache when it is large enough (as a
	// Sequence's): a loop of generations, each with its own cache, reuses one.
	m.mu.Lock()
	spare := &m.spare
	if m.kvF16 {
		pc.kv.k16, pc.kv.v16 = make([][]uint16, c.NumLayers), make([][]uint16, c.NumLayers)
		pc.mem.k16 = growKV(pc.kv.k16, size, 0, &spare.k16)
		pc.mem.v16 = growKV(pc.kv.v16, size, 0, &spare.v16)
	} else {
		pc.kv.k, pc.kv.v = make([][]float32, c.NumLayers), make([][]float32, c.NumLayers)
		pc.mem.k = growKV(pc.kv.k, size, 0, &spare.k)
		pc.mem.v = growKV(pc.kv.v, size, 0, &spare.v)
	}
	m.mu.Unlock()
	return pc, nil
}

// Release gives the cache's memory to the model for its next cache or sequence (the
// larger of it and what the model already keeps). The cache must not be used afterwards.
func (c *PagedCache) Release() {
	if c.m != nil {
		c.m.keepSpare(c.mem)
	}
	*c = PagedCache{}
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
	// Logits asks for the logits of the chunk's last token; LogitsAt for those of the
	// tokens at these offsets into Tokens (ascending), e.g. the drafted tokens of a
	// speculative step and the one before them.
	Logits   bool
	LogitsAt []int
	// Allowed, when set, holds one entry per logits row the chunk asks for (in the order
	// the rows come back): nil for the whole vocabulary, else the token ids (ascending)
	// whose logits that row needs, the others coming back as -Inf. A grammar that allows a
	// few tokens at a position says so, and the LM head computes only those rows (each with
	// the bits the whole product gives it: kernels.MatVecSubset).
	Allowed [][]int32
	// Prompt is the length of the sequence's prompt (0: not given). With it, in the
	// batch-invariant mode (kernels.BatchInvariant), how each token's attention is computed
	// over an f16 cache depends on its position and Prompt alone, not on how the sequence's
	// tokens were cut into chunks nor on what else the pass holds (see attendsTiled).
	Prompt int
}

// Forward runs one batched pass and returns, for each chunk, the logits it asked for:
// LogitsAt's rows in order, then the last token's (with Logits, unless LogitsAt ends with
// it), each row vocabulary-sized, one after the other (nil for a chunk that asked for
// none). The logits are valid until the next Forward: only the asked-for rows go through the
// LM head, and they are not copied.
func (c *PagedCache) Forward(chunks []Chunk) ([][]float32, error) {
	m := c.m
	cfg := m.cfg
	n := 0
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
		for j, o := range ch.LogitsAt {
			if o < 0 || o >= len(ch.Tokens) || (j > 0 && o <= ch.LogitsAt[j-1]) {
				return nil, fmt.Errorf("paged forward: chunk %d: logits at offset %d: want ascending offsets into its %d tokens", i, o, len(ch.Tokens))
			}
		}
		if ch.Allowed != nil {
			want := len(ch.LogitsAt)
			if ch.Logits && (want == 0 || ch.LogitsAt[want-1] != len(ch.Tokens)-1) {
				want++
			}
			if len(ch.Allowed) != want {
				return nil, fmt.Errorf("paged forward: chunk %d: %d allowed-token lists for %d logits rows", i, len(ch.Allowed), want)
			}
			for j, ids := range ch.Allowed {
				for k, id := range ids {
					if id < 0 || int(id) >= cfg.VocabSize || (k > 0 && id <= ids[k-1]) {
						return nil, fmt.Errorf("paged forward: chunk %d: logits row %d: allowed token %d: want ascending ids inside the vocabulary (%d)", i, j, id, cfg.VocabSize)
					}
				}
			}
		}
		n += len(ch.Tokens)
	}
	if n == 0 {
		return nil, errors.New("paged forward: empty batch")
	}

	m.mu.Lock() // the pool and scratch are shared with Prefill/Decode
	defer m.mu.Unlock()
	c.chunks = c.chunks[:0]
	for _, ch := range chunks {
		c.chunks = append(c.chunks, passChunk{tokens: ch.Tokens, start: ch.Start,
			kv: kvView{store: &c.kv, blocks: ch.Blocks, bs: c.blockSize}, at: ch.LogitsAt, last: ch.Logits, prompt: ch.Prompt, allowed: ch.Allowed})
	}
	r := &c.run
	m.pass(r, c.chunks)
	logits := m.logits(r, nil)
	c.out = c.out[:0]
	row := 0
	for i := range c.chunks {
		k := c.chunks[i].numLogits()
		if k == 0 {
			c.out = append(c.out, nil)
			continue
		}
		c.out = append(c.out, logits[row*cfg.VocabSize:(row+k)*cfg.VocabSize])
		row += k
	}
	r.forget()
	return slices.Clone(c.out), nil
}
