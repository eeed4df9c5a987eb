package model

import "github.com/tokenwise/tokenwise/kernels"

// Qwen2 / Qwen2.5: Llama's block whose q, k and v projections carry a bias.
func init() { register("qwen2", loadQwen2) }

type qwen2Layer struct {
	attnNorm norm
	attn     attention // with q/k/v bias
	mlpNorm  norm
	mlp      mlp
}

func loadQwen2(b *binder) []layer {
	layers := make([]layer, b.cfg.NumLayers)
	for i := range layers {
		layers[i] = &qwen2Layer{
			attnNorm: b.norm(i, "input_layernorm"),
			attn:     b.attention(i, true, false),
			mlpNorm:  b.norm(i, "post_attention_layernorm"),
			mlp:      b.mlp(i),
		}
	}
	return layers
}

// forward: x += attention(norm(x)); x += mlp(norm(x)).
func (l *qwen2Layer) forward(r *run, i int) {
	h := r.norm(l.attnNorm, r.x)
	kernels.Add(r.x, l.attn.forward(r, i, h))
	h = r.norm(l.mlpNorm, r.x)
	kernels.Add(r.x, l.mlp.forward(r, h))
}

func (l *qwen2Layer) linears() []linear { return append(l.attn.linears(), l.mlp.linears()...) }
