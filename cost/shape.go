// Package cost is tokenwise's roofline model of serving a decoder-only transformer: how many
// FLOPs and bytes each phase moves (prefill: the whole prompt in one pass; decode: one token
// per sequence per step), how long that takes on a hardware profile, and what follows from
// it — the cost of an output token against an input token, the KV cache per sequence, the
// sequences that fit in memory, and a deployment plan when one device is not enough.
//
// The arithmetic is exact counting over the model's shape (shape.go, count.go); the only
// modelled quantities are the hardware rates (hardware.go), which for a CPU are measured by
// Calibrate through tokenwise's own kernels and for a GPU are public peaks times a documented
// efficiency.
package cost

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/model"
)

// Shape is what the cost model needs of a model: the sizes of every matrix. Unlike
// model.Config it also describes mixture-of-experts layouts tokenwise does not run (shared
// experts, leading dense layers) but can cost.
type Shape struct {
	Name             string `json:"name,omitempty"`
	Vocab            int    `json:"vocab_size"`
	Hidden           int    `json:"hidden_size"`
	Intermediate     int    `json:"intermediate_size"` // dense MLP width (dense layers of a MoE model too)
	Layers           int    `json:"num_layers"`
	Heads            int    `json:"num_heads"`
	KVHeads          int    `json:"num_kv_heads"`
	HeadDim          int    `json:"head_dim"`
	TiedEmbeddings   bool   `json:"tied_embeddings"`
	AttentionBias    bool   `json:"attention_bias,omitempty"`
	QKNorm           bool   `json:"qk_norm,omitempty"`
	MaxPositions     int    `json:"max_positions,omitempty"`
	TorchDType       string `json:"torch_dtype,omitempty"`
	Experts          int    `json:"num_experts,omitempty"`           // routed experts per MoE layer; 0 = dense
	ExpertsPerTok    int    `json:"num_experts_per_tok,omitempty"`   // routed experts each token uses
	MoEIntermediate  int    `json:"moe_intermediate_size,omitempty"` // width of one expert's MLP
	SharedExpertSize int    `json:"shared_expert_intermediate_size,omitempty"`
	DenseLayers      int    `json:"dense_layers,omitempty"` // leading layers with a dense MLP in a MoE model
}

// MoE reports whether the model routes tokens to experts.
func (s *Shape) MoE() bool { return s.Experts > 0 }

// Validate checks the sizes the counts depend on.
func (s *Shape) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", s.Vocab}, {"hidden_size", s.Hidden}, {"num_hidden_layers", s.Layers},
		{"num_attention_heads", s.Heads}, {"num_key_value_heads", s.KVHeads}, {"head_dim", s.HeadDim},
	} {
		if f.v <= 0 {
			return fmt.Errorf("%s = %d: must be positive", f.name, f.v)
		}
	}
	if s.MoE() {
		if s.ExpertsPerTok <= 0 || s.ExpertsPerTok > s.Experts {
			return fmt.Errorf("num_experts_per_tok = %d: must be in 1..num_experts (%d)", s.ExpertsPerTok, s.Experts)
		}
		if s.MoEIntermediate <= 0 {
			return fmt.Errorf("moe_intermediate_size = %d: must be positive", s.MoEIntermediate)
		}
		if s.DenseLayers > 0 && s.Intermediate <= 0 {
			return fmt.Errorf("intermediate_size = %d: dense layers need it", s.Intermediate)
		}
	} else if s.Intermediate <= 0 {
		return fmt.Errorf("intermediate_size = %d: must be positive", s.Intermediate)
	}
	return nil
}

// FromModelConfig converts a config tokenwise runs, dense or a mixture of experts.
func FromModelConfig(c *model.Config) *Shape {
	return &Shape{
		Name: c.Architecture, Vocab: c.VocabSize, Hidden: c.HiddenSize, Intermediate: c.IntermediateSize,
		Layers: c.NumLayers, Heads: c.NumHeads, KVHeads: c.NumKVHeads, HeadDim: c.HeadDim,
		TiedEmbeddings: c.TieEmbeddings, AttentionBias: c.AttentionBias, QKNorm: c.Arch() != nil && c.Arch().QKNorm,
		MaxPositions: c.MaxPositions,
		Experts:      c.NumExperts, ExpertsPerTok: c.ExpertsPerTok, MoEIntermediate: c.ExpertSize,
	}
}

// ParseConfigJSON reads a Hugging Face config.json, dense or MoE. Architectures tokenwise runs
// (qwen3_moe and mixtral among them) take their flags and defaults from model's table; a MoE
// variant without a row (qwen2_moe) takes those of its dense base; others have no flags
// beyond config.json's.
func ParseConfigJSON(data []byte) (*Shape, error) {
	h, err := model.ParseHFConfig(data)
	if err != nil {
		return nil, err
	}
	a, err := model.LookupArch(h.ModelType)
	if err != nil {
		a, err = model.LookupArch(strings.TrimSuffix(h.ModelType, "_moe"))
	}
	if err != nil {
		a = &model.Arch{}
	}
	s := &Shape{
		Name: h.ModelType, Vocab: h.VocabSize, Hidden: h.HiddenSize, Intermediate: h.IntermediateSize,
		Layers: h.NumHiddenLayers, Heads: h.NumAttentionHeads, KVHeads: h.NumKeyValueHeads, HeadDim: h.HeadDim,
		MaxPositions: h.MaxPositionEmbeddings, TorchDType: h.TorchDType,
		AttentionBias: h.AttentionBias || a.QKVBias, QKNorm: a.QKNorm, TiedEmbeddings: a.TieEmbeddings,
	}
	if h.TieWordEmbeddings != nil {
		s.TiedEmbeddings = *h.TieWordEmbeddings
	}
	if s.KVHeads == 0 {
		s.KVHeads = s.Heads
	}
	if s.HeadDim == 0 && s.Heads > 0 {
		s.HeadDim = s.Hidden / s.Heads
	}
	s.Experts = max(h.NumExperts, h.NumLocalExperts, h.NRoutedExperts)
	if s.Experts > 0 {
		s.ExpertsPerTok = h.NumExpertsPerTok
		s.MoEIntermediate = h.MoEIntermediateSize
		if s.MoEIntermediate == 0 { // Mixtral: intermediate_size is the expert width, every layer is MoE
			s.MoEIntermediate = h.IntermediateSize
		}
		s.SharedExpertSize = h.SharedExpertSize
		if h.NSharedExperts > 0 {
			s.SharedExpertSize = h.NSharedExperts * s.MoEIntermediate
		}
		s.DenseLayers = h.FirstKDenseReplace
		if h.DecoderSparseStep > 1 {
			return nil, fmt.Errorf("decoder_sparse_step %d: only every-layer MoE is modelled", h.DecoderSparseStep)
		}
	}
	return s, s.Validate()
}

// LoadShape reads a model's shape from a config.json, a model folder, or a .gguf file.
func LoadShape(path string) (*Shape, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		path = filepath.Join(path, "config.json")
	} else if strings.EqualFold(filepath.Ext(path), ".gguf") {
		return ggufShape(path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseConfigJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Name it after the file (configs/qwen3-4b.json) or the folder holding config.json.
	if base := filepath.Base(path); base != "config.json" {
		s.Name = strings.TrimSuffix(base, filepath.Ext(base))
	} else if dir, err := filepath.Abs(filepath.Dir(path)); err == nil {
		s.Name = filepath.Base(dir)
	}
	return s, nil
}

func ggufShape(path string) (*Shape, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, _, err := model.ConfigFromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s := FromModelConfig(c)
	s.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return s, nil
}
