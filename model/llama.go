package model

import "github.com/tokenwise/tokenwise/kernels"

// Llama 2 / 3 / 3.x: pre-norm decoder blocks with RMSNorm, rotary attention with grouped
// KV heads, and a SwiGLU MLP. Mistral, Qwen2 and Qwen3 are variations of it.
func init() { register("llama", loadLlama) }

type llamaLayer struct {
	attnNorm norm
	attn     attention
	mlpNorm  norm
	mlp      mlp
}

func loadLlama(b *binder) []layer {
	layers := make([]layer, b.cfg.NumLayers)
	for i := range layers {
		layers[i] = &llamaLayer{
			attnNorm: b.norm(i, "input_layernorm"),
			attn:     b.attention(i, b.cfg.AttentionBias, false),
			mlpNorm:  b.norm(i, "post_attention_layernorm"),
			mlp:      b.mlp(i),
		}
	}
	return layers
}

// forward: x += attention(norm(x)); x += mlp(norm(x)).
func (l *llamaLayer) forward(r *run, i int) {
	h := r.norm(l.attnNorm, r.x)
	kernels.Add(r.x, l.attn.forward(r, i, h))
	h = r.norm(l.mlpNorm, r.x)
	kernels.Add(r.x, l.mlp.forward(r, h))
}

func (l *llamaLayer) linears() []linear { return append(l.attn.linears(), l.mlp.linears()...) }
