package model

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tokenwise/tokenwise/tensor"
)

// successorStrength is α in the LM head's successor structure (see RandomWeights).
const successorStrength = 0.8

// RandomWeights makes a seeded random checkpoint for cfg, with Hugging Face tensor names, in
// dtype dt (F32, F16 or BF16). Tests and benchmarks use it in place of trained weights.
//
// Parity tests compare greedy tokens between engines that round differently (f16
// activations, other summation orders: logits move by ~10⁻³ of their scale), so greedy
// decisions must not be near-ties. Plain N(0, σ²) weights do not give that: the logits are
// then V independent Gaussians, whose top two are within 10⁻³ of the scale at a few percent
// of steps; and with tied embeddings the current token's own logit (e·e = hidden_size)
// wins every step, so greedy decoding repeats one token forever. Instead:
//
//   - The LM head has a successor structure: tokens are put on one random cycle, and the head
//     row of token j's successor is α·(g⊙e_j)/rms(g⊙e_j) + sqrt(1−α²)·noise, where e_j is j's
//     embedding, g the final norm scale and α = 0.8. The residual stream carries the current
//     token's embedding, so the successor scores about α·hidden/sqrt(2) while the others
//     score N(0, hidden): the top-1 gap grows like hidden_size, not sqrt(hidden_size)
//     (TestRandomWeightsGap measures it against the f16 drift). With tied embeddings the
//     embeddings themselves are drawn along the cycle; the logits are then a symmetric form
//     in the embeddings, so a token's predecessor scores as high as its successor and the
//     layers decide between the two.
//   - The final norm scale g is N(0, 1) rather than near 1, so the current token's own logit,
//     Σ gᵢeᵢ², averages zero instead of hidden_size.
//   - Projections into a block (q, k, v, gate, up) are N(0, 1/fan_in), so activations stay
//     near unit scale and attention is neither uniform nor one-hot; projections back into
//     the residual (o, down) are further scaled by 1/sqrt(2·layers), so the layers add about
//     as much variance as the embedding and steer which successor wins at some steps.
//   - Other norm scales are 1 + N(0, 0.1²) and biases N(0, 0.1²): near their usual values but
//     not neutral, so a weight that is ignored or misplaced changes the output.
func RandomWeights(cfg *Config, seed uint64, dt tensor.DType) ([]tensor.Info, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch dt {
	case tensor.F32, tensor.F16, tensor.BF16:
	default:
		return nil, fmt.Errorf("random weights: dtype %v not supported (f32, f16, bf16)", dt)
	}
	rng := rand.New(rand.NewPCG(seed, 0x746f6b656e77))
	normal := func(n int, mean, std float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(mean + std*rng.NormFloat64())
		}
		return v
	}
	var out []tensor.Info
	var err error
	put := func(name string, shape []int, v []float32) {
		if err != nil {
			return
		}
		var nb int
		if nb, err = dt.BytesFor(len(v)); err != nil {
			return
		}
		data := make([]byte, nb)
		if err = tensor.Quantize(dt, v, data); err != nil {
			err = fmt.Errorf("%s: %w", name, err)
			return
		}
		out = append(out, tensor.Info{Name: name, DType: dt, Shape: shape, Data: data})
	}
	c := cfg
	hid, inter := c.HiddenSize, c.IntermediateSize
	q, kv := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	in := func(fanIn int) float64 { return 1 / math.Sqrt(float64(fanIn)) }
	back := func(fanIn int) float64 { return in(fanIn) / math.Sqrt(float64(2*c.NumLayers)) }
	matrix := func(name string, rows, cols int, std float64) {
		put(name, []int{rows, cols}, normal(rows*cols, 0, std))
	}
	vector := func(name string, n int, mean, std float64) { put(name, []int{n}, normal(n, mean, std)) }

	finalNorm := normal(hid, 0, 1)
	cycle := rng.Perm(c.VocabSize) // token cycle[i]'s successor is cycle[i+1]
	var embed, head []float32
	if c.TieEmbeddings {
		embed = make([]float32, c.VocabSize*hid)
		copy(embed[cycle[0]*hid:], normal(hid, 0, 1))
		for i := 1; i < len(cycle); i++ {
			successor(embed[cycle[i]*hid:(cycle[i]+1)*hid], embed[cycle[i-1]*hid:(cycle[i-1]+1)*hid], finalNorm, rng)
		}
	} else {
		embed = normal(c.VocabSize*hid, 0, 1)
		head = make([]float32, c.VocabSize*hid)
		for i := range cycle {
			prev := cycle[(i+len(cycle)-1)%len(cycle)]
			successor(head[cycle[i]*hid:(cycle[i]+1)*hid], embed[prev*hid:(prev+1)*hid], finalNorm, rng)
		}
	}

	put("model.embed_tokens.weight", []int{c.VocabSize, hid}, embed)
	for i := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		vector(p+"input_layernorm.weight", hid, 1, 0.1)
		matrix(p+"self_attn.q_proj.weight", q, hid, in(hid))
		matrix(p+"self_attn.k_proj.weight", kv, hid, in(hid))
		matrix(p+"self_attn.v_proj.weight", kv, hid, in(hid))
		if c.AttentionBias {
			vector(p+"self_attn.q_proj.bias", q, 0, 0.1)
			vector(p+"self_attn.k_proj.bias", kv, 0, 0.1)
			vector(p+"self_attn.v_proj.bias", kv, 0, 0.1)
		}
		if c.Architecture == "qwen3" {
			vector(p+"self_attn.q_norm.weight", c.HeadDim, 1, 0.1)
			vector(p+"self_attn.k_norm.weight", c.HeadDim, 1, 0.1)
		}
		matrix(p+"self_attn.o_proj.weight", hid, q, back(q))
		vector(p+"post_attention_layernorm.weight", hid, 1, 0.1)
		matrix(p+"mlp.gate_proj.weight", inter, hid, in(hid))
		matrix(p+"mlp.up_proj.weight", inter, hid, in(hid))
		matrix(p+"mlp.down_proj.weight", hid, inter, back(inter))
	}
	put("model.norm.weight", []int{hid}, finalNorm)
	if !c.TieEmbeddings {
		put("lm_head.weight", []int{c.VocabSize, hid}, head)
	}
	return out, err
}

// successor writes dst = α·(g⊙e)/rms(g⊙e) + sqrt(1−α²)·N(0, 1): a row that scores high
// against a hidden state that carries e after the final norm's scale g.
func successor(dst, e, g []float32, rng *rand.Rand) {
	var ss float64
	for i := range e {
		v := float64(g[i] * e[i])
		ss += v * v
	}
	a := successorStrength / math.Sqrt(ss/float64(len(e))+1e-12)
	b := math.Sqrt(1 - successorStrength*successorStrength)
	for i := range dst {
		dst[i] = float32(a*float64(g[i]*e[i]) + b*rng.NormFloat64())
	}
}
