package cost

import (
	"fmt"
	"math"
	"strings"
)

// Precision is how a tensor is stored: bytes per element (block formats include their
// scales: q8_0 keeps 32 int8 values and one f16 scale in 34 bytes) and which peak FLOP rate
// of a device applies when its values are multiplied.
type Precision struct {
	Name    string  `json:"name"`
	Bytes   float64 `json:"bytes_per_element"`
	Compute string  `json:"compute"` // key into a profile's peak FLOP/s table
}

// precisions are the dtypes the cost model knows. Weight-only quantized formats (q8_0,
// q4_0) are widened before the multiply, so they compute at the 16-bit rate on a GPU.
var precisions = map[string]Precision{
	"f32":  {"f32", 4, "fp32"},
	"f16":  {"f16", 2, "fp16"},
	"bf16": {"bf16", 2, "bf16"},
	"fp8":  {"fp8", 1, "fp8"},
	"int8": {"int8", 1, "int8"},
	"q8_0": {"q8_0", 34.0 / 32, "fp16"},
	"q4_0": {"q4_0", 18.0 / 32, "fp16"},
	"q4_1": {"q4_1", 20.0 / 32, "fp16"},
}

// ParsePrecision accepts f32, f16, bf16, fp8, int8, q8_0, q4_0, q4_1 and the spellings
// config.json's torch_dtype uses (float32, float16, bfloat16).
func ParsePrecision(s string) (Precision, error) {
	k := strings.ToLower(s)
	switch k {
	case "float32", "fp32":
		k = "f32"
	case "float16", "fp16", "half":
		k = "f16"
	case "bfloat16":
		k = "bf16"
	case "float8", "f8", "fp8_e4m3":
		k = "fp8"
	}
	p, ok := precisions[k]
	if !ok {
		return Precision{}, fmt.Errorf("dtype %q: not known (f32, f16, bf16, fp8, int8, q8_0, q4_0)", s)
	}
	return p, nil
}

// Params counts a model's parameters by role.
type Params struct {
	Embedding int64 `json:"embedding"`
	LMHead    int64 `json:"lm_head"` // 0 when tied to the embedding
	// Per model, summed over layers:
	Attention    int64 `json:"attention"`     // q, k, v, o projections (+ biases, q/k norms)
	DenseMLP     int64 `json:"dense_mlp"`     // dense SwiGLU blocks
	Experts      int64 `json:"experts"`       // all routed experts
	ActiveExpert int64 `json:"active_expert"` // the routed experts one token uses
	Shared       int64 `json:"shared_expert"` // always-on shared experts and their gates
	Router       int64 `json:"router"`
	Norms        int64 `json:"norms"`
	Total        int64 `json:"total"`
	// Active is what one token multiplies by: everything except the unused experts and the
	// embedding table (a lookup, not a product) but with the LM head, tied or not.
	Active int64 `json:"active"`
}

// expertParams is one routed expert's SwiGLU: gate, up and down.
func (s *Shape) expertParams() int64 { return 3 * int64(s.Hidden) * int64(s.MoEIntermediate) }

// moeLayers is how many layers route to experts.
func (s *Shape) moeLayers() int {
	if !s.MoE() {
		return 0
	}
	return s.Layers - min(s.DenseLayers, s.Layers)
}

// Params counts the parameters of s.
func (s *Shape) Params() Params {
	h, v, l := int64(s.Hidden), int64(s.Vocab), int64(s.Layers)
	q, kv := int64(s.Heads*s.HeadDim), int64(s.KVHeads*s.HeadDim)
	var p Params
	p.Embedding = v * h
	if !s.TiedEmbeddings {
		p.LMHead = v * h
	}
	attn := h*q + 2*h*kv + q*h
	if s.AttentionBias {
		attn += q + 2*kv
	}
	if s.QKNorm {
		attn += 2 * int64(s.HeadDim)
	}
	p.Attention = l * attn
	p.Norms = l*2*h + h
	moe := int64(s.moeLayers())
	p.DenseMLP = (l - moe) * 3 * h * int64(s.Intermediate)
	if moe > 0 {
		p.Experts = moe * int64(s.Experts) * s.expertParams()
		p.ActiveExpert = moe * int64(s.ExpertsPerTok) * s.expertParams()
		p.Router = moe * h * int64(s.Experts)
		if s.SharedExpertSize > 0 {
			p.Shared = moe * (3*h*int64(s.SharedExpertSize) + h) // + the shared expert's sigmoid gate
		}
	}
	p.Total = p.Embedding + p.LMHead + p.Attention + p.DenseMLP + p.Experts + p.Router + p.Shared + p.Norms
	p.Active = p.Attention + p.DenseMLP + p.ActiveExpert + p.Router + p.Shared + p.Norms + v*h
	return p
}

// KVBytesPerToken is the KV cache one token occupies: a key and a value vector per KV head
// per layer, 2·layers·kv_heads·head_dim·bytes.
func (s *Shape) KVBytesPerToken(kv Precision) float64 {
	return 2 * float64(s.Layers) * float64(s.KVHeads) * float64(s.HeadDim) * kv.Bytes
}

// WeightBytes is the memory the weights take in dtype dt (norm scales stay in dt too; they
// are a rounding error).
func (s *Shape) WeightBytes(dt Precision) float64 { return float64(s.Params().Total) * dt.Bytes }

// touchedExperts is the expected number of distinct experts per MoE layer that a step
// with `tokens` tokens reads: each token picks k of E, so an expert is missed by all of
// them with probability (1−k/E)^tokens. One token reads k experts; a large batch reads
// them all, which is why MoE decode gets its bandwidth advantage only at small batches.
func (s *Shape) touchedExperts(tokens int) float64 {
	if !s.MoE() {
		return 0
	}
	e, k := float64(s.Experts), float64(s.ExpertsPerTok)
	return e * (1 - math.Pow(1-k/e, float64(tokens)))
}

// Work is what one pass moves and computes.
type Work struct {
	FLOPs           float64 `json:"flops"`
	WeightBytes     float64 `json:"weight_bytes"`
	KVReadBytes     float64 `json:"kv_read_bytes"`
	KVWriteBytes    float64 `json:"kv_write_bytes"`
	ActivationBytes float64 `json:"activation_bytes"`
	LMHeadFLOPs     float64 `json:"lm_head_flops"`
	LMHeadBytes     float64 `json:"lm_head_bytes"`
}

// Bytes is all memory traffic of the pass.
func (w Work) Bytes() float64 {
	return w.WeightBytes + w.KVReadBytes + w.KVWriteBytes + w.ActivationBytes
}

func (w *Work) add(o Work) {
	w.FLOPs += o.FLOPs
	w.WeightBytes += o.WeightBytes
	w.KVReadBytes += o.KVReadBytes
	w.KVWriteBytes += o.KVWriteBytes
	w.ActivationBytes += o.ActivationBytes
	w.LMHeadFLOPs += o.LMHeadFLOPs
	w.LMHeadBytes += o.LMHeadBytes
}

// activationsPerToken is the number of activation values one token reads and writes
// through the matrix products of all layers (each product reads its input row, writes its
// output row), plus the logits.
func (s *Shape) activationsPerToken() float64 {
	h, q, kv := float64(s.Hidden), float64(s.Heads*s.HeadDim), float64(s.KVHeads*s.HeadDim)
	inter := float64(s.Intermediate)
	if s.MoE() {
		inter = float64(s.ExpertsPerTok*s.MoEIntermediate + s.SharedExpertSize)
	}
	perLayer := (h + q) + 2*(h+kv) + (q + h) + 2*(h+inter) + (inter + h)
	return float64(s.Layers) * perLayer
}

// matmulWeightBytes is the bytes of every weight matrix a pass of `tokens` tokens reads,
// without the embedding table and the LM head.
func (s *Shape) matmulWeightBytes(dt Precision, tokens int) float64 {
	p := s.Params()
	base := float64(p.Attention+p.DenseMLP+p.Router+p.Shared+p.Norms) * dt.Bytes
	if s.MoE() {
		base += float64(s.moeLayers()) * s.touchedExperts(tokens) * float64(s.expertParams()) * dt.Bytes
	}
	return base
}

// layerFLOPsPerToken is 2 FLOPs (multiply, add) per active weight of the layers.
func (s *Shape) layerFLOPsPerToken() float64 {
	p := s.Params()
	return 2 * float64(p.Attention+p.DenseMLP+p.ActiveExpert+p.Router+p.Shared)
}

// attentionFLOPs is q·k for every cached position and the weighted sum of values: 4 FLOPs
// per head dimension per attended position, per head, per layer.
func (s *Shape) attentionFLOPs(positions float64) float64 {
	return 4 * float64(s.Layers) * float64(s.Heads) * float64(s.HeadDim) * positions
}

// Prefill is one batched pass over `batch` prompts of n tokens each, with an empty cache.
// Logits are computed for the last position only (what engines return after a prefill).
// The cache is written once and, as with FlashAttention, read once per pass.
func (s *Shape) Prefill(n, batch int, dt, kv, act Precision) Work {
	t := float64(n * batch)
	vh := float64(s.Vocab) * float64(s.Hidden)
	var w Work
	w.LMHeadFLOPs = 2 * vh * float64(batch)
	w.LMHeadBytes = vh * dt.Bytes
	w.FLOPs = t*s.layerFLOPsPerToken() + float64(batch)*s.attentionFLOPs(float64(n)*float64(n+1)/2) + w.LMHeadFLOPs
	w.WeightBytes = s.matmulWeightBytes(dt, n*batch) + w.LMHeadBytes + t*float64(s.Hidden)*dt.Bytes
	w.KVWriteBytes = t * s.KVBytesPerToken(kv)
	w.KVReadBytes = w.KVWriteBytes
	w.ActivationBytes = t * s.activationsPerToken() * act.Bytes
	return w
}

// DecodeStep is one decode step of `batch` sequences that each hold ctx tokens already:
// every weight is read once for the batch, every sequence reads its own cache.
func (s *Shape) DecodeStep(ctx, batch int, dt, kv, act Precision) Work {
	b := float64(batch)
	vh := float64(s.Vocab) * float64(s.Hidden)
	var w Work
	w.LMHeadFLOPs = 2 * vh * b
	w.LMHeadBytes = vh * dt.Bytes
	w.FLOPs = b*s.layerFLOPsPerToken() + b*s.attentionFLOPs(float64(ctx+1)) + w.LMHeadFLOPs
	w.WeightBytes = s.matmulWeightBytes(dt, batch) + w.LMHeadBytes + b*float64(s.Hidden)*dt.Bytes
	w.KVWriteBytes = b * s.KVBytesPerToken(kv)
	w.KVReadBytes = b * float64(ctx+1) * s.KVBytesPerToken(kv)
	w.ActivationBytes = b * (s.activationsPerToken() + float64(s.Vocab)) * act.Bytes
	return w
}
