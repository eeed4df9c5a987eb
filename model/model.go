// Package model runs decoder-only transformers (Llama, Mistral, Qwen2, Qwen3, and the
// mixtures of experts Qwen3-MoE and Mixtral) from Hugging Face safetensors folders and GGUF
// files.
//
// A forward pass has two phases. Prefill takes the whole prompt at once: every projection is
// a matrix×matrix product, so each weight read from memory serves all prompt tokens
// (compute-bound). Decode takes one token: every projection is a matrix×vector product
// that reads all weights for a single token (memory-bound). Both run the same layer code
// over a batch of n tokens; each Sequence owns its KV cache.
//
// The architectures are rows of one table (arch.go): their names in config.json and GGUF and
// the flags that set them apart. A decoder block is one file that lists its weights and reads
// like its block diagram (llama.go, shared by the four dense ones; qwen3moe.go and mixtral.go,
// Llama's block with the mixture of experts of moe.go for its MLP); the building blocks are in
// layers.go, the kernels in package kernels.
package model

import (
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
	// solo are one-thread pools, one per worker of pool, for a mixture of experts whose
	// workers take whole experts (moe.go); nil for a dense model.
	solo        []*kernels.Pool
	soloScratch []*kernels.Scratch
	closer      io.Closer

	mu      sync.Mutex
	run     run
	routing func(layer int, experts []int32) // ObserveRouting's (under mu)
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
	active() []linear  // those one token's step reads (a mixture of experts: router and k experts)
}

// loader binds one architecture's layers.
type loader func(b *binder) []layer

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
	b := &binder{src: src, names: names, cfg: cfg, arch: cfg.Arch()}
	m := &Model{cfg: cfg, ropeInterleaved: interleaved}
	m.embed = b.matrix(names.global("model.embed_tokens"), cfg.VocabSize, cfg.HiddenSize)
	m.norm = norm{w: b.vector(names.global("model.norm"), cfg.HiddenSize, false), eps: cfg.RMSNormEps}
	if _, ok := src.Tensor(names.global("lm_head")); ok || !cfg.TieEmbeddings {
		m.head = b.matrix(names.global("lm_head"), cfg.VocabSize, cfg.HiddenSize)
	} else {
		// Tied: llama.cpp loads the table a second time as the output matrix, into its AMX
		// buffer (the first copy, read by get_rows, stays out of it), so under GGMLAMX the
		// head takes the AMX arithmetic like the other matrices.
		m.head = m.embed
	}
	load := b.arch.blocks
	if load == nil {
		load = loadBlocks
	}
	m.layers = load(b)
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
	if cfg.MoE() {
		for range m.pool.Threads() {
			m.solo = append(m.solo, kernels.NewPool(1))
			m.soloScratch = append(m.soloScratch, kernels.NewScratch(1))
		}
	}
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

// DecodeBytes is the number of weight bytes one decode step of one sequence reads: every
// layer's projections (of a mixture of experts, the router and the k experts the token
// picks) and the LM head (the embedding contributes one row). Decode speed in tokens/s times
// this is the effective memory bandwidth.
func (m *Model) DecodeBytes() int64 {
	n := int64(len(m.head.Data)) + int64(len(m.embed.Data)/m.embed.Rows)
	for _, l := range m.active() {
		n += int64(len(l.w.Data))
	}
	return n
}

// DecodeFLOPs is the number of floating-point operations of the weight products in one
// decode step (2 per weight read, DecodeBytes' weights); attention over the cache adds
// 4·layers·heads·head_dim per cached position.
func (m *Model) DecodeFLOPs() int64 {
	n := 2 * int64(m.head.Rows) * int64(m.head.Cols)
	for _, l := range m.active() {
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

// active lists the projections one decode step reads.
func (m *Model) active() []linear {
	var out []linear
	for _, l := range m.layers {
		out = append(out, l.active()...)
	}
	return out
}

// Warm runs one token through the model on a cache of its own, so that what the model
// prepares on first use is done now and not in the first request's prefill: under
// llama.cpp's AMX arithmetic, every quantized matrix's repack (kernels), whose first
// one-token prefill took 1.4 s for Qwen3-0.6B Q4_K_M and ~3 s for Llama-3.2-1B Q6_K on
// two cores. serve warms before it answers, generate before it times the prefill.
func (m *Model) Warm() error {
	pc, err := m.NewPagedCache(1, 16)
	if err != nil {
		return err
	}
	defer pc.Release()
	_, err = pc.Forward([]Chunk{{Tokens: []int{0}, Blocks: []int{0}, Logits: true}})
	return err
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
	for _, p := range m.solo {
		p.Close()
	}
	if m.closer != nil {
		return m.closer.Close()
	}
	return nil
}
