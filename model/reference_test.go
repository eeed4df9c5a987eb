package model

import (
	"fmt"
	"math"
	"sort"

	"github.com/tokenwise/tokenwise/tensor"
)

// refModel is an independent float64 forward pass, written as plainly as possible from the
// Hugging Face modeling code (modeling_llama.py, modeling_qwen2.py, modeling_qwen3.py): one
// token at a time, its own KV cache, rotate_half RoPE. It checks the fast path.
type refModel struct {
	c *Config
	w map[string][]float64
	// round is applied to the input of every weight product: ggml (and so tokenwise's
	// kernels) rounds activations to f16/bf16 before multiplying by f16/bf16 weights.
	round func(float64) float64
	k, v  [][][]float64 // [layer][position] → kv_heads·head_dim
}

func newRef(c *Config, tensors []tensor.Info) (*refModel, error) {
	r := &refModel{c: c, w: map[string][]float64{}, round: func(v float64) float64 { return v }}
	switch tensors[0].DType {
	case tensor.F16:
		r.round = func(v float64) float64 { return float64(tensor.F16ToF32(tensor.F32ToF16(float32(v)))) }
	case tensor.BF16:
		r.round = func(v float64) float64 { return float64(tensor.BF16ToF32(tensor.F32ToBF16(float32(v)))) }
	}
	for _, t := range tensors {
		f := make([]float32, t.NumElements())
		if err := tensor.Dequantize(t.DType, t.Data, f); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name, err)
		}
		d := make([]float64, len(f))
		for i, v := range f {
			d[i] = float64(v)
		}
		r.w[t.Name] = d
	}
	r.k = make([][][]float64, c.NumLayers)
	r.v = make([][][]float64, c.NumLayers)
	return r, nil
}

func (r *refModel) get(name string) []float64 {
	w, ok := r.w[name]
	if !ok {
		panic("reference: missing " + name)
	}
	return w
}

// mv is refMatVec on the rounded input.
func (r *refModel) mv(name string, x []float64, rows int) []float64 {
	xr := make([]float64, len(x))
	for i, v := range x {
		xr[i] = r.round(v)
	}
	return refMatVec(r.get(name), xr, rows)
}

// matvec: W is [len(out)][len(x)] row-major.
func refMatVec(w, x []float64, rows int) []float64 {
	cols := len(x)
	y := make([]float64, rows)
	for i := range rows {
		for j := range cols {
			y[i] += w[i*cols+j] * x[j]
		}
	}
	return y
}

func refRMSNorm(x, w []float64, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i := range x {
		y[i] = x[i] * s * w[i]
	}
	return y
}

// refInvFreq follows transformers' _compute_default_rope_parameters,
// _compute_linear_scaling_rope_parameters and _compute_llama3_parameters.
func refInvFreq(c *Config) []float64 {
	d := c.HeadDim
	f := make([]float64, d/2)
	for i := range f {
		f[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(d))
	}
	if rs := c.RopeScaling; rs != nil {
		for i := range f {
			switch rs.Type {
			case "linear":
				f[i] /= rs.Factor
			case "llama3":
				low := float64(rs.OriginalMaxPositions) / rs.LowFreqFactor
				high := float64(rs.OriginalMaxPositions) / rs.HighFreqFactor
				wl := 2 * math.Pi / f[i]
				if wl > low {
					f[i] /= rs.Factor
				} else if wl >= high {
					smooth := (float64(rs.OriginalMaxPositions)/wl - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
					f[i] = (1-smooth)*f[i]/rs.Factor + smooth*f[i]
				}
			}
		}
	}
	return f
}

// refRope is HF's apply_rotary_pos_emb: x·cos + rotate_half(x)·sin, rotate_half(x) = (−x₂, x₁).
func refRope(x []float64, pos int, inv []float64) {
	h := len(x) / 2
	y := make([]float64, len(x))
	for i := range x {
		a := float64(pos) * inv[i%h]
		var rot float64
		if i < h {
			rot = -x[i+h]
		} else {
			rot = x[i-h]
		}
		y[i] = x[i]*math.Cos(a) + rot*math.Sin(a)
	}
	copy(x, y)
}

// step feeds one token at the next position and returns the logits.
func (r *refModel) step(id int) []float64 {
	c := r.c
	hid, hd := c.HiddenSize, c.HeadDim
	pos := len(r.k[0])
	x := append([]float64(nil), r.get("model.embed_tokens.weight")[id*hid:(id+1)*hid]...)
	inv := refInvFreq(c)
	for l := range c.NumLayers {
		p := fmt.Sprintf("model.layers.%d.", l)
		h := refRMSNorm(x, r.get(p+"input_layernorm.weight"), c.RMSNormEps)
		q := r.mv(p+"self_attn.q_proj.weight", h, c.NumHeads*hd)
		k := r.mv(p+"self_attn.k_proj.weight", h, c.NumKVHeads*hd)
		v := r.mv(p+"self_attn.v_proj.weight", h, c.NumKVHeads*hd)
		if c.AttentionBias {
			for i, b := range r.get(p + "self_attn.q_proj.bias") {
				q[i] += b
			}
			for i, b := range r.get(p + "self_attn.k_proj.bias") {
				k[i] += b
			}
			for i, b := range r.get(p + "self_attn.v_proj.bias") {
				v[i] += b
			}
		}
		for hh := range c.NumHeads {
			qh := q[hh*hd : (hh+1)*hd]
			if c.Arch().QKNorm {
				copy(qh, refRMSNorm(qh, r.get(p+"self_attn.q_norm.weight"), c.RMSNormEps))
			}
			refRope(qh, pos, inv)
		}
		for hh := range c.NumKVHeads {
			kh := k[hh*hd : (hh+1)*hd]
			if c.Arch().QKNorm {
				copy(kh, refRMSNorm(kh, r.get(p+"self_attn.k_norm.weight"), c.RMSNormEps))
			}
			refRope(kh, pos, inv)
		}
		r.k[l] = append(r.k[l], k)
		r.v[l] = append(r.v[l], v)

		att := make([]float64, c.NumHeads*hd)
		for hh := range c.NumHeads {
			g := hh / (c.NumHeads / c.NumKVHeads) // repeat_kv
			first := 0
			if c.SlidingWindow > 0 {
				first = max(0, pos-c.SlidingWindow+1)
			}
			scores := make([]float64, pos+1)
			mx := math.Inf(-1)
			for j := first; j <= pos; j++ {
				var s float64
				for i := range hd {
					s += q[hh*hd+i] * r.k[l][j][g*hd+i]
				}
				scores[j] = s / math.Sqrt(float64(hd))
				mx = max(mx, scores[j])
			}
			var sum float64
			for j := first; j <= pos; j++ {
				scores[j] = math.Exp(scores[j] - mx)
				sum += scores[j]
			}
			for j := first; j <= pos; j++ {
				for i := range hd {
					att[hh*hd+i] += scores[j] / sum * r.v[l][j][g*hd+i]
				}
			}
		}
		o := r.mv(p+"self_attn.o_proj.weight", att, hid)
		for i := range x {
			x[i] += o[i]
		}

		h = refRMSNorm(x, r.get(p+"post_attention_layernorm.weight"), c.RMSNormEps)
		if c.MoE() {
			for i, v := range r.experts(l, h) {
				x[i] += v
			}
			continue
		}
		gate := r.mv(p+"mlp.gate_proj.weight", h, c.IntermediateSize)
		up := r.mv(p+"mlp.up_proj.weight", h, c.IntermediateSize)
		for i := range gate {
			gate[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
		}
		d := r.mv(p+"mlp.down_proj.weight", gate, hid)
		for i := range x {
			x[i] += d[i]
		}
	}
	h := refRMSNorm(x, r.get("model.norm.weight"), c.RMSNormEps)
	head := "lm_head.weight"
	if c.TieEmbeddings {
		head = "model.embed_tokens.weight"
	}
	return r.mv(head, h, c.VocabSize)
}

// experts is the sparse MoE block of modeling_qwen3_moe.py / modeling_mixtral.py for one
// token: router logits, softmax over all experts, the top k, renormalized when
// norm_topk_prob (Mixtral always), and the weighted sum of those experts' SwiGLU outputs.
func (r *refModel) experts(l int, h []float64) []float64 {
	c := r.c
	router, _, _, _, _ := c.Arch().ExpertTensorNames(l, 0)
	logits := r.mv(router, h, c.NumExperts)
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = max(mx, v)
	}
	var sum float64
	probs := make([]float64, len(logits))
	for i, v := range logits {
		probs[i] = math.Exp(v - mx)
		sum += probs[i]
	}
	idx := make([]int, len(probs))
	for i := range idx {
		probs[i] /= sum
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return probs[idx[a]] > probs[idx[b]] })
	top := idx[:c.ExpertsPerTok]
	var tsum float64
	for _, e := range top {
		tsum += probs[e]
	}
	out := make([]float64, c.HiddenSize)
	for _, e := range top {
		w := probs[e]
		if c.NormTopKProb {
			w /= tsum
		}
		_, gn, un, dn, _ := c.Arch().ExpertTensorNames(l, e)
		gate := r.mv(gn, h, c.ExpertSize)
		up := r.mv(un, h, c.ExpertSize)
		for i := range gate {
			gate[i] = gate[i] / (1 + math.Exp(-gate[i])) * up[i]
		}
		for i, v := range r.mv(dn, gate, c.HiddenSize) {
			out[i] += w * v
		}
	}
	return out
}
