package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Config is the shape of a decoder-only transformer, read from a Hugging Face config.json or
// from GGUF metadata. Field names follow config.json.
type Config struct {
	Architecture     string // Arch.ModelType: "llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "mixtral"
	VocabSize        int
	HiddenSize       int
	IntermediateSize int
	NumLayers        int
	NumHeads         int
	NumKVHeads       int
	HeadDim          int // Qwen3 sets it apart from HiddenSize/NumHeads
	MaxPositions     int
	RMSNormEps       float64
	RopeTheta        float64
	RopeScaling      *RopeScaling
	TieEmbeddings    bool
	AttentionBias    bool // q/k/v projections carry a bias (always for Qwen2)
	SlidingWindow    int  // Mistral: attend to at most this many positions; 0 = no window
	BOS, EOS         []int

	// Mixture of experts (Arch.MoE): every layer's MLP is NumExperts SwiGLU experts of
	// ExpertSize, of which a router picks ExpertsPerTok per token. The router's weights are
	// the softmax over all experts of the picked ones, renormalized to sum 1 when
	// NormTopKProb (always for Mixtral: that is the softmax over the picked logits).
	NumExperts    int
	ExpertsPerTok int
	ExpertSize    int // Qwen3-MoE moe_intermediate_size; Mixtral intermediate_size
	NormTopKProb  bool
}

// MoE reports whether c's MLPs are mixtures of experts.
func (c *Config) MoE() bool { return c.NumExperts > 0 }

// RopeScaling stretches rotary frequencies for long contexts. Type "linear" divides every
// frequency by Factor; "llama3" divides only the low frequencies, blending in between
// (Llama 3.1/3.2). FreqFactors, when set (GGUF's rope_freqs tensor), divides frequency i
// by FreqFactors[i] instead.
type RopeScaling struct {
	Type                 string
	Factor               float64
	LowFreqFactor        float64
	HighFreqFactor       float64
	OriginalMaxPositions int
	FreqFactors          []float32
}

// HFConfig is a Hugging Face config.json as written, before defaults: the one reader of that
// file, which model, convert, cost and the CLI share. Config turns it into a shape tokenwise
// runs; the mixture-of-experts fields are read by Config for the MoE rows of the table, and
// by the cost model, which also prices MoE models tokenwise does not run (shared experts,
// DeepSeek's).
type HFConfig struct {
	ModelType             string          `json:"model_type"`
	Architectures         []string        `json:"architectures,omitempty"`
	VocabSize             int             `json:"vocab_size"`
	HiddenSize            int             `json:"hidden_size"`
	IntermediateSize      int             `json:"intermediate_size"`
	NumHiddenLayers       int             `json:"num_hidden_layers"`
	NumAttentionHeads     int             `json:"num_attention_heads"`
	NumKeyValueHeads      int             `json:"num_key_value_heads"`
	HeadDim               int             `json:"head_dim,omitempty"`
	MaxPositionEmbeddings int             `json:"max_position_embeddings"`
	RMSNormEps            float64         `json:"rms_norm_eps"`
	RopeTheta             float64         `json:"rope_theta"`
	RopeScaling           json.RawMessage `json:"rope_scaling"`
	TieWordEmbeddings     *bool           `json:"tie_word_embeddings,omitempty"`
	AttentionBias         bool            `json:"attention_bias"`
	MLPBias               bool            `json:"mlp_bias"`
	HiddenAct             string          `json:"hidden_act,omitempty"`
	SlidingWindow         *int            `json:"sliding_window,omitempty"`
	UseSlidingWindow      *bool           `json:"use_sliding_window,omitempty"`
	PartialRotaryFactor   *float64        `json:"partial_rotary_factor,omitempty"`
	TorchDType            string          `json:"torch_dtype,omitempty"`
	BOSTokenID            json.RawMessage `json:"bos_token_id,omitempty"`
	EOSTokenID            json.RawMessage `json:"eos_token_id,omitempty"`
	PadTokenID            json.RawMessage `json:"pad_token_id,omitempty"`

	// Mixture of experts, spelled several ways: Qwen-MoE num_experts, Mixtral
	// num_local_experts, DeepSeek n_routed_experts.
	NumExperts          int   `json:"num_experts,omitempty"`
	NumLocalExperts     int   `json:"num_local_experts,omitempty"`
	NRoutedExperts      int   `json:"n_routed_experts,omitempty"`
	NumExpertsPerTok    int   `json:"num_experts_per_tok,omitempty"`
	MoEIntermediateSize int   `json:"moe_intermediate_size,omitempty"`
	SharedExpertSize    int   `json:"shared_expert_intermediate_size,omitempty"`
	NSharedExperts      int   `json:"n_shared_experts,omitempty"`
	FirstKDenseReplace  int   `json:"first_k_dense_replace,omitempty"`
	DecoderSparseStep   int   `json:"decoder_sparse_step,omitempty"`
	NormTopKProb        *bool `json:"norm_topk_prob,omitempty"`
	MLPOnlyLayers       []int `json:"mlp_only_layers,omitempty"`
}

// ParseHFConfig decodes config.json bytes; it checks the JSON only (Config checks the shape).
func ParseHFConfig(data []byte) (*HFConfig, error) {
	var h HFConfig
	if err := json.Unmarshal(data, &h); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, fmt.Errorf("%s: %s where config.json wants %v", te.Field, te.Value, te.Type)
		}
		return nil, err
	}
	return &h, nil
}

// Arch returns the architecture config.json names: its model_type, else its architectures.
func (h *HFConfig) Arch() (*Arch, error) {
	if h.ModelType == "" && len(h.Architectures) > 0 {
		return ArchByHFClass(h.Architectures[0])
	}
	return LookupArch(h.ModelType)
}

// ReadConfig reads a Hugging Face config.json (or the folder holding one). A
// generation_config.json next to it adds its eos_token_id to EOS, as transformers'
// generate() does.
func ReadConfig(path string) (*Config, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "config.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	gen := filepath.Join(filepath.Dir(path), "generation_config.json")
	if data, err := os.ReadFile(gen); err == nil {
		var g struct {
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if err := json.Unmarshal(data, &g); err != nil {
			return nil, fmt.Errorf("%s: %w", gen, err)
		}
		ids, err := TokenIDs(g.EOS)
		if err != nil {
			return nil, fmt.Errorf("%s: eos_token_id: %w", gen, err)
		}
		for _, id := range ids {
			if !contains(c.EOS, id) {
				c.EOS = append(c.EOS, id)
			}
		}
	}
	return c, nil
}

// ParseConfig parses config.json bytes into a shape tokenwise runs.
func ParseConfig(data []byte) (*Config, error) {
	h, err := ParseHFConfig(data)
	if err != nil {
		return nil, err
	}
	return h.Config()
}

// Config fills in the defaults of h's architecture and checks that tokenwise runs the result.
func (h *HFConfig) Config() (*Config, error) {
	a, err := h.Arch()
	if err != nil {
		return nil, err
	}
	c := &Config{
		Architecture:     a.ModelType,
		VocabSize:        h.VocabSize,
		HiddenSize:       h.HiddenSize,
		IntermediateSize: h.IntermediateSize,
		NumLayers:        h.NumHiddenLayers,
		NumHeads:         h.NumAttentionHeads,
		NumKVHeads:       h.NumKeyValueHeads,
		HeadDim:          h.HeadDim,
		MaxPositions:     h.MaxPositionEmbeddings,
		RMSNormEps:       h.RMSNormEps,
		RopeTheta:        h.RopeTheta,
		AttentionBias:    h.AttentionBias || a.QKVBias,
		TieEmbeddings:    a.TieEmbeddings,
	}
	if h.TieWordEmbeddings != nil {
		c.TieEmbeddings = *h.TieWordEmbeddings
	}
	if c.NumKVHeads == 0 {
		c.NumKVHeads = c.NumHeads
	}
	if c.HeadDim == 0 && c.NumHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumHeads
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	if h.HiddenAct != "" && h.HiddenAct != "silu" {
		return nil, fmt.Errorf("hidden_act %q: not supported (only silu)", h.HiddenAct)
	}
	if h.MLPBias {
		return nil, errors.New("mlp_bias: not supported")
	}
	if h.PartialRotaryFactor != nil && *h.PartialRotaryFactor != 1 {
		return nil, fmt.Errorf("partial_rotary_factor %g: not supported", *h.PartialRotaryFactor)
	}
	if h.SlidingWindow != nil && *h.SlidingWindow > 0 {
		switch {
		case a.SlidingWindow:
			c.SlidingWindow = *h.SlidingWindow
		case h.UseSlidingWindow != nil && *h.UseSlidingWindow:
			return nil, fmt.Errorf("use_sliding_window with sliding_window %d: not supported for %s", *h.SlidingWindow, a.ModelType)
		}
	}
	if len(h.RopeScaling) > 0 && string(h.RopeScaling) != "null" {
		rs, err := parseRopeScaling(h.RopeScaling)
		if err != nil {
			return nil, fmt.Errorf("rope_scaling: %w", err)
		}
		c.RopeScaling = rs
	}
	if err := h.experts(a, c); err != nil {
		return nil, err
	}
	if c.BOS, err = TokenIDs(h.BOSTokenID); err != nil {
		return nil, fmt.Errorf("bos_token_id: %w", err)
	}
	if c.EOS, err = TokenIDs(h.EOSTokenID); err != nil {
		return nil, fmt.Errorf("eos_token_id: %w", err)
	}
	return c, c.Validate()
}

// experts reads the mixture-of-experts fields of a's config class into c, and rejects the
// layouts tokenwise does not run: shared experts (Qwen2-MoE, DeepSeek; neither Qwen3-MoE nor
// Mixtral has them) and dense layers among the sparse ones (Qwen3-MoE's mlp_only_layers and
// decoder_sparse_step, which the published Qwen3-MoE checkpoints leave at [] and 1).
func (h *HFConfig) experts(a *Arch, c *Config) error {
	e := max(h.NumExperts, h.NumLocalExperts, h.NRoutedExperts)
	if !a.MoE {
		if e > 0 {
			return fmt.Errorf("%s with %d experts: %s is a dense architecture (mixtures of experts: %s)", a.ModelType, e, a.ModelType, archList(func(a *Arch) string {
				if a.MoE {
					return a.ModelType
				}
				return ""
			}))
		}
		return nil
	}
	c.NumExperts, c.ExpertsPerTok = e, h.NumExpertsPerTok
	switch a.ModelType {
	case "mixtral":
		c.ExpertSize, c.NormTopKProb = h.IntermediateSize, true
		if c.ExpertsPerTok == 0 {
			c.ExpertsPerTok = 2 // MixtralConfig's default
		}
	default: // qwen3_moe
		c.ExpertSize = h.MoEIntermediateSize
		c.NormTopKProb = h.NormTopKProb != nil && *h.NormTopKProb // Qwen3MoeConfig: False
		if len(h.MLPOnlyLayers) > 0 {
			return fmt.Errorf("mlp_only_layers %v: dense layers among the expert layers are not supported", h.MLPOnlyLayers)
		}
		if h.DecoderSparseStep > 1 {
			return fmt.Errorf("decoder_sparse_step %d: dense layers among the expert layers are not supported (want 1)", h.DecoderSparseStep)
		}
	}
	if h.SharedExpertSize > 0 || h.NSharedExperts > 0 {
		return fmt.Errorf("shared experts: not supported (%s has none)", a.ModelType)
	}
	return nil
}

func parseRopeScaling(raw json.RawMessage) (*RopeScaling, error) {
	var r struct {
		Type           string  `json:"type"`
		RopeType       string  `json:"rope_type"`
		Factor         float64 `json:"factor"`
		LowFreqFactor  float64 `json:"low_freq_factor"`
		HighFreqFactor float64 `json:"high_freq_factor"`
		OrigMax        int     `json:"original_max_position_embeddings"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	t := r.RopeType
	if t == "" {
		t = r.Type
	}
	rs := &RopeScaling{Type: t, Factor: r.Factor, LowFreqFactor: r.LowFreqFactor, HighFreqFactor: r.HighFreqFactor, OriginalMaxPositions: r.OrigMax}
	switch t {
	case "default":
		return nil, nil
	case "linear":
		if r.Factor <= 0 {
			return nil, fmt.Errorf("linear: factor %g must be positive", r.Factor)
		}
	case "llama3":
		if r.Factor <= 0 || r.LowFreqFactor <= 0 || r.HighFreqFactor <= r.LowFreqFactor || r.OrigMax <= 0 {
			return nil, fmt.Errorf("llama3: need factor > 0, 0 < low_freq_factor < high_freq_factor, original_max_position_embeddings > 0; have %s", raw)
		}
	default:
		return nil, fmt.Errorf("type %q: not supported (linear, llama3)", t)
	}
	return rs, nil
}

// TokenIDs reads a token id field that config files write as null, a number or a list.
func TokenIDs(raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("%s: want an integer or a list of integers", raw)
	}
	return many, nil
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Validate checks that the shape is complete and consistent.
func (c *Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumLayers}, {"num_attention_heads", c.NumHeads}, {"num_key_value_heads", c.NumKVHeads},
		{"head_dim", c.HeadDim}, {"max_position_embeddings", c.MaxPositions},
	} {
		if f.v <= 0 {
			return fmt.Errorf("%s = %d: must be positive", f.name, f.v)
		}
	}
	if c.NumHeads%c.NumKVHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumHeads, c.NumKVHeads)
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("head_dim %d: rotary embeddings need an even head size", c.HeadDim)
	}
	a, err := LookupArch(c.Architecture)
	if err != nil {
		return err
	}
	if a.MoE {
		switch {
		case c.NumExperts <= 0:
			return fmt.Errorf("%s: the number of experts (num_experts / num_local_experts) = %d: must be positive", a.ModelType, c.NumExperts)
		case c.ExpertsPerTok <= 0 || c.ExpertsPerTok > c.NumExperts:
			return fmt.Errorf("num_experts_per_tok = %d: must be between 1 and the %d experts", c.ExpertsPerTok, c.NumExperts)
		case c.ExpertSize <= 0:
			return fmt.Errorf("%s: the experts' intermediate size = %d: must be positive", a.ModelType, c.ExpertSize)
		}
	} else if c.NumExperts != 0 {
		return fmt.Errorf("%s: a dense architecture with %d experts", a.ModelType, c.NumExperts)
	}
	return nil
}
