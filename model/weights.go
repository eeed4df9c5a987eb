package model

import (
	"fmt"
	"slices"

	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/tensor"
)

// source finds a tensor by name in a loaded file (safetensors folder or GGUF).
type source interface {
	Tensor(name string) (tensor.Info, bool)
}

// naming turns a logical weight name into the file's tensor name. Architectures ask for
// weights by their Hugging Face names; GGUF files use llama.cpp's names for the same tensors.
type naming struct {
	global func(hf string) string
	layer  func(i int, hf string) string
}

var hfNames = naming{
	global: func(hf string) string { return hf + ".weight" },
	layer:  func(i int, hf string) string { return fmt.Sprintf("model.layers.%d.%s", i, hf) },
}

// ggufNames maps Hugging Face names to llama.cpp's (convert_hf_to_gguf.py's tensor map).
var ggufNames = naming{
	global: func(hf string) string { return ggufGlobal[hf] + ".weight" },
	layer: func(i int, hf string) string {
		base, suffix, _ := cutLast(hf, ".")
		return fmt.Sprintf("blk.%d.%s.%s", i, ggufLayer[base], suffix)
	},
}

var ggufGlobal = map[string]string{"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}

var ggufLayer = map[string]string{
	"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
	"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
	"self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
	"mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}

// binder looks weights up by name, checks their shapes against the config, and keeps the
// first error so that an architecture's loader reads as a plain list of its weights.
type binder struct {
	src   source
	names naming
	cfg   *Config
	arch  *Arch
	err   error
}

func (b *binder) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

// find returns the tensor called name with the given shape; optional tensors may be absent.
func (b *binder) find(name string, shape []int, optional bool) (tensor.Info, bool) {
	t, ok := b.src.Tensor(name)
	if !ok {
		if !optional {
			b.fail(fmt.Errorf("tensor %q: missing", name))
		}
		return t, false
	}
	if !slices.Equal(t.Shape, shape) {
		b.fail(fmt.Errorf("tensor %q: shape %v, config wants %v", name, t.Shape, shape))
		return t, false
	}
	return t, true
}

// matrix binds a [rows, cols] weight in its stored dtype: the kernels read it in place.
func (b *binder) matrix(name string, rows, cols int) kernels.Mat {
	t, ok := b.find(name, []int{rows, cols}, false)
	if !ok {
		return kernels.Mat{}
	}
	m, err := kernels.NewMat(t.DType, rows, cols, t.Data)
	if err != nil {
		b.fail(fmt.Errorf("tensor %q: %w", name, err))
	}
	return m
}

// vector reads a 1-D weight (norm scale, bias) as float32; these are small, so a copy is fine.
func (b *binder) vector(name string, n int, optional bool) []float32 {
	t, ok := b.find(name, []int{n}, optional)
	if !ok {
		return nil
	}
	v := make([]float32, n)
	if err := tensor.Dequantize(t.DType, t.Data, v); err != nil {
		b.fail(fmt.Errorf("tensor %q: %w", name, err))
	}
	return v
}

func (b *binder) linear(layer int, hf string, out, in int, bias bool) linear {
	l := linear{w: b.matrix(b.names.layer(layer, hf+".weight"), out, in)}
	if bias {
		l.b = b.vector(b.names.layer(layer, hf+".bias"), out, false)
	}
	return l
}

// norm binds a layer's RMSNorm scale.
func (b *binder) norm(layer int, hf string) norm {
	return norm{w: b.vector(b.names.layer(layer, hf+".weight"), b.cfg.HiddenSize, false), eps: b.cfg.RMSNormEps}
}

// attention binds the four projections of one layer's attention; bias adds q/k/v biases
// (Qwen2), qkNorm the per-head RMSNorms of q and k (Qwen3).
func (b *binder) attention(layer int, bias, qkNorm bool) attention {
	c := b.cfg
	q, kv := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	a := attention{
		q: b.linear(layer, "self_attn.q_proj", q, c.HiddenSize, bias),
		k: b.linear(layer, "self_attn.k_proj", kv, c.HiddenSize, bias),
		v: b.linear(layer, "self_attn.v_proj", kv, c.HiddenSize, bias),
		o: b.linear(layer, "self_attn.o_proj", c.HiddenSize, q, false),
	}
	if qkNorm {
		a.qNorm = norm{w: b.vector(b.names.layer(layer, "self_attn.q_norm.weight"), c.HeadDim, false), eps: c.RMSNormEps}
		a.kNorm = norm{w: b.vector(b.names.layer(layer, "self_attn.k_norm.weight"), c.HeadDim, false), eps: c.RMSNormEps}
	}
	return a
}

// mlp binds one layer's SwiGLU feed-forward block.
func (b *binder) mlp(layer int) mlp {
	c := b.cfg
	return mlp{
		gate: b.linear(layer, "mlp.gate_proj", c.IntermediateSize, c.HiddenSize, false),
		up:   b.linear(layer, "mlp.up_proj", c.IntermediateSize, c.HiddenSize, false),
		down: b.linear(layer, "mlp.down_proj", c.HiddenSize, c.IntermediateSize, false),
	}
}
