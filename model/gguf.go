package model

import (
	"fmt"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/tensor"
)

func loadGGUF(path string, opts Options) (*Model, error) {
	open := gguf.OpenResident
	if opts.Mmap {
		open = gguf.Open
	}
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	cfg, interleaved, err := ConfigFromGGUF(f)
	if err == nil {
		var m *Model
		if m, err = build(cfg, f, ggufNames, interleaved, opts); err == nil {
			// The weights are bound and the config read: the file stays mapped for its
			// tensor data only (its tokenizer, if wanted, is read through another Open).
			f.DropMetadata()
			m.closer = f
			return m, nil
		}
	}
	f.Close()
	return nil, fmt.Errorf("%s: %w", path, err)
}

// ConfigFromGGUF reads the model shape from GGUF metadata (the keys llama.cpp's converter
// writes: llama.embedding_length, qwen3.attention.head_count_kv, ...). interleaved reports
// whether Q/K rows are in llama.cpp's permuted order (Arch.GGUFPermutesQK).
func ConfigFromGGUF(f *gguf.File) (cfg *Config, interleaved bool, err error) {
	m := ggufMeta{f: f}
	name := m.str("general.architecture", "")
	experts := m.int(name+".expert_count", 0)
	a, err := archByGGUF(name, experts > 0)
	if err != nil {
		if m.err != nil {
			return nil, false, m.err
		}
		return nil, false, err
	}
	p := name + "."
	c := &Config{
		Architecture:     a.ModelType,
		HiddenSize:       m.int(p+"embedding_length", -1),
		IntermediateSize: m.int(p+"feed_forward_length", -1),
		NumLayers:        m.int(p+"block_count", -1),
		NumHeads:         m.int(p+"attention.head_count", -1),
		MaxPositions:     m.int(p+"context_length", -1),
		RMSNormEps:       m.float(p+"attention.layer_norm_rms_epsilon", -1),
		RopeTheta:        m.float(p+"rope.freq_base", 10000),
		AttentionBias:    a.QKVBias,
	}
	if a.MoE {
		// llama.cpp's qwen3moe and llama graphs renormalize the picked experts' weights
		// (build_moe_ffn with norm_w): Qwen3-MoE's norm_topk_prob, Mixtral's own routing.
		c.NumExperts, c.NormTopKProb = experts, true
		c.ExpertsPerTok = m.int(p+"expert_used_count", -1)
		c.ExpertSize = m.int(p+"expert_feed_forward_length", c.IntermediateSize)
		if s := m.float(p+"expert_weights_scale", 1); s != 1 && s != 0 {
			m.fail(fmt.Errorf("%sexpert_weights_scale %g: not supported", p, s))
		}
		if n := m.int(p+"expert_shared_count", 0); n > 0 {
			m.fail(fmt.Errorf("%sexpert_shared_count %d: shared experts are not supported", p, n))
		}
	} else if experts > 0 {
		m.fail(fmt.Errorf("%sexpert_count %d: %s has no mixture-of-experts form in tokenwise", p, experts, name))
	}
	c.NumKVHeads = m.int(p+"attention.head_count_kv", c.NumHeads)
	if c.NumHeads > 0 {
		c.HeadDim = m.int(p+"attention.key_length", c.HiddenSize/c.NumHeads)
	}
	if v := m.int(p+"attention.value_length", c.HeadDim); v != c.HeadDim {
		m.fail(fmt.Errorf("%sattention.value_length %d ≠ key_length %d: not supported", p, v, c.HeadDim))
	}
	if r := m.int(p+"rope.dimension_count", c.HeadDim); r != c.HeadDim {
		m.fail(fmt.Errorf("%srope.dimension_count %d ≠ head size %d: partial rotary embeddings are not supported", p, r, c.HeadDim))
	}
	// The vocabulary: explicit, else the embedding's rows.
	c.VocabSize = m.int(p+"vocab_size", 0)
	if emb, ok := f.Tensor("token_embd.weight"); c.VocabSize == 0 && ok && len(emb.Shape) == 2 {
		c.VocabSize = emb.Shape[0]
	}
	_, hasOutput := f.Tensor("output.weight")
	c.TieEmbeddings = !hasOutput
	if _, ok := f.Tensor("blk.0.attn_q.bias"); ok {
		c.AttentionBias = true
	}
	switch t := m.str(p+"rope.scaling.type", "none"); t {
	case "none":
	case "linear":
		c.RopeScaling = &RopeScaling{Type: "linear", Factor: m.float(p+"rope.scaling.factor", -1)}
		if c.RopeScaling.Factor <= 0 {
			m.fail(fmt.Errorf("%srope.scaling.factor %g: must be positive", p, c.RopeScaling.Factor))
		}
	default:
		m.fail(fmt.Errorf("%srope.scaling.type %q: not supported (linear)", p, t))
	}
	// Llama 3.1+ files carry their rope scaling as per-frequency divisors.
	if t, ok := f.Tensor("rope_freqs.weight"); ok {
		ff := make([]float32, t.NumElements())
		if err := tensor.Dequantize(t.DType, t.Data, ff); err != nil {
			m.fail(fmt.Errorf("rope_freqs.weight: %w", err))
		}
		if c.RopeScaling != nil {
			m.fail(fmt.Errorf("rope_freqs.weight together with %srope.scaling.type: not supported", p))
		}
		c.RopeScaling = &RopeScaling{Type: "freq_factors", FreqFactors: ff}
	}
	if _, ok := f.Get("tokenizer.ggml.bos_token_id"); ok {
		c.BOS = []int{m.int("tokenizer.ggml.bos_token_id", -1)}
	}
	for _, k := range []string{"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"} {
		if _, ok := f.Get(k); ok {
			if id := m.int(k, -1); !contains(c.EOS, id) {
				c.EOS = append(c.EOS, id)
			}
		}
	}
	if m.err != nil {
		return nil, false, m.err
	}
	if err := c.Validate(); err != nil {
		return nil, false, fmt.Errorf("GGUF metadata: %w", err)
	}
	return c, a.GGUFPermutesQK, nil
}

// ggufMeta reads metadata with defaults for absent keys, keeping the first error.
type ggufMeta struct {
	f   *gguf.File
	err error
}

func (m *ggufMeta) fail(err error) {
	if m.err == nil {
		m.err = err
	}
}

// get returns get(key) when the key is present, def when it is absent and def is not
// negative, and records an error otherwise.
func get[T int | float64 | string](m *ggufMeta, key string, def T, required bool, get func(string) (T, error)) T {
	if _, ok := m.f.Get(key); !ok {
		if required {
			m.fail(fmt.Errorf("metadata %q: missing", key))
		}
		return def
	}
	v, err := get(key)
	if err != nil {
		m.fail(err)
		return def
	}
	return v
}

// int reads an integer key; def < 0 means the key is required.
func (m *ggufMeta) int(key string, def int) int { return get(m, key, def, def < 0, m.f.GetInt) }

// float reads a float key; def < 0 means the key is required.
func (m *ggufMeta) float(key string, def float64) float64 {
	return get(m, key, def, def < 0, m.f.GetFloat)
}

func (m *ggufMeta) str(key, def string) string { return get(m, key, def, false, m.f.GetString) }
