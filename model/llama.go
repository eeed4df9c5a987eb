package model

import "github.com/tokenwise/tokenwise/kernels"

// Llama's decoder block, which every architecture in archs uses: pre-norm with RMSNorm,
// rotary attention with grouped KV heads, and a SwiGLU MLP. The others differ only in their
// Arch flags: q/k/v biases (Qwen2), per-head q/k norms before RoPE (Qwen3), a sliding window
// (Mistral, applied in attention).
type block struct {
	attnNorm norm
	attn     attention
	mlpNorm  norm
	mlp      mlp
}

func loadBlocks(b *binder) []layer {
	layers := make([]layer, b.cfg.NumLayers)
	for i := range layers {
		layers[i] = &block{
			attnNorm: b.norm(i, "input_layernorm"),
			attn:     b.attention(i, b.cfg.AttentionBias || b.arch.QKVBias, b.arch.QKNorm),
			mlpNorm:  b.norm(i, "post_attention_layernorm"),
			mlp:      b.mlp(i),
		}
	}
	return layers
}

// forward: x += attention(norm(x)); x += mlp(norm(x)).
func (l *block) forward(r *run, i int) {
	h := r.norm(l.attnNorm, r.x)
	kernels.Add(r.x, l.attn.forward(r, i, h))
	h = r.norm(l.mlpNorm, r.x)
	kernels.Add(r.x, l.mlp.forward(r, h))
}

func (l *block) linears() []linear { return append(l.attn.linears(), l.mlp.linears()...) }

func (l *block) active() []linear { return l.linears() }
