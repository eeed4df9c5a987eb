package convert

import (
	"encoding/json"
	"fmt"
	"math"
)

// hfConfig is the part of config.json that has a GGUF counterpart.
type hfConfig struct {
	Architectures     []string        `json:"architectures"`
	ModelType         string          `json:"model_type"`
	VocabSize         int             `json:"vocab_size"`
	HiddenSize        int             `json:"hidden_size"`
	IntermediateSize  int             `json:"intermediate_size"`
	NumHiddenLayers   int             `json:"num_hidden_layers"`
	NumAttentionHeads int             `json:"num_attention_heads"`
	NumKeyValueHeads  int             `json:"num_key_value_heads"`
	HeadDim           int             `json:"head_dim"`
	MaxPositions      int             `json:"max_position_embeddings"`
	RMSNormEps        float64         `json:"rms_norm_eps"`
	RopeTheta         float64         `json:"rope_theta"`
	RopeScaling       json.RawMessage `json:"rope_scaling"`
	TieWordEmbeddings *bool           `json:"tie_word_embeddings"`
	AttentionBias     bool            `json:"attention_bias"`
	MLPBias           bool            `json:"mlp_bias"`
	HiddenAct         string          `json:"hidden_act"`
	TorchDType        string          `json:"torch_dtype"`
	BOSTokenID        json.RawMessage `json:"bos_token_id"`
	EOSTokenID        json.RawMessage `json:"eos_token_id"`
	PadTokenID        json.RawMessage `json:"pad_token_id"`
}

type ropeScaling struct {
	RopeType       string  `json:"rope_type"`
	Type           string  `json:"type"` // older spelling of rope_type
	Factor         float64 `json:"factor"`
	LowFreqFactor  float64 `json:"low_freq_factor"`
	HighFreqFactor float64 `json:"high_freq_factor"`
	OriginalMax    int     `json:"original_max_position_embeddings"`
}

// ggufArch is the llama.cpp architecture of an HF model_type, and whether llama.cpp wants
// the q/k rows permuted (only its "llama" graph uses interleaved rotary pairs).
func ggufArch(modelType string) (arch string, permute bool, err error) {
	switch modelType {
	case "llama", "mistral":
		return "llama", true, nil
	case "qwen2":
		return "qwen2", false, nil
	case "qwen3":
		return "qwen3", false, nil
	}
	return "", false, fmt.Errorf("config.json: model_type %q not supported for export (llama, mistral, qwen2, qwen3)", modelType)
}

func (c *hfConfig) validate() error {
	if c.HiddenSize <= 0 || c.NumHiddenLayers <= 0 || c.NumAttentionHeads <= 0 || c.IntermediateSize <= 0 || c.VocabSize <= 0 {
		return fmt.Errorf("config.json: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads and vocab_size must be positive")
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.NumKeyValueHeads < 0 || c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("config.json: num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HeadDim == 0 {
		if c.HiddenSize%c.NumAttentionHeads != 0 {
			return fmt.Errorf("config.json: hidden_size %d not divisible by num_attention_heads %d and no head_dim", c.HiddenSize, c.NumAttentionHeads)
		}
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if c.HiddenAct != "" && c.HiddenAct != "silu" {
		return fmt.Errorf("config.json: hidden_act %q: llama.cpp's %s graph uses silu", c.HiddenAct, c.ModelType)
	}
	if c.MLPBias {
		return fmt.Errorf("config.json: mlp_bias is not supported")
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.RMSNormEps == 0 {
		c.RMSNormEps = 1e-6
	}
	return nil
}

func (c *hfConfig) tied() bool {
	if c.TieWordEmbeddings != nil {
		return *c.TieWordEmbeddings
	}
	return false // transformers' PretrainedConfig default is true, but none of these models rely on it
}

func (c *hfConfig) ropeScaling() (*ropeScaling, error) {
	if len(c.RopeScaling) == 0 || string(c.RopeScaling) == "null" {
		return nil, nil
	}
	var r ropeScaling
	if err := json.Unmarshal(c.RopeScaling, &r); err != nil {
		return nil, fmt.Errorf("config.json: rope_scaling: %w", err)
	}
	if r.RopeType == "" {
		r.RopeType = r.Type
	}
	switch r.RopeType {
	case "default", "":
		return nil, nil
	case "linear":
		if r.Factor <= 0 {
			return nil, fmt.Errorf("config.json: rope_scaling: linear needs a positive factor")
		}
	case "llama3":
		if r.Factor <= 0 {
			r.Factor = 8
		}
		if r.LowFreqFactor == 0 {
			r.LowFreqFactor = 1
		}
		if r.HighFreqFactor == 0 {
			r.HighFreqFactor = 4
		}
		if r.OriginalMax == 0 {
			r.OriginalMax = 8192
		}
	default:
		return nil, fmt.Errorf("config.json: rope_scaling type %q not supported for export (linear, llama3)", r.RopeType)
	}
	return &r, nil
}

// llama3RopeFactors computes the rope_freqs tensor llama.cpp uses for Llama 3.1+ scaling:
// frequency i is divided by factors[i] (convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors,
// computed there in float32 for the frequencies and float64 for the rest).
func llama3RopeFactors(r *ropeScaling, theta float64, headDim int) []float32 {
	lowWavelen := float64(r.OriginalMax) / r.LowFreqFactor
	highWavelen := float64(r.OriginalMax) / r.HighFreqFactor
	out := make([]float32, 0, headDim/2)
	for i := 0; i < headDim; i += 2 {
		// torch: 1.0 / (base ** (arange(0, dim, 2, float32) / dim)) in float32
		exp := float32(i) / float32(headDim)
		freq := float32(1.0 / float32(math.Pow(theta, float64(exp))))
		wavelen := 2 * math.Pi / float64(freq)
		var f float64
		switch {
		case wavelen < highWavelen:
			f = 1
		case wavelen > lowWavelen:
			f = r.Factor
		default:
			smooth := (float64(r.OriginalMax)/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			f = 1 / ((1-smooth)/r.Factor + smooth)
		}
		out = append(out, float32(f))
	}
	return out
}

// idList reads a token id that config.json may give as a number, a list or null.
func idList(raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, err
	}
	return many, nil
}
