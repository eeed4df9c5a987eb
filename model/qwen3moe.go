package model

// Qwen3-MoE (Qwen3MoeForCausalLM; llama.cpp's qwen3moe graph): Qwen3's attention, with its
// per-head q/k norms, and a mixture of experts for every layer's MLP (moe.go): a router
// mlp.gate and experts mlp.experts.N.{gate,up,down}_proj, no shared expert. Qwen3-30B-A3B
// has 128 experts of moe_intermediate_size 768, 8 per token, norm_topk_prob true.
var qwen3MoENames = expertNames{router: "mlp.gate",
	gate: "mlp.experts.%d.gate_proj", up: "mlp.experts.%d.up_proj", down: "mlp.experts.%d.down_proj"}

func loadQwen3MoE(b *binder) []layer {
	layers := make([]layer, b.cfg.NumLayers)
	for i := range layers {
		layers[i] = &moeBlock{
			attnNorm: b.norm(i, "input_layernorm"),
			attn:     b.attention(i, b.cfg.AttentionBias, true),
			mlpNorm:  b.norm(i, "post_attention_layernorm"),
			moe:      b.moe(i, qwen3MoENames),
		}
	}
	return layers
}
