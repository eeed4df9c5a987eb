// Package train trains decoder-only transformers of the Llama family (llama, mistral, qwen2,
// qwen3) on the CPU: forward and backward passes written out by hand, AdamW with gradient
// clipping, a warmup + cosine schedule and gradient accumulation, and runs that resume from
// their last checkpoint (state.go). Checkpoints are Hugging Face folders (config.json +
// model.safetensors + tokenizer files) that package model loads and runs with the same
// logits as the trainer's own forward pass.
//
// Weights live in one flat float32 buffer; each tensor is a slice of it (Spec), so the
// optimizer and clipping are plain loops over one array, and a checkpoint is the buffer cut
// by name. Training runs the kernel pass (fast.go): every product of a sequence through
// package kernels, split across the worker threads, no weight gradient for frozen tensors.
// The reference pass (pass.go) is generic over float32 and float64: the gradient checks run
// it in float64, where finite differences are exact enough to tell a wrong derivative from
// rounding, and the kernel pass is held to it.
package train

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
)

// Spec is one weight tensor: its Hugging Face name and shape, and where it sits in the flat
// buffer.
type Spec struct {
	Name   string
	Shape  []int
	Off, N int
	Decay  bool // weight decay applies (matrices; not norm scales or biases)
}

// Net is a trainable model: the configuration and every weight in one float32 buffer.
type Net struct {
	Cfg   *model.Config
	Specs []Spec
	W     []float32
	freqs []float64
}

// supported reports whether the trainer implements cfg's architecture: Llama's block with
// the flags of model.Arch (q/k/v biases, q/k norms, a sliding window), which is every dense
// row of the table. Mixtures of experts (qwen3_moe, mixtral) it does not train: no router
// gradient, no load balancing.
func supported(cfg *model.Config) error {
	a, err := model.LookupArch(cfg.Architecture)
	if err != nil {
		return fmt.Errorf("the trainer: %w", err)
	}
	if a.MoE {
		return fmt.Errorf("the trainer: %s is a mixture of experts, which tokenwise runs but does not train (dense architectures only)", a.ModelType)
	}
	return cfg.Validate()
}

// layout lists cfg's tensors in buffer order and returns the total number of weights.
func layout(cfg *model.Config) ([]Spec, int) {
	var specs []Spec
	off := 0
	add := func(name string, decay bool, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		specs = append(specs, Spec{Name: name, Shape: shape, Off: off, N: n, Decay: decay})
		off += n
	}
	d, qd, kvd := cfg.HiddenSize, cfg.NumHeads*cfg.HeadDim, cfg.NumKVHeads*cfg.HeadDim
	add("model.embed_tokens.weight", true, cfg.VocabSize, d)
	for l := range cfg.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
		add(p+"input_layernorm.weight", false, d)
		add(p+"self_attn.q_proj.weight", true, qd, d)
		add(p+"self_attn.k_proj.weight", true, kvd, d)
		add(p+"self_attn.v_proj.weight", true, kvd, d)
		if cfg.AttentionBias {
			add(p+"self_attn.q_proj.bias", false, qd)
			add(p+"self_attn.k_proj.bias", false, kvd)
			add(p+"self_attn.v_proj.bias", false, kvd)
		}
		if cfg.Arch().QKNorm {
			add(p+"self_attn.q_norm.weight", false, cfg.HeadDim)
			add(p+"self_attn.k_norm.weight", false, cfg.HeadDim)
		}
		add(p+"self_attn.o_proj.weight", true, d, qd)
		add(p+"post_attention_layernorm.weight", false, d)
		add(p+"mlp.gate_proj.weight", true, cfg.IntermediateSize, d)
		add(p+"mlp.up_proj.weight", true, cfg.IntermediateSize, d)
		add(p+"mlp.down_proj.weight", true, d, cfg.IntermediateSize)
	}
	add("model.norm.weight", false, d)
	if !cfg.TieEmbeddings {
		add("lm_head.weight", true, cfg.VocabSize, d)
	}
	return specs, off
}

// New makes a freshly initialized net: matrices N(0, 0.02²) with the projections back into
// the residual stream (o, down) scaled by 1/sqrt(2·layers) as in GPT-2, so that the stream's
// variance does not grow with depth; norm scales 1, biases 0.
func New(cfg *model.Config, seed uint64) (*Net, error) {
	if err := supported(cfg); err != nil {
		return nil, err
	}
	specs, n := layout(cfg)
	net := &Net{Cfg: cfg, Specs: specs, W: make([]float32, n)}
	var err error
	if net.freqs, err = model.RopeFrequencies(cfg); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x7a17))
	resid := 1 / math.Sqrt(2*float64(cfg.NumLayers))
	for _, s := range specs {
		w := net.W[s.Off : s.Off+s.N]
		switch {
		case len(s.Shape) == 1 && hasSuffix(s.Name, ".bias"):
		case len(s.Shape) == 1:
			for i := range w {
				w[i] = 1
			}
		default:
			std := 0.02
			if hasSuffix(s.Name, "o_proj.weight") || hasSuffix(s.Name, "down_proj.weight") {
				std *= resid
			}
			for i := range w {
				w[i] = float32(rng.NormFloat64() * std)
			}
		}
	}
	return net, nil
}

func hasSuffix(s, suf string) bool { return len(s) >= len(suf) && s[len(s)-len(suf):] == suf }

// Load reads a Hugging Face folder (config.json + safetensors, any float dtype) into a net.
func Load(dir string) (*Net, error) {
	cfg, err := model.ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	if err := supported(cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	st, err := safetensors.OpenModel(dir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	specs, n := layout(cfg)
	net := &Net{Cfg: cfg, Specs: specs, W: make([]float32, n)}
	if net.freqs, err = model.RopeFrequencies(cfg); err != nil {
		return nil, err
	}
	for _, s := range specs {
		t, ok := st.Tensor(s.Name)
		if !ok {
			return nil, fmt.Errorf("%s: tensor %q: missing", dir, s.Name)
		}
		if !slices.Equal(t.Shape, s.Shape) {
			return nil, fmt.Errorf("%s: tensor %q: shape %v, config wants %v", dir, s.Name, t.Shape, s.Shape)
		}
		if err := tensor.Dequantize(t.DType, t.Data, net.W[s.Off:s.Off+s.N]); err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", dir, s.Name, err)
		}
	}
	return net, nil
}

// Tensor returns the weights of the named tensor (a slice of W), or nil.
func (n *Net) Tensor(name string) []float32 {
	for _, s := range n.Specs {
		if s.Name == name {
			return n.W[s.Off : s.Off+s.N]
		}
	}
	return nil
}

// NumParams is the number of weights.
func (n *Net) NumParams() int { return len(n.W) }

// Save writes dir/model.safetensors in dtype (F32 or BF16) and dir/config.json, plus the
// given extra files (tokenizer.json, tokenizer_config.json, ...) by name. The folder loads
// with model.Load and with Hugging Face transformers.
func (n *Net) Save(dir string, dtype tensor.DType, extra map[string][]byte) error {
	if dtype != tensor.F32 && dtype != tensor.BF16 {
		return fmt.Errorf("save %s: dtype %v: want F32 or BF16", dir, dtype)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	infos := make([]tensor.Info, len(n.Specs))
	for i, s := range n.Specs {
		w := n.W[s.Off : s.Off+s.N]
		var data []byte
		if dtype == tensor.F32 {
			data = make([]byte, 4*len(w))
			for j, v := range w {
				binary.LittleEndian.PutUint32(data[4*j:], math.Float32bits(v))
			}
		} else {
			data = make([]byte, 2*len(w))
			for j, v := range w {
				binary.LittleEndian.PutUint16(data[2*j:], tensor.F32ToBF16(v))
			}
		}
		infos[i] = tensor.Info{Name: s.Name, DType: dtype, Shape: slices.Clone(s.Shape), Data: data}
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), infos, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	cfgJSON, err := ConfigJSON(n.Cfg, dtype)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfgJSON, 0o644); err != nil {
		return err
	}
	for name, data := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ConfigJSON renders cfg as a Hugging Face config.json.
func ConfigJSON(cfg *model.Config, dtype tensor.DType) ([]byte, error) {
	arch, err := model.LookupArch(cfg.Architecture)
	if err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	torchDType := "float32"
	if dtype == tensor.BF16 {
		torchDType = "bfloat16"
	}
	f := map[string]any{
		"architectures":           []string{arch.HFClass},
		"model_type":              cfg.Architecture,
		"vocab_size":              cfg.VocabSize,
		"hidden_size":             cfg.HiddenSize,
		"intermediate_size":       cfg.IntermediateSize,
		"num_hidden_layers":       cfg.NumLayers,
		"num_attention_heads":     cfg.NumHeads,
		"num_key_value_heads":     cfg.NumKVHeads,
		"head_dim":                cfg.HeadDim,
		"max_position_embeddings": cfg.MaxPositions,
		"rms_norm_eps":            cfg.RMSNormEps,
		"rope_theta":              cfg.RopeTheta,
		"tie_word_embeddings":     cfg.TieEmbeddings,
		"hidden_act":              "silu",
		"attention_bias":          cfg.AttentionBias,
		"torch_dtype":             torchDType,
	}
	if cfg.SlidingWindow > 0 {
		f["sliding_window"] = cfg.SlidingWindow
	}
	if rs := cfg.RopeScaling; rs != nil {
		if rs.FreqFactors != nil {
			return nil, fmt.Errorf("config.json: rope frequency factors (from GGUF) have no config.json form")
		}
		m := map[string]any{"rope_type": rs.Type, "factor": rs.Factor}
		if rs.Type == "llama3" {
			m["low_freq_factor"], m["high_freq_factor"], m["original_max_position_embeddings"] = rs.LowFreqFactor, rs.HighFreqFactor, rs.OriginalMaxPositions
		}
		f["rope_scaling"] = m
	}
	ids := func(v []int) any {
		switch len(v) {
		case 0:
			return nil
		case 1:
			return v[0]
		}
		return v
	}
	f["bos_token_id"], f["eos_token_id"] = ids(cfg.BOS), ids(cfg.EOS)
	return json.MarshalIndent(f, "", "  ")
}
