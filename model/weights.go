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
	gguf   bool // experts are stacked in one 3-D tensor per projection (blk.N.ffn_gate_exps)
}

var hfNames = naming{
	global: func(hf string) string { return hf + ".weight" },
	layer:  func(i int, hf string) string { return fmt.Sprintf("model.layers.%d.%s", i, hf) },
}

// ggufNames maps Hugging Face names to llama.cpp's (convert_hf_to_gguf.py's tensor map).
var ggufNames = naming{
	gguf:   true,
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
	// The routers: Qwen3-MoE's and Mixtral's.
	"mlp.gate": "ffn_gate_inp", "block_sparse_moe.gate": "ffn_gate_inp",
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

// experts binds one projection of every expert of a layer as rows×cols matrices: in a Hugging
// Face folder, one tensor per expert (hf, a format with the expert's index: "mlp.experts.%d.
// gate_proj"); in GGUF, one [experts, rows, cols] tensor (blk.N.<stacked>.weight, llama.cpp's
// ffn_gate_exps), whose experts are consecutive rows×cols blocks that the kernels read in
// place.
func (b *binder) experts(layer int, hf, stacked string, rows, cols int) []kernels.Mat {
	e := b.cfg.NumExperts
	ms := make([]kernels.Mat, e)
	if !b.names.gguf {
		if _, ok := b.src.Tensor(b.names.layer(layer, fmt.Sprintf(hf, 0)+".weight")); !ok {
			if f, ok := b.fusedExperts(layer, stacked, rows, cols); ok {
				return f
			}
		}
		for j := range ms {
			ms[j] = b.matrix(b.names.layer(layer, fmt.Sprintf(hf, j)+".weight"), rows, cols)
			ms[j].SetOutsideAMX() // an expert: llama.cpp's AMX backend takes no MUL_MAT_ID
		}
		return ms
	}
	name := fmt.Sprintf("blk.%d.%s.weight", layer, stacked)
	t, ok := b.find(name, []int{e, rows, cols}, false)
	if !ok {
		return ms
	}
	per := len(t.Data) / e
	for j := range ms {
		m, err := kernels.NewMat(t.DType, rows, cols, t.Data[j*per:(j+1)*per])
		if err != nil {
			b.fail(fmt.Errorf("tensor %q expert %d: %w", name, j, err))
			return ms
		}
		m.SetOutsideAMX() // an expert: llama.cpp's AMX backend takes no MUL_MAT_ID
		ms[j] = m
	}
	return ms
}

// expertNames are an architecture's Hugging Face names, within a layer, of its router and
// of each expert's gate, up and down projections (formats with the expert's index).
type expertNames struct{ router, gate, up, down string }

// ExpertTensorNames returns the Hugging Face names, within layer i, of an MoE
// architecture's router and of expert e's gate, up and down weights (convert maps them to
// GGUF's stacked tensors); ok is false for a dense architecture.
func (a *Arch) ExpertTensorNames(i, e int) (router, gate, up, down string, ok bool) {
	n := a.experts
	if n == nil {
		return "", "", "", "", false
	}
	p := fmt.Sprintf("model.layers.%d.", i)
	return p + n.router + ".weight", p + fmt.Sprintf(n.gate, e) + ".weight", p + fmt.Sprintf(n.up, e) + ".weight", p + fmt.Sprintf(n.down, e) + ".weight", true
}

// fusedExperts binds one projection of a layer's experts from transformers 5's own layout,
// which save_pretrained writes with save_original_format=False (the default writes the
// per-expert tensors of the published checkpoints): mlp.experts.gate_up_proj [experts,
// 2·size, hidden], each expert's gate rows then its up rows, and mlp.experts.down_proj
// [experts, hidden, size]. ok is false when the layer has no such tensor.
func (b *binder) fusedExperts(layer int, stacked string, rows, cols int) ([]kernels.Mat, bool) {
	e := b.cfg.NumExperts
	name, shape, half := "mlp.experts.down_proj", []int{e, rows, cols}, -1
	switch stacked {
	case "ffn_gate_exps":
		name, shape, half = "mlp.experts.gate_up_proj", []int{e, 2 * rows, cols}, 0
	case "ffn_up_exps":
		name, shape, half = "mlp.experts.gate_up_proj", []int{e, 2 * rows, cols}, 1
	}
	name = b.names.layer(layer, name)
	if _, ok := b.src.Tensor(name); !ok {
		return nil, false
	}
	ms := make([]kernels.Mat, e)
	t, ok := b.find(name, shape, false)
	if !ok {
		return ms, true
	}
	per := len(t.Data) / e
	for j := range ms {
		blk := t.Data[j*per : (j+1)*per]
		if half >= 0 {
			blk = blk[half*per/2 : (half+1)*per/2]
		}
		m, err := kernels.NewMat(t.DType, rows, cols, blk)
		if err != nil {
			b.fail(fmt.Errorf("tensor %q expert %d: %w", name, j, err))
			return ms, true
		}
		m.SetOutsideAMX() // an expert: llama.cpp's AMX backend takes no MUL_MAT_ID
		ms[j] = m
	}
	return ms, true
}

// moe binds a layer's mixture of experts: the router ([experts, hidden]) and the experts'
// SwiGLU projections.
func (b *binder) moe(layer int, n expertNames) moe {
	c := b.cfg
	router := n.router
	if _, ok := b.src.Tensor(b.names.layer(layer, router+".weight")); !ok && !b.names.gguf {
		// transformers 5 renames Mixtral's block_sparse_moe to mlp in its own layout.
		if _, ok := b.src.Tensor(b.names.layer(layer, "mlp.gate.weight")); ok {
			router = "mlp.gate"
		}
	}
	return moe{
		router: b.linear(layer, router, c.NumExperts, c.HiddenSize, false),
		gate:   b.experts(layer, n.gate, "ffn_gate_exps", c.ExpertSize, c.HiddenSize),
		up:     b.experts(layer, n.up, "ffn_up_exps", c.ExpertSize, c.HiddenSize),
		down:   b.experts(layer, n.down, "ffn_down_exps", c.HiddenSize, c.ExpertSize),
		k:      c.ExpertsPerTok,
		norm:   c.NormTopKProb,
	}
}
