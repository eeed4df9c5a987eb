package cost

import (
	"errors"
	"fmt"
)

// Workload is what the model is asked to do: batch sequences, each a prompt of Prompt
// tokens followed by Output generated tokens.
type Workload struct {
	Prompt, Output, Batch int
	DType                 Precision // weights
	KV                    Precision // KV cache
	Threads               int       // CPU profiles: which calibration entry
	MemBudget             float64   // bytes for weights + KV; 0: 90% of the device memory
}

// PhaseEstimate is one phase's work and its roofline time.
type PhaseEstimate struct {
	Work
	Tokens   int     `json:"tokens"`
	Seconds  float64 `json:"seconds"`
	ComputeS float64 `json:"compute_s"`
	MemoryS  float64 `json:"memory_s"`
	Bound    string  `json:"bound"` // "compute" or "memory"
	// OverheadS is the part of Seconds that is neither FLOPs nor bytes: the engine's
	// per-call, per-layer and attention costs (calibrated CPU profiles only, engine.go).
	OverheadS float64 `json:"overhead_s,omitempty"`
	TokS      float64 `json:"tok_s"`
	// SecondsPerToken is the phase's time divided by the tokens it handled.
	SecondsPerToken float64 `json:"seconds_per_token"`
	// Intensity is FLOPs per byte moved: above the device's FLOPS/bandwidth ridge the
	// phase is compute-bound.
	Intensity float64 `json:"flops_per_byte"`
}

// Estimate is the cost model's answer for one workload on one device.
type Estimate struct {
	Model    string   `json:"model"`
	Hardware string   `json:"hardware"`
	Workload workload `json:"workload"`
	Rates    Rates    `json:"rates"`
	Params   Params   `json:"params"`

	WeightBytes     float64 `json:"weight_bytes"`
	KVBytesPerToken float64 `json:"kv_bytes_per_token"`
	KVBytesPerSeq   float64 `json:"kv_bytes_per_seq"` // prompt + output tokens
	MemBudget       float64 `json:"mem_budget_bytes"`
	MaxSeqs         int     `json:"max_concurrent_seqs"` // sequences whose KV fits next to the weights

	Prefill PhaseEstimate `json:"prefill"`
	Decode  PhaseEstimate `json:"decode"` // all Output steps together
	// PrefillTokS and DecodeTokS are tokens per second over the batch.
	PrefillTokS float64 `json:"prefill_tok_s"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	// OutputOverInput is decode time per output token over prefill time per input token.
	OutputOverInput float64 `json:"output_over_input_cost"`
	// LMHeadFLOPShare and LMHeadByteShare are the LM head's part of decode's FLOPs and bytes;
	// LMHeadTimeShare its part of decode time under the roofline.
	LMHeadFLOPShare float64 `json:"lm_head_flop_share"`
	LMHeadByteShare float64 `json:"lm_head_byte_share"`
	LMHeadTimeShare float64 `json:"lm_head_share"`
	// RidgeBatch is the batch at which a decode step turns compute-bound at this context.
	RidgeBatch int `json:"decode_ridge_batch"`
	// DecodeExperts is, for a mixture of experts, the distinct experts per layer a decode
	// step of the batch reads, under uniform routing: E·(1−(1−k/E)^B). The step's weight
	// bytes count those experts. Uniform routing is an upper bound for a trained router
	// (experts_test.go checks it against measured router choices).
	DecodeExperts float64 `json:"decode_experts_per_layer,omitempty"`
}

type workload struct {
	Prompt  int    `json:"prompt"`
	Output  int    `json:"output"`
	Batch   int    `json:"batch"`
	DType   string `json:"dtype"`
	KVDType string `json:"kv_dtype"`
}

// activationPrecision is what activations are stored in: f32 in tokenwise on a CPU,
// 16-bit in GPU engines.
func activationPrecision(p *Profile) Precision {
	if p.Kind == "cpu" {
		return precisions["f32"]
	}
	return precisions["bf16"]
}

// Estimate runs the roofline for w on p.
func (s *Shape) Estimate(p *Profile, w Workload) (*Estimate, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if w.Prompt <= 0 || w.Batch <= 0 || w.Output < 0 {
		return nil, fmt.Errorf("workload: prompt %d, output %d, batch %d: prompt and batch must be positive, output not negative", w.Prompt, w.Output, w.Batch)
	}
	if w.DType.Bytes == 0 || w.KV.Bytes == 0 {
		return nil, errors.New("workload: dtype and KV dtype must be set")
	}
	r, err := p.Rates(w.DType, w.Threads)
	if err != nil {
		return nil, err
	}
	act := activationPrecision(p)
	e := &Estimate{
		Model: s.Name, Hardware: p.Name, Rates: r, Params: s.Params(),
		Workload:        workload{w.Prompt, w.Output, w.Batch, w.DType.Name, w.KV.Name},
		WeightBytes:     s.WeightBytes(w.DType),
		KVBytesPerToken: s.KVBytesPerToken(w.KV),
	}
	e.KVBytesPerSeq = e.KVBytesPerToken * float64(w.Prompt+w.Output)
	e.MemBudget = w.MemBudget
	if e.MemBudget <= 0 {
		e.MemBudget = 0.9 * p.MemBytes()
	}
	if free := e.MemBudget - e.WeightBytes; free > 0 && e.KVBytesPerSeq > 0 {
		e.MaxSeqs = int(free / e.KVBytesPerSeq)
	}

	pw := s.Prefill(w.Prompt, w.Batch, w.DType, w.KV, act)
	pc := s.pass(r, pw, w.Prompt, w.Batch, 0, w.DType, w.KV)
	e.Prefill = PhaseEstimate{Work: pw, Tokens: w.Prompt * w.Batch, Seconds: pc.Seconds, ComputeS: pc.Compute, MemoryS: pc.Memory, OverheadS: pc.Overhead}
	finish(&e.Prefill)
	// Decode step j attends over prompt + j cached tokens; the steps are summed one by one
	// because each is max(compute, memory) of its own.
	var dw Work
	var ds, dc, dm, do, headS float64
	for j := range w.Output {
		step := s.DecodeStep(w.Prompt+j, w.Batch, w.DType, w.KV, act)
		c := s.pass(r, step, 1, w.Batch, w.Prompt+j, w.DType, w.KV)
		dw.add(step)
		ds, dc, dm, do = ds+c.Seconds, dc+c.Compute, dm+c.Memory, do+c.Overhead
		headS += c.Head // the head alone, under the same model
	}
	e.Decode = PhaseEstimate{Work: dw, Tokens: w.Output * w.Batch, Seconds: ds, ComputeS: dc, MemoryS: dm, OverheadS: do}
	finish(&e.Decode)
	e.PrefillTokS, e.DecodeTokS = e.Prefill.TokS, e.Decode.TokS
	if e.Decode.Tokens > 0 && e.Prefill.SecondsPerToken > 0 {
		e.OutputOverInput = e.Decode.SecondsPerToken / e.Prefill.SecondsPerToken
	}
	if dw.FLOPs > 0 {
		e.LMHeadFLOPShare = dw.LMHeadFLOPs / dw.FLOPs
		e.LMHeadByteShare = dw.LMHeadBytes / dw.Bytes()
		e.LMHeadTimeShare = headS / ds
	}
	e.RidgeBatch = s.RidgeBatch(r, w.Prompt+w.Output/2, w.DType, w.KV, act)
	e.DecodeExperts = s.touchedExperts(w.Batch)
	return e, nil
}

func finish(p *PhaseEstimate) {
	p.Bound = "memory"
	if p.ComputeS >= p.MemoryS {
		p.Bound = "compute"
	}
	if p.Seconds > 0 && p.Tokens > 0 {
		p.TokS = float64(p.Tokens) / p.Seconds
		p.SecondsPerToken = p.Seconds / float64(p.Tokens)
	}
	if b := p.Bytes(); b > 0 {
		p.Intensity = p.FLOPs / b
	}
}

// RidgeBatch is the smallest batch at which a decode step at context ctx is compute-bound
// (0 if none up to 1<<16: the KV reads grow with the batch as fast as the FLOPs, so long
// contexts may never get there).
func (s *Shape) RidgeBatch(r Rates, ctx int, dt, kv, act Precision) int {
	bound := func(b int) bool {
		c := s.pass(r, s.DecodeStep(ctx, b, dt, kv, act), 1, b, ctx, dt, kv)
		return c.Compute >= c.Memory
	}
	if !bound(1 << 16) {
		return 0
	}
	lo, hi := 1, 1<<16
	for lo < hi {
		mid := (lo + hi) / 2
		if bound(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// DecodeRidge is RidgeBatch on profile p with its rates for weights dt at threads: the most
// tokens a decode step (every sequence's last token and its drafts) carries before it turns
// compute-bound, which bounds what speculative verification may add to a step
// (engine.EngineConfig.MaxVerifyTokens).
func (s *Shape) DecodeRidge(p *Profile, ctx int, dt, kv Precision, threads int) (int, error) {
	r, err := p.Rates(dt, threads)
	if err != nil {
		return 0, err
	}
	return s.RidgeBatch(r, ctx, dt, kv, activationPrecision(p)), nil
}

// Sweep is time per token against batch size, for the plot.
type SweepPoint struct {
	Batch          int     `json:"batch"`
	PrefillPerTokS float64 `json:"prefill_s_per_token"`
	DecodePerTokS  float64 `json:"decode_s_per_token"`
	DecodeBound    string  `json:"decode_bound"`
}

// Sweep evaluates prefill and one mid-generation decode step at each batch size.
func (s *Shape) Sweep(p *Profile, w Workload, batches []int) ([]SweepPoint, error) {
	r, err := p.Rates(w.DType, w.Threads)
	if err != nil {
		return nil, err
	}
	act := activationPrecision(p)
	var out []SweepPoint
	for _, b := range batches {
		ctx := w.Prompt + w.Output/2
		pt := s.pass(r, s.Prefill(w.Prompt, b, w.DType, w.KV, act), w.Prompt, b, 0, w.DType, w.KV)
		dt := s.pass(r, s.DecodeStep(ctx, b, w.DType, w.KV, act), 1, b, ctx, w.DType, w.KV)
		bound := "memory"
		if dt.Compute >= dt.Memory {
			bound = "compute"
		}
		out = append(out, SweepPoint{Batch: b, PrefillPerTokS: pt.Seconds / float64(b*w.Prompt), DecodePerTokS: dt.Seconds / float64(b), DecodeBound: bound})
	}
	return out, nil
}
