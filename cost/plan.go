package cost

import (
	"fmt"
	"math"
	"strings"
)

// PlanInput is a serving target.
type PlanInput struct {
	QPS            float64 // requests per second, each Prompt in and Output out
	Prompt, Output int
	P99TTFT        float64 // seconds; 0: no target
	GPUHourPrice   float64 // per device-hour; 0: no money figures
	DType, KV      Precision
	MaxBatch       int     // most sequences a replica runs at once (vLLM --max-num-seqs); default 256
	MemUtil        float64 // share of device memory for weights + KV (vLLM --gpu-memory-utilization); default 0.9
	TargetUtil     float64 // highest planned load as a share of a replica's capacity; default 0.8
	Model          string  // what the launch commands serve
}

// Plan is a deployment: TP devices per replica, Replicas replicas.
type Plan struct {
	TP          int     `json:"tensor_parallel"`
	Replicas    int     `json:"replicas"`
	Devices     int     `json:"devices"`
	WeightBytes float64 `json:"weight_bytes_per_device"`
	KVBytes     float64 `json:"kv_bytes_per_device"`
	// MaxSeqs is how many sequences of Prompt+Output tokens a replica's KV memory holds;
	// BatchCap the batch used (also capped by MaxBatch).
	MaxSeqs  int `json:"max_seqs_per_replica"`
	BatchCap int `json:"batch_cap"`
	// Batch is the steady-state number of sequences decoding at once in a replica.
	Batch       float64 `json:"batch"`
	PrefillS    float64 `json:"prefill_s"`     // one request's prompt, alone
	DecodeStepS float64 `json:"decode_step_s"` // one step at the steady batch
	CapacityQPS float64 `json:"capacity_qps_per_replica"`
	Utilization float64 `json:"utilization"`
	TTFTP50     float64 `json:"ttft_p50_s"`
	TTFTP99     float64 `json:"ttft_p99_s"`
	LatencyS    float64 `json:"e2e_latency_s"` // TTFT + Output steps
	DecodeTokS  float64 `json:"decode_tok_s_per_seq"`
	OutputTokS  float64 `json:"output_tok_s"` // whole deployment
	InputTokS   float64 `json:"input_tok_s"`
	CostPerHour float64 `json:"cost_per_hour,omitempty"`
	CostPerMIn  float64 `json:"cost_per_m_input,omitempty"`
	CostPerMOut float64 `json:"cost_per_m_output,omitempty"`
	// ExpertParallel: a mixture of experts on TP > 1 devices whose experts divide evenly
	// among them keeps whole experts on each device (ExpertsPerDevice of each layer's) instead
	// of a 1/TP slice of every expert: vLLM --enable-expert-parallel, SGLang --ep-size.
	ExpertParallel   bool     `json:"expert_parallel,omitempty"`
	ExpertsPerDevice int      `json:"experts_per_device,omitempty"`
	VLLM             string   `json:"vllm"`
	SGLang           string   `json:"sglang"`
	Notes            []string `json:"notes,omitempty"`
}

// Plan picks the tensor-parallel degree and replica count that serve in on devices of
// profile p with the fewest devices (ties: the smaller TP, which wastes less on
// communication). Each candidate TP must divide the attention heads and hold the weights
// plus at least one full sequence of KV cache.
//
// A replica runs continuous batching: prefills interrupt decoding, so with request rate λ
// per replica the decoding batch B settles where B = λ·Output·step(B) / (1 − λ·prefill)
// (Little's law over the decode phase). Capacity is the rate at the largest batch memory
// allows; TTFT's tail uses the M/M/1 waiting-time tail for the prefill queue — an
// approximation, stated as such in docs/cost.md.
func (s *Shape) Plan(p *Profile, in PlanInput) (*Plan, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if in.QPS <= 0 || in.Prompt <= 0 || in.Output <= 0 {
		return nil, fmt.Errorf("plan: qps %g, prompt %d, output %d: all must be positive", in.QPS, in.Prompt, in.Output)
	}
	if in.MaxBatch <= 0 {
		in.MaxBatch = 256
	}
	if in.MemUtil <= 0 || in.MemUtil > 1 {
		in.MemUtil = 0.9
	}
	if in.TargetUtil <= 0 || in.TargetUtil >= 1 {
		in.TargetUtil = 0.8
	}
	if p.MemBytes() <= 0 {
		return nil, fmt.Errorf("plan: profile %s has no memory size", p.Name)
	}
	r, err := p.Rates(in.DType, 0)
	if err != nil {
		return nil, err
	}
	var best *Plan
	var reasons []string
	for _, tp := range []int{1, 2, 4, 8, 16} {
		if tp > 1 && p.Interconnect.GBs <= 0 {
			reasons = append(reasons, fmt.Sprintf("TP %d: %s has no interconnect", tp, p.Name))
			break
		}
		if s.Heads%tp != 0 {
			reasons = append(reasons, fmt.Sprintf("TP %d: %d attention heads do not split evenly", tp, s.Heads))
			continue
		}
		pl, why := s.planTP(p, r, in, tp)
		if pl == nil {
			reasons = append(reasons, fmt.Sprintf("TP %d: %s", tp, why))
			continue
		}
		if best == nil || pl.Devices < best.Devices {
			best = pl
		}
	}
	if best == nil {
		return nil, fmt.Errorf("plan: no deployment on %s fits: %s", p.Name, strings.Join(reasons, "; "))
	}
	best.Notes = append(best.Notes, reasons...)
	if s.MoE() && best.TP > 1 {
		if s.Experts%best.TP == 0 {
			best.ExpertParallel, best.ExpertsPerDevice = true, s.Experts/best.TP
			best.Notes = append(best.Notes, fmt.Sprintf("expert parallel: %d of the %d experts of each layer per device; the step time assumes balanced routing "+
				"(each device reads its share of the %.1f experts a decode step touches, as a 1/TP slice would) and prices the experts' all-to-all as the MLP's all-reduce",
				best.ExpertsPerDevice, s.Experts, s.touchedExperts(max(1, int(math.Ceil(best.Batch))))))
		} else {
			best.Notes = append(best.Notes, fmt.Sprintf("%d experts do not split evenly over TP %d: every expert is sliced across the devices (tensor parallel)", s.Experts, best.TP))
		}
	}
	if p.Kind == "cpu" {
		best.Notes = append(best.Notes, "the vLLM and SGLang commands target GPUs; on a CPU serve with tokenwise serve or llama.cpp")
	}
	best.VLLM, best.SGLang = launchCommands(in, best)
	return best, nil
}

// planTP sizes replicas of tp devices each, or says why tp cannot work.
func (s *Shape) planTP(p *Profile, r Rates, in PlanInput, tp int) (*Plan, string) {
	act := activationPrecision(p)
	weights := s.WeightBytes(in.DType) / float64(tp)
	usable := in.MemUtil * p.MemBytes()
	// KV heads split across devices; beyond tp = kv_heads each device keeps a copy of one.
	kvPerSeq := s.KVBytesPerToken(in.KV) * float64(in.Prompt+in.Output) / float64(min(tp, s.KVHeads))
	if weights+kvPerSeq > usable {
		return nil, fmt.Sprintf("weights %s + one sequence's KV %s per device exceed %s", fmtBytes(weights), fmtBytes(kvPerSeq), fmtBytes(usable))
	}
	maxSeqs := int((usable - weights) / kvPerSeq)
	capB := min(maxSeqs, in.MaxBatch)
	// A pass on tp devices: each does 1/tp of the work, then two all-reduces per layer
	// (after attention and after the MLP) of the tokens' hidden states.
	passTime := func(w Work, n, batch, ctx int) float64 {
		tokens := n * batch
		t := s.pass(r, w, n, batch, ctx, in.DType, in.KV).Seconds / float64(tp)
		if tp > 1 {
			bytes := float64(tokens) * float64(s.Hidden) * act.Bytes
			ring := 2 * float64(tp-1) / float64(tp) * bytes / (p.Interconnect.GBs * 1e9)
			t += 2 * float64(s.Layers) * (ring + p.Interconnect.LatencyUs*1e-6)
		}
		return t
	}
	ctx := in.Prompt + in.Output/2
	prefill := passTime(s.Prefill(in.Prompt, 1, in.DType, in.KV, act), in.Prompt, 1, 0)
	step := func(b int) float64 { return passTime(s.DecodeStep(ctx, b, in.DType, in.KV, act), 1, b, ctx) }
	perReq := func(b int) float64 { return prefill + float64(in.Output)*step(b)/float64(b) }
	capacity := 1 / perReq(capB)

	pl := &Plan{TP: tp, WeightBytes: weights, KVBytes: usable - weights, MaxSeqs: maxSeqs, BatchCap: capB, PrefillS: prefill, CapacityQPS: capacity}
	for reps := max(1, int(math.Ceil(in.QPS/(capacity*in.TargetUtil)))); reps <= 1<<16; reps++ {
		lambda := in.QPS / float64(reps)
		if lambda*prefill >= 1 {
			continue
		}
		// Fixed point of B = λ·Output·step(B)/(1 − λ·prefill).
		b := 1.0
		for range 100 {
			nb := lambda * float64(in.Output) * step(int(math.Ceil(b))) / (1 - lambda*prefill)
			nb = max(nb, 1)
			if math.Abs(nb-b) < 1e-3 {
				b = nb
				break
			}
			b = nb
		}
		if b > float64(capB) {
			continue
		}
		bi := max(1, int(math.Ceil(b)))
		st := step(bi)
		rho := lambda * prefill
		wait := 0.0
		if rho > 0.01 {
			wait = prefill / (1 - rho) * math.Log(100*rho) // M/M/1: P(wait > t) = ρ·e^{−(1−ρ)t/T}
		}
		pl.Replicas, pl.Devices = reps, reps*tp
		pl.Batch, pl.DecodeStepS = b, st
		pl.Utilization = lambda / capacity
		pl.TTFTP50 = prefill + st
		pl.TTFTP99 = prefill + st + max(wait, 0)
		pl.LatencyS = pl.TTFTP50 + float64(in.Output)*st
		pl.DecodeTokS = 1 / st
		if in.P99TTFT > 0 && pl.TTFTP99 > in.P99TTFT {
			if prefill+st > in.P99TTFT {
				return nil, fmt.Sprintf("prefill alone (%.3g s) misses the p99 TTFT target %.3g s", prefill+st, in.P99TTFT)
			}
			continue
		}
		pl.InputTokS, pl.OutputTokS = in.QPS*float64(in.Prompt), in.QPS*float64(in.Output)
		if in.GPUHourPrice > 0 {
			pl.CostPerHour = float64(pl.Devices) * in.GPUHourPrice
			perReqCost := pl.CostPerHour / 3600 / in.QPS
			dec := float64(in.Output) * st / b
			inShare := prefill / (prefill + dec)
			pl.CostPerMIn = perReqCost * inShare / float64(in.Prompt) * 1e6
			pl.CostPerMOut = perReqCost * (1 - inShare) / float64(in.Output) * 1e6
		}
		return pl, ""
	}
	return nil, "no replica count up to 65536 meets the targets"
}

func fmtBytes(b float64) string { return fmt.Sprintf("%.2f GB", b/1e9) }

// launchCommands are the vLLM and SGLang command lines for the plan.
func launchCommands(in PlanInput, pl *Plan) (vllm, sglang string) {
	model := in.Model
	if model == "" {
		model = "MODEL"
	}
	maxLen := in.Prompt + in.Output
	var vDType, sDType, quant, vKV, sKV string
	switch in.DType.Name {
	case "bf16":
		vDType, sDType = "bfloat16", "bfloat16"
	case "f16":
		vDType, sDType = "float16", "float16"
	case "f32":
		vDType, sDType = "float32", "float32"
	case "fp8":
		vDType, sDType, quant = "bfloat16", "bfloat16", "fp8"
	default:
		vDType, sDType = "auto", "auto" // GGUF / int8: the checkpoint says
	}
	switch in.KV.Name {
	case "fp8":
		vKV, sKV = "fp8", "fp8_e4m3"
	}
	v := []string{"vllm serve", model, fmt.Sprintf("--tensor-parallel-size %d", pl.TP)}
	if pl.Replicas > 1 {
		v = append(v, fmt.Sprintf("--data-parallel-size %d", pl.Replicas))
	}
	if pl.ExpertParallel {
		v = append(v, "--enable-expert-parallel")
	}
	v = append(v, fmt.Sprintf("--max-model-len %d", maxLen), fmt.Sprintf("--max-num-seqs %d", pl.BatchCap),
		fmt.Sprintf("--gpu-memory-utilization %.2f", in.MemUtil), "--dtype "+vDType)
	if quant != "" {
		v = append(v, "--quantization "+quant)
	}
	if vKV != "" {
		v = append(v, "--kv-cache-dtype "+vKV)
	}
	sg := []string{"python -m sglang.launch_server", "--model-path " + model, fmt.Sprintf("--tp %d", pl.TP)}
	if pl.Replicas > 1 {
		sg = append(sg, fmt.Sprintf("--dp %d", pl.Replicas))
	}
	if pl.ExpertParallel {
		sg = append(sg, fmt.Sprintf("--ep-size %d", pl.TP))
	}
	sg = append(sg, fmt.Sprintf("--context-length %d", maxLen), fmt.Sprintf("--max-running-requests %d", pl.BatchCap),
		fmt.Sprintf("--mem-fraction-static %.2f", in.MemUtil), "--dtype "+sDType)
	if quant != "" {
		sg = append(sg, "--quantization "+quant)
	}
	if sKV != "" {
		sg = append(sg, "--kv-cache-dtype "+sKV)
	}
	return strings.Join(v, " "), strings.Join(sg, " ")
}
