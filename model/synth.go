package model

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

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
//     score N(0, hidden): the top-1 gap grows like hidden_size, not sqrt(hidden_size).
//   - With tied embeddings the logits are a symmetric form in the embeddings (e_jᵀ·diag(g)·e_cur),
//     so any token strongly tied to its successor is as strongly tied to its predecessor, and
//     along a cycle greedy decoding would go back and forth with the layers breaking near-ties.
//     Tied checkpoints therefore pair tokens instead (the second embedding of each random pair
//     is the first's successor row): greedy decoding alternates within a pair with a large
//     gap. Dull text, but the decisions are robust; the logits still depend on every weight.
//     TestRandomWeightsGap measures both cases against the f16 drift.
//   - The final norm scale g is a random ±1 per channel rather than near 1, so the current
//     token's own logit, Σ gᵢeᵢ², is N(0, 3·hidden) instead of hidden_size. (With g ~ N(0, 1)
//     a successor row's own logit goes with Σ gᵢ³eᵢ², heavy-tailed enough that greedy decoding
//     got stuck repeating such a token.)
//   - Projections into a block (q, k, v, gate, up) are N(0, 1/fan_in), so activations stay
//     near unit scale and attention is neither uniform nor one-hot; projections back into
//     the residual (o, down) are further scaled by 1/sqrt(2·layers), so the layers add about
//     as much variance as the embedding: they move every logit, rarely the top-1.
//   - Other norm scales are 1 + N(0, 0.1²) and biases N(0, 0.1²): near their usual values but
//     not neutral, so a weight that is ignored or misplaced changes the output.
func RandomWeights(cfg *Config, seed uint64, dt tensor.DType) ([]tensor.Info, error) {
	r, err := NewRandom(cfg, seed, dt)
	if err != nil {
		return nil, err
	}
	ts := r.Tensors()
	for i := range ts {
		if ts[i].Data, err = r.Data(ts[i].Name); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

// Random produces the tensors of RandomWeights one at a time, so that a checkpoint larger
// than memory can be streamed to a file. Each tensor has its own random stream, seeded by
// the seed and its name, so the result does not depend on the order tensors are asked for.
type Random struct {
	cfg     *Config
	seed    uint64
	dt      tensor.DType
	tensors []tensor.Info
	init    map[string][3]float64 // name → mean, std, and 1 for the successor-structured head
}

// NewRandom describes a random checkpoint for cfg in dtype dt (F32, F16 or BF16).
func NewRandom(cfg *Config, seed uint64, dt tensor.DType) (*Random, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	switch dt {
	case tensor.F32, tensor.F16, tensor.BF16:
	default:
		return nil, fmt.Errorf("random weights: dtype %v not supported (f32, f16, bf16)", dt)
	}
	r := &Random{cfg: cfg, seed: seed, dt: dt, init: map[string][3]float64{}}
	c := cfg
	hid, inter := c.HiddenSize, c.IntermediateSize
	q, kv := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	in := func(fanIn int) float64 { return 1 / math.Sqrt(float64(fanIn)) }
	back := func(fanIn int) float64 { return in(fanIn) / math.Sqrt(float64(2*c.NumLayers)) }
	add := func(name string, shape []int, mean, std float64) {
		r.tensors = append(r.tensors, tensor.Info{Name: name, DType: dt, Shape: shape})
		r.init[name] = [3]float64{mean, std, 0}
	}
	add("model.embed_tokens.weight", []int{c.VocabSize, hid}, 0, 1)
	for i := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"input_layernorm.weight", []int{hid}, 1, 0.1)
		add(p+"self_attn.q_proj.weight", []int{q, hid}, 0, in(hid))
		add(p+"self_attn.k_proj.weight", []int{kv, hid}, 0, in(hid))
		add(p+"self_attn.v_proj.weight", []int{kv, hid}, 0, in(hid))
		if c.AttentionBias {
			add(p+"self_attn.q_proj.bias", []int{q}, 0, 0.1)
			add(p+"self_attn.k_proj.bias", []int{kv}, 0, 0.1)
			add(p+"self_attn.v_proj.bias", []int{kv}, 0, 0.1)
		}
		if c.Arch().QKNorm {
			add(p+"self_attn.q_norm.weight", []int{c.HeadDim}, 1, 0.1)
			add(p+"self_attn.k_norm.weight", []int{c.HeadDim}, 1, 0.1)
		}
		add(p+"self_attn.o_proj.weight", []int{hid, q}, 0, back(q))
		add(p+"post_attention_layernorm.weight", []int{hid}, 1, 0.1)
		if !c.MoE() {
			add(p+"mlp.gate_proj.weight", []int{inter, hid}, 0, in(hid))
			add(p+"mlp.up_proj.weight", []int{inter, hid}, 0, in(hid))
			add(p+"mlp.down_proj.weight", []int{hid, inter}, 0, back(inter))
			continue
		}
		// A mixture of experts: the router as a projection into the block (its logits
		// about unit scale, so the softmax neither picks one expert nor spreads evenly), and
		// each expert as the dense MLP above. Its output is a weighted mean of experts, so
		// the residual gains about what a dense MLP adds.
		es := c.ExpertSize
		for e := range c.NumExperts {
			router, gate, up, down, _ := c.Arch().ExpertTensorNames(i, e)
			if e == 0 {
				add(router, []int{c.NumExperts, hid}, 0, in(hid))
			}
			add(gate, []int{es, hid}, 0, in(hid))
			add(up, []int{es, hid}, 0, in(hid))
			add(down, []int{hid, es}, 0, back(es))
		}
	}
	add("model.norm.weight", []int{hid}, 0, 0) // random signs, see values
	if !c.TieEmbeddings {
		add("lm_head.weight", []int{c.VocabSize, hid}, 0, 1)
	}
	return r, nil
}

// Spread is the mean and standard deviation the named tensor's values are drawn around
// (the embedding and head rows: 0 and 1; norms: about 1), false for a name not in the
// checkpoint.
func (r *Random) Spread(name string) (mean, std float64, ok bool) {
	init, ok := r.init[name]
	if name == "model.embed_tokens.weight" || name == "lm_head.weight" {
		return 0, 1, ok
	}
	return init[0], init[1], ok
}

// Tensors lists the checkpoint's tensors (names, dtype, shapes; Data is nil).
func (r *Random) Tensors() []tensor.Info { return slices.Clone(r.tensors) }

// Data returns the encoded values of the named tensor.
func (r *Random) Data(name string) ([]byte, error) {
	v, err := r.values(name)
	if err != nil {
		return nil, err
	}
	nb, err := r.dt.BytesFor(len(v))
	if err != nil {
		return nil, err
	}
	data := make([]byte, nb)
	if err := tensor.Quantize(r.dt, v, data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return data, nil
}

func (r *Random) rng(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(r.seed, h.Sum64()))
}

func (r *Random) values(name string) ([]float32, error) {
	c := r.cfg
	hid := c.HiddenSize
	switch {
	case name == "model.embed_tokens.weight" && c.TieEmbeddings:
		// Tied: tokens are paired, and each pair's second embedding is the first's successor row.
		g, _ := r.values("model.norm.weight")
		order := r.rng("cycle").Perm(c.VocabSize)
		rng := r.rng(name)
		e := make([]float32, c.VocabSize*hid)
		for i, tok := range order {
			row := e[tok*hid : (tok+1)*hid]
			if i%2 == 0 {
				normal(rng, row, 0, 1)
			} else {
				successor(row, e[order[i-1]*hid:(order[i-1]+1)*hid], g, rng)
			}
		}
		return e, nil
	case name == "lm_head.weight":
		g, _ := r.values("model.norm.weight")
		e, _ := r.values("model.embed_tokens.weight")
		cycle := r.rng("cycle").Perm(c.VocabSize)
		rng := r.rng(name)
		h := make([]float32, c.VocabSize*hid)
		for i, tok := range cycle {
			prev := cycle[(i+len(cycle)-1)%len(cycle)]
			successor(h[tok*hid:(tok+1)*hid], e[prev*hid:(prev+1)*hid], g, rng)
		}
		return h, nil
	}
	init, ok := r.init[name]
	if !ok {
		return nil, fmt.Errorf("random weights: no tensor %q", name)
	}
	if name == "model.norm.weight" {
		v := make([]float32, hid)
		rng := r.rng(name)
		for i := range v {
			v[i] = float32(2*rng.IntN(2) - 1)
		}
		return v, nil
	}
	n := 1
	for _, t := range r.tensors {
		if t.Name == name {
			for _, d := range t.Shape {
				n *= d
			}
		}
	}
	v := make([]float32, n)
	normal(r.rng(name), v, init[0], init[1])
	return v, nil
}

func normal(rng *rand.Rand, v []float32, mean, std float64) {
	for i := range v {
		v[i] = float32(mean + std*rng.NormFloat64())
	}
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
