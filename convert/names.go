package convert

import (
	"fmt"
	"strconv"
	"strings"
)

// Tensor names: Hugging Face transformers (LlamaForCausalLM, MistralForCausalLM,
// Qwen2ForCausalLM, Qwen3ForCausalLM) on one side, llama.cpp's GGUF names
// (gguf-py/gguf/tensor_mapping.py) on the other.

var globalNames = [][2]string{
	{"model.embed_tokens.weight", "token_embd.weight"},
	{"model.norm.weight", "output_norm.weight"},
	{"lm_head.weight", "output.weight"},
}

// blockNames maps the part after "model.layers.<i>." to the part after "blk.<i>.".
var blockNames = [][2]string{
	{"input_layernorm.weight", "attn_norm.weight"},
	{"self_attn.q_proj.weight", "attn_q.weight"},
	{"self_attn.k_proj.weight", "attn_k.weight"},
	{"self_attn.v_proj.weight", "attn_v.weight"},
	{"self_attn.o_proj.weight", "attn_output.weight"},
	{"self_attn.q_proj.bias", "attn_q.bias"},
	{"self_attn.k_proj.bias", "attn_k.bias"},
	{"self_attn.v_proj.bias", "attn_v.bias"},
	{"self_attn.o_proj.bias", "attn_output.bias"},
	{"self_attn.q_norm.weight", "attn_q_norm.weight"},
	{"self_attn.k_norm.weight", "attn_k_norm.weight"},
	{"post_attention_layernorm.weight", "ffn_norm.weight"},
	{"mlp.gate_proj.weight", "ffn_gate.weight"},
	{"mlp.up_proj.weight", "ffn_up.weight"},
	{"mlp.down_proj.weight", "ffn_down.weight"},
	// The routers of Qwen3-MoE and Mixtral (their experts are stacked: stackExperts).
	{"mlp.gate.weight", "ffn_gate_inp.weight"},
	{"block_sparse_moe.gate.weight", "ffn_gate_inp.weight"},
}

// ggufName returns the GGUF name of an HF tensor, and the layer index (-1 for global tensors).
// skip is true for tensors llama.cpp does not store (rotary inverse frequencies).
func ggufName(hf string) (name string, layer int, skip bool, err error) {
	for _, p := range globalNames {
		if hf == p[0] {
			return p[1], -1, false, nil
		}
	}
	if strings.HasSuffix(hf, ".rotary_emb.inv_freq") {
		return "", -1, true, nil
	}
	if rest, ok := strings.CutPrefix(hf, "model.layers."); ok {
		idx, part, ok := strings.Cut(rest, ".")
		if i, err := strconv.Atoi(idx); ok && err == nil && i >= 0 {
			for _, p := range blockNames {
				if part == p[0] {
					return "blk." + idx + "." + p[1], i, false, nil
				}
			}
		}
	}
	return "", -1, false, fmt.Errorf("tensor %q: no GGUF name for it (supported: llama, mistral, qwen2, qwen3 decoder weights)", hf)
}

// hfName is the inverse of ggufName. skip is true for GGUF-only tensors (rope_freqs, which
// config.json's rope_scaling describes instead).
func hfName(gg string) (name string, layer int, skip bool, err error) {
	for _, p := range globalNames {
		if gg == p[1] {
			return p[0], -1, false, nil
		}
	}
	if gg == "rope_freqs.weight" {
		return "", -1, true, nil
	}
	if rest, ok := strings.CutPrefix(gg, "blk."); ok {
		idx, part, ok := strings.Cut(rest, ".")
		if i, err := strconv.Atoi(idx); ok && err == nil && i >= 0 {
			for _, p := range blockNames {
				if part == p[1] {
					return "model.layers." + idx + "." + p[0], i, false, nil
				}
			}
		}
	}
	return "", -1, false, fmt.Errorf("tensor %q: no Hugging Face name for it (supported: llama, qwen2, qwen3 decoder weights)", gg)
}
