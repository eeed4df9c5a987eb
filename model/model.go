// Package model runs decoder-only transformers (Llama, Mistral, Qwen2, Qwen3) from Hugging
// Face safetensors folders and GGUF files.
//
// A forward pass has two phases. Prefill takes the whole prompt at once: every projection is
// a matrix×matrix product, so each weight read from memory serves all prompt tokens
// (compute-bound). Decode takes one token: every projection is a matrix×vector product
// that reads all weights for a single token (memory-bound). Both run the same layer code
// over a batch of n tokens; each Sequence owns its KV cache.
//
// Each architecture is one file (llama.go, qwen2.go, ...) that lists its weights and reads
// like its block diagram; the building blocks are in layers.go, the kernels in package kernels.
package model

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/tensor"
)

// Options tune how a model runs.
type Options struct {
	Threads int // worker threads for the kernels; <= 0 means one per CPU
	// KVCache is the dtype of cached keys and values: tensor.F32 (the zero value, the
	// default) or tensor.F16, which halves the cache and computes attention the way
	// llama.cpp does with its default f16 cache (kernels.FlashF16).
	KVCache tensor.DType
	// Mmap maps the checkpoint's pages from the page cache, as llama.cpp does by default:
	// quick to load and shared between processes. Without it the weights are read into
	// memory the kernel may back with huge pages, which decode streams faster (~8% on
	// Qwen3-0.6B f16 here; see mmapfile.Read), at the cost of a copy at load.
	Mmap bool
}

// ParseKVDType reads a --kv-cache-dtype value: "f32" or "f16".
func ParseKVDType(s string) (tensor.DType, error) {
	switch strings.ToLower(s) {
	case "f32", "":
		return tensor.F32, nil
	case "f16":
		return tensor.F16, nil
	}
	return 0, fmt.Errorf("kv cache dtype %q: want f32 or f16", s)
}

// Model is a loaded model. Its weights alias the memory-mapped file. Forward passes of
// different sequences are serialized: they share the activation buffers and the workers.
type Model struct {
	cfg    *Config
	embed  kernels.Mat
	norm   norm
	head   kernels.Mat // the embedding matrix when embeddings are tied
	layers []layer

	rope            kernels.Rope
	ropeInterleaved bool // GGUF llama: Q/K rows were permuted by the converter
	kvF16           bool // keys and values cached in half precision (Options.KVCache)

	chunk   int // most tokens per batched pass (prefillChunk)
	pool    *kernels.Pool
	scratch *kernels.Scratch
	closer  io.Closer

	mu  sync.Mutex
	run run
	// spare is the cache memory of the last released sequence, for the next one (under mu).
	spare kvMem
}

// kvMem is a sequence's cache memory: one allocation for the keys of every layer and one
// for the values, in float32 or (Options.KVCache f16) in half precision.
type kvMem struct {
	k, v     []float32
	k16, v16 []uint16
}

func (c kvMem) bytes() int { return 4*cap(c.k) + 2*cap(c.k16) }

// layer is one decoder block of some architecture.
type layer interface {
	forward(r *run, index int)
	linears() []linear // its projections, for accounting
}

// loader binds one architecture's layers.
type loader func(b *binder) []layer

var architectures = map[string]loader{}

// register adds an architecture under its config.json model_type.
func register(name string, l loader) { architectures[name] = l }

// Load opens a Hugging Face folder (config.json + safetensors) or a .gguf file.
func Load(path string, opts Options) (*Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		if strings.HasSuffix(strings.ToLower(path), ".gguf") {
			return loadGGUF(path, opts)
		}
		return nil, fmt.Errorf("%s: not a model folder or a .gguf file", path)
	}
	cfg, err := ReadConfig(path)
	if err != nil {
		return nil, err
	}
	openModel := safetensors.OpenModelResident
	if opts.Mmap {
		openModel = safetensors.OpenModel
	}
	st2, err := openModel(path)
	if err != nil {
		return nil, err
	}
	m, err := build(cfg, st2, hfNames, false, opts)
	if err != nil {
		st2.Close()
		return nil, fmt.Errorf("%s: %w", filepath.Join(path, "model.safetensors"), err)
	}
	m.closer = st2
	return m, nil
}

// build binds every weight of cfg's architecture from src and prepares the runtime.
func build(cfg *Config, src source, names naming, interleaved bool, opts Options) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &binder{src: src, names: names, cfg: cfg}
	m := &Model{cfg: cfg, ropeInterleaved: interleaved}
	m.embed = b.matrix(names.global("model.embed_tokens"), cfg.VocabSize, cfg.HiddenSize)
	m.norm = norm{w: b.vector(names.global("model.norm"), cfg.HiddenSize, false), eps: cfg.RMSNormEps}
	if _, ok := src.Tensor(names.global("lm_head")); ok || !cfg.TieEmbeddings {
		m.head = b.matrix(names.global("lm_head"), cfg.VocabSize, cfg.HiddenSize)
	} else {
		m.head = m.embed
	}
	m.layers = architectures[cfg.Architecture](b)
	if b.err != nil {
		return nil, b.err
	}
	switch opts.KVCache {
	case tensor.F32:
	case tensor.F16:
		m.kvF16 = true
	default:
		return nil, fmt.Errorf("kv cache dtype %v: want f32 or f16", opts.KVCache)
	}
	var err error
	if m.rope, err = ropeTable(cfg); err != nil {
		return nil, err
	}
	m.chunk = prefillChunk
	m.pool = kernels.NewPool(opts.Threads)
	m.scratch = kernels.NewScratch(m.pool.Threads())
	return m, nil
}

// ropeTable returns the rotation of cfg in ggml's form (kernels.Rope): no scaling, a linear
// factor, or per-pair divisors (GGUF rope_freqs; for an HF llama3 config, the divisors its
// formula gives).
func ropeTable(cfg *Config) (kernels.Rope, error) {
	rs := cfg.RopeScaling
	switch {
	case rs == nil:
		return kernels.NewRope(cfg.HeadDim, cfg.RopeTheta, 1, nil), nil
	case rs.FreqFactors == nil && rs.Type == "linear":
		return kernels.NewRope(cfg.HeadDim, cfg.RopeTheta, 1/rs.Factor, nil), nil
	}
	f, err := ropeFreqs(cfg)
	if err != nil {
		return kernels.Rope{}, err
	}
	if rs.FreqFactors != nil {
		return kernels.NewRope(cfg.HeadDim, cfg.RopeTheta, 1, rs.FreqFactors), nil
	}
	base := kernels.RopeFreqs(cfg.HeadDim, cfg.RopeTheta)
	ff := make([]float32, len(f))
	for i := range f {
		ff[i] = float32(base[i] / f[i])
	}
	return kernels.NewRope(cfg.HeadDim, cfg.RopeTheta, 1, ff), nil
}

// ropeFreqs returns the rotary inverse frequencies after cfg's scaling.
func ropeFreqs(cfg *Config) ([]float64, error) {
	f := kernels.RopeFreqs(cfg.HeadDim, cfg.RopeTheta)
	rs := cfg.RopeScaling
	if rs == nil {
		return f, nil
	}
	if rs.FreqFactors != nil {
		if len(rs.FreqFactors) != len(f) {
			return nil, fmt.Errorf("rope frequency factors: %d values, want head_dim/2 = %d", len(rs.FreqFactors), len(f))
		}
		for i := range f {
			f[i] /= float64(rs.FreqFactors[i])
		}
		return f, nil
	}
	switch rs.Type {
	case "linear":
		for i := range f {
			f[i] /= rs.Factor
		}
	case "llama3":
		// Llama 3.1: wavelengths longer than the original context / low_freq_factor are
		// stretched by factor, shorter than context / high_freq_factor kept, blended between.
		orig := float64(rs.OriginalMaxPositions)
		lowWave, highWave := orig/rs.LowFreqFactor, orig/rs.HighFreqFactor
		for i, fr := range f {
			wave := 2 * math.Pi / fr
			switch {
			case wave < highWave:
			case wave > lowWave:
				f[i] = fr / rs.Factor
			default:
				s := (orig/wave - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
				f[i] = (1-s)*fr/rs.Factor + s*fr
			}
		}
	default:
		return nil, fmt.Errorf("rope scaling %q: not supported", rs.Type)
	}
	return f, nil
}

// KVBytesPerToken is the cache memory one token takes in this model's KV cache dtype.
func (m *Model) KVBytesPerToken() int {
	if m.kvF16 {
		return KVBytesPerTokenOf(m.cfg, tensor.F16)
	}
	return KVBytesPerTokenOf(m.cfg, tensor.F32)
}

// DecodeBytes is the number of weight bytes one decode step reads: every layer's
// projections and the LM head (the embedding contributes one row). Decode speed in tokens/s
// times this is the effective memory bandwidth.
func (m *Model) DecodeBytes() int64 {
	n := int64(len(m.head.Data)) + int64(len(m.embed.Data)/m.embed.Rows)
	for _, l := range m.linears() {
		n += int64(len(l.w.Data))
	}
	return n
}

// DecodeFLOPs is the number of floating-point operations of the weight products in one
// decode step (2 per weight); attention over the cache adds 4·layers·heads·head_dim per
// cached position.
func (m *Model) DecodeFLOPs() int64 {
	n := 2 * int64(m.head.Rows) * int64(m.head.Cols)
	for _, l := range m.linears() {
		n += 2 * int64(l.w.Rows) * int64(l.w.Cols)
	}
	return n
}

// linears lists every layer's projections, for accounting.
func (m *Model) linears() []linear {
	var out []linear
	for _, l := range m.layers {
		out = append(out, l.linears()...)
	}
	return out
}

// LMHead is the matrix the last hidden state is multiplied by for the logits (the
// embedding matrix when they are tied), for timing that product alone (cost.Bench): the
// model's own bytes, in the memory the model holds them in. Read-only.
func (m *Model) LMHead() *kernels.Mat { return &m.head }

// Config returns the model's shape.
func (m *Model) Config() *Config { return m.cfg }

// Close releases the workers and the file mapping.
func (m *Model) Close() error {
	m.pool.Close()
	if m.closer != nil {
		return m.closer.Close()
	}
	return nil
}

// Sequence is one conversation's state: the tokens seen so far, as keys and values per
// layer (float32, or f16 with Options.KVCache; grown as tokens arrive up to the sequence's
// maximum length).
type Sequence struct {
	m        *Model
	maxLen   int
	n        int
	k, v     [][]float32 // per layer, slices of mem
	k16, v16 [][]uint16
	mem      kvMem
}

// NewSequence makes a sequence that holds up to maxLen tokens (<= 0 or beyond the model's
// context: the model's context, MaxPositions).
func (m *Model) NewSequence(maxLen int) *Sequence {
	if maxLen <= 0 || maxLen > m.cfg.MaxPositions {
		maxLen = m.cfg.MaxPositions
	}
	s := &Sequence{m: m, maxLen: maxLen}
	if m.kvF16 {
		s.k16, s.v16 = make([][]uint16, m.cfg.NumLayers), make([][]uint16, m.cfg.NumLayers)
	} else {
		s.k, s.v = make([][]float32, m.cfg.NumLayers), make([][]float32, m.cfg.NumLayers)
	}
	return s
}

// Len is the number of tokens in the sequence so far.
func (s *Sequence) Len() int { return s.n }

// MaxLen is the most tokens the sequence can hold.
func (s *Sequence) MaxLen() int { return s.maxLen }

// Reset empties the sequence, keeping its cache memory.
func (s *Sequence) Reset() { s.n = 0 }

// reserve grows the cache to hold n tokens: capacity doubles, so a long generation
// reallocates only a few times, and a short one never holds a full-context cache. Once n is
// at least half of maxLen it takes maxLen at once: the same bound (capacity at most twice
// the tokens held), without a later copy that holds the old and the new cache together
// (a 128-token prompt in a 137-token sequence would otherwise grow 128 -> 137 on its first
// decode step).
func (s *Sequence) reserve(n int) {
	kvDim := s.m.cfg.NumKVHeads * s.m.cfg.HeadDim
	have := 0
	if s.k16 != nil {
		have = len(s.k16[0])
	} else {
		have = len(s.k[0])
	}
	if have >= n*kvDim {
		return
	}
	c := min(max(n, 2*have/kvDim, 64), s.maxLen)
	if 2*n >= s.maxLen {
		c = s.maxLen
	}
	size, keep, spare := c*kvDim, s.n*kvDim, &s.m.spare
	if s.k16 != nil {
		s.mem.k16 = growKV(s.k16, size, keep, &spare.k16)
		s.mem.v16 = growKV(s.v16, size, keep, &spare.v16)
		return
	}
	s.mem.k = growKV(s.k, size, keep, &spare.k)
	s.mem.v = growKV(s.v, size, keep, &spare.v)
}

// growKV replaces each layer's cache with one of size elements, keeping the first keep,
// and returns the memory they share: spare when it is large enough (then spare is taken),
// else a new allocation. One allocation for all layers starts at most one collection, where
// one per layer would cross the collector's goal, and start a cycle, again and again.
func growKV[T float32 | uint16](layers [][]T, size, keep int, spare *[]T) []T {
	need := len(layers) * size
	var all []T
	if cap(*spare) >= need {
		all = (*spare)[:need]
		*spare = nil
		clear(all) // as a new allocation: no stale keys or values of another sequence
	} else {
		all = make([]T, need)
	}
	for l := range layers {
		b := all[l*size : (l+1)*size : (l+1)*size]
		copy(b, layers[l][:keep])
		layers[l] = b
	}
	return all
}

// Release ends the sequence and keeps its cache memory for the model's next sequence (the
// larger of it and what the model already keeps): a loop of generations reuses one cache
// instead of allocating the next while the last one still waits for the collector (bench's
// peak RSS held both, +16 MB for Qwen3-0.6B). The sequence must not be used afterwards;
// Prefill and Decode on it return an error.
func (s *Sequence) Release() {
	m := s.m
	if m == nil {
		return
	}
	m.mu.Lock()
	if s.mem.bytes() > m.spare.bytes() {
		m.spare = s.mem
	}
	m.mu.Unlock()
	*s = Sequence{maxLen: s.maxLen}
}

// Prefill appends the prompt ids to the sequence in one batched pass and returns the
// logits of the last position only (the rest would be discarded).
func (m *Model) Prefill(s *Sequence, ids []int) ([]float32, error) {
	return m.PrefillInto(nil, s, ids)
}

// Decode appends one token and returns the logits for the next.
func (m *Model) Decode(s *Sequence, id int) ([]float32, error) {
	return m.DecodeInto(nil, s, id)
}

// PrefillInto is Prefill writing the logits into dst when its capacity holds the vocabulary (else
// into a new slice, which it returns). A generation loop that passes the same dst every
// step allocates no vocabulary-sized slice per token: 0.6 MB a step for a 150k vocabulary,
// garbage that would make the collector run, and the heap grow, all through decoding.
func (m *Model) PrefillInto(dst []float32, s *Sequence, ids []int) ([]float32, error) {
	if len(ids) == 0 {
		return nil, errors.New("prefill: no tokens")
	}
	return m.forward(dst, s, ids)
}

// DecodeInto is Decode writing the logits into dst as PrefillInto does.
func (m *Model) DecodeInto(dst []float32, s *Sequence, id int) ([]float32, error) {
	return m.forward(dst, s, []int{id})
}

// prefillChunk bounds the tokens of one batched pass: activations grow with it (a 4096-token
// prompt of a 4B model would need ~300 MB for the MLP alone), while the weights are already
// reused 512 times per read.
const prefillChunk = 512

// forward checks ids, runs them through every layer at positions s.Len()... in chunks, and
// returns the logits of the last one.
func (m *Model) forward(dst []float32, s *Sequence, ids []int) ([]float32, error) {
	if s.m == nil {
		return nil, errors.New("sequence released")
	}
	if s.m != m {
		return nil, errors.New("sequence belongs to another model")
	}
	c := m.cfg
	if s.n+len(ids) > s.maxLen {
		return nil, fmt.Errorf("%d tokens exceed the context: the sequence holds %d and has room for %d (max %d)", len(ids), s.n, s.maxLen-s.n, s.maxLen)
	}
	for i, id := range ids {
		if id < 0 || id >= c.VocabSize {
			return nil, fmt.Errorf("token %d at position %d: outside the vocabulary (size %d)", id, s.n+i, c.VocabSize)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s.reserve(s.n + len(ids))
	for len(ids) > m.chunk {
		m.pass(s, ids[:m.chunk])
		ids = ids[m.chunk:]
	}
	last := m.pass(s, ids)
	// Forget the sequence: the kept buffers must not keep its cache reachable once the
	// caller drops it (a new sequence's cache would otherwise be allocated beside it).
	m.run.s = nil
	h := m.run.h[:c.HiddenSize]
	kernels.RMSNormGGML(h, last, m.norm.w, m.norm.eps)
	logits := dst
	if cap(logits) < c.VocabSize {
		logits = make([]float32, c.VocabSize)
	}
	logits = logits[:c.VocabSize]
	kernels.MatVec(m.pool, logits, &m.head, h, m.scratch)
	return logits, nil
}

// pass runs ids through every layer, appends them to s, and returns the last token's
// hidden state.
func (m *Model) pass(s *Sequence, ids []int) []float32 {
	d := m.cfg.HiddenSize
	r := &m.run
	r.start(m, s, len(ids))
	for t, id := range ids {
		_ = m.embed.Row(id, r.x[t*d:(t+1)*d]) // Mat validated at load
	}
	for i, l := range m.layers {
		l.forward(r, i)
	}
	s.n += len(ids)
	return r.x[(r.n-1)*d : r.n*d]
}

// run holds one pass's activations. Buffers are kept between passes and grown as needed.
type run struct {
	m    *Model
	s    *Sequence
	n    int // tokens in this pass
	pos0 int // position of the first

	x                          []float32 // residual stream, n×hidden
	h, q, k, v, ctx, attnOut   []float32
	gate, up, mlpOut, cos, sin []float32
	scores                     [][]float32 // per worker, one row of attention weights
	flash                      []kernels.FlashF16
	tiled                      []kernels.FlashTiled
	q16                        [][]float32 // per worker, a query head rounded to f16
	rows                       [][]int32   // per worker, the cache rows of the attended positions
	rowsKey                    []rowsKey   // per worker, what rows holds
}

// rowsKey names the positions a worker's rows slice holds: first..last of one sequence's
// block table (a paged pass), so consecutive heads of one token reuse it.
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

func (r *run) start(m *Model, s *Sequence, n int) {
	c := m.cfg
	r.m, r.s, r.n, r.pos0 = m, s, n, s.n
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
	for t := range n {
		m.rope.Angles(r.cos[t*half:(t+1)*half], r.sin[t*half:(t+1)*half], s.n+t)
	}
	r.workers(m, s.n+n)
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
	}
	for w := range r.scores {
		if m.kvF16 {
			r.q16[w] = grow(r.q16[w], m.cfg.HeadDim)
			if cap(r.rows[w]) < ctx {
				r.rows[w] = make([]int32, ctx)
			}
			r.rows[w] = r.rows[w][:ctx]
			r.rowsKey[w] = rowsKey{}
		} else {
			r.scores[w] = grow(r.scores[w], ctx)
		}
	}
}
