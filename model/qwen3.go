package model

import "github.com/tokenwise/tokenwise/kernels"

// Qwen3: Llama's block with an RMSNorm on each head's query and key before RoPE, no q/k/v
// bias, and a head size set apart from hidden_size/num_heads (head_dim).
func init() { register("qwen3", loadQwen3) }

type qwen3Layer struct {
	attnNorm norm
	attn     attention // with per-head q_norm and k_norm
	mlpNorm  norm
	mlp      mlp
}

func loadQwen3(b *binder) []layer {
	layers := make([]layer, b.cfg.NumLayers)
	for i := range layers {
		layers[i] = &qwen3Layer{
			attnNorm: b.norm(i, "input_layernorm"),
			attn:     b.attention(i, b.cfg.AttentionBias, true),
			mlpNorm:  b.norm(i, "post_attention_layernorm"),
			mlp:      b.mlp(i),
		}
	}
	return layers
}

// forward: x += attention(norm(x)); x += mlp(norm(x)).
func (l *qwen3Layer) forward(r *run, i int) {
	h := r.norm(l.attnNorm, r.x)
	kernels.Add(r.x, l.attn.forward(r, i, h))
	h = r.norm(l.mlpNorm, r.x)
	kernels.Add(r.x, l.mlp.forward(r, h))
}

func (l *qwen3Layer) linears() []linear { return append(l.attn.linears(), l.mlp.linears()...) }
