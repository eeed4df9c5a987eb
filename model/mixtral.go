package model

// Mixtral (MixtralForCausalLM; llama.cpp runs it on its "llama" graph, which has the experts
// when the file has an expert_count): Mistral's attention and a mixture of experts for every
// layer's MLP (moe.go): a router block_sparse_moe.gate and experts
// block_sparse_moe.experts.N.{w1,w3,w2} (gate, up, down), no shared expert. Mixtral-8x7B
// has 8 experts of intermediate_size 14336, 2 per token; its routing weights are the softmax
// over the two picked logits.
var mixtralNames = expertNames{router: "block_sparse_moe.gate",
	gate: "block_sparse_moe.experts.%d.w1", up: "block_sparse_moe.experts.%d.w3", down: "block_sparse_moe.experts.%d.w2"}

func loadMixtral(b *binder) []layer {
	layers := make([]layer, b.cfg.NumLayers)
	for i := range layers {
		layers[i] = &moeBlock{
			attnNorm: b.norm(i, "input_layernorm"),
			attn:     b.attention(i, b.cfg.AttentionBias, false),
			mlpNorm:  b.norm(i, "post_attention_layernorm"),
			moe:      b.moe(i, mixtralNames),
		}
	}
	return layers
}
