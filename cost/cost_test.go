package cost

import (
	"math"
	"path/filepath"
	"strings"
	"testing"
)

func shape(t *testing.T, name string) *Shape {
	t.Helper()
	s, err := LoadShape("testdata/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func prec(t *testing.T, name string) Precision {
	t.Helper()
	p, err := ParsePrecision(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func near(a, b, rel float64) bool { return math.Abs(a-b) <= rel*math.Abs(b) }

// Parameter counts published with the checkpoints (Hugging Face model cards / safetensors
// metadata), reproduced by hand from the shapes.
func TestParams(t *testing.T) {
	for _, c := range []struct {
		name          string
		total, active int64
	}{
		// Qwen3-4B: embedding 151936·2560 = 388,956,160; per layer attention
		// 2560·4096·2 + 2560·1024·2 + 2·128 (q/k norms) = 26,214,656, MLP 3·2560·9728 =
		// 74,711,040, norms 2·2560; ×36, + final norm: 4,022,468,096 (tied head).
		{"qwen3-4b", 4_022_468_096, 4_022_468_096},
		// Qwen3-0.6B: "0.44B non-embedding" on its model card; 596,049,920 in all.
		{"qwen3-0.6b", 596_049_920, 596_049_920},
		// Llama-3.2-1B: 1,235,814,400 (the model card's 1.23B).
		{"llama-3.2-1b", 1_235_814_400, 1_235_814_400},
		// SmolLM2-135M: 134,515,008.
		{"smollm2-135m", 134_515_008, 134_515_008},
	} {
		p := shape(t, c.name).Params()
		if p.Total != c.total || p.Active != c.active {
			t.Errorf("%s: total %d active %d, want %d and %d", c.name, p.Total, p.Active, c.total, c.active)
		}
	}
}

// Qwen3-30B-A3B: "30.5B total, 3.3B activated" (model card). The activated count there
// includes the embedding table; Params.Active does not (a lookup is not a product).
func TestParamsMoE(t *testing.T) {
	s := shape(t, "qwen3-30b-a3b")
	p := s.Params()
	// Per layer: attention 2048·4096·2 + 2048·512·2 + 256 = 18,874,624; 128 experts of
	// 3·2048·768 = 4,718,592; router 2048·128; norms 4096. ×48, + embedding and head
	// 2·151936·2048, + final norm.
	perLayer := int64(18_874_624 + 128*4_718_592 + 2048*128 + 4096)
	want := 48*perLayer + 2*151936*2048 + 2048
	if p.Total != want {
		t.Errorf("total %d, want %d", p.Total, want)
	}
	if !near(float64(p.Total), 30.5e9, 0.01) {
		t.Errorf("total %d, want ≈30.5B", p.Total)
	}
	if act := p.Active + p.Embedding; !near(float64(act), 3.3e9, 0.03) {
		t.Errorf("active with embedding %d, want ≈3.3B", act)
	}
	// One token reads 8 of 128 experts per layer; a batch of 256 reads nearly all.
	if e := s.touchedExperts(1); !near(e, 8, 1e-12) {
		t.Errorf("touched experts at batch 1: %g, want 8", e)
	}
	if e := s.touchedExperts(256); e < 127 {
		t.Errorf("touched experts at batch 256: %g, want ≈128", e)
	}
}

func TestKVBytes(t *testing.T) {
	s := shape(t, "qwen3-4b")
	// 2 (k and v) · 36 layers · 8 KV heads · 128 · 2 bytes.
	if got := s.KVBytesPerToken(prec(t, "bf16")); got != 2*36*8*128*2 {
		t.Errorf("Qwen3-4B KV bytes/token %g, want %d", got, 2*36*8*128*2)
	}
	if got := shape(t, "llama-3.2-1b").KVBytesPerToken(prec(t, "f32")); got != 2*16*8*64*4 {
		t.Errorf("Llama-3.2-1B f32 KV bytes/token %g, want %d", got, 2*16*8*64*4)
	}
}

// The seeds' claim, on the numbers: Qwen3-4B bf16 on an H100 at batch 1 decodes far more
// slowly per token than it prefills, because a step reads all 8 GB of weights for one token.
func TestQwen3_4BOnH100(t *testing.T) {
	s := shape(t, "qwen3-4b")
	hw, err := LoadProfile("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	bf16 := prec(t, "bf16")
	e, err := s.Estimate(hw, Workload{Prompt: 1024, Output: 256, Batch: 1, DType: bf16, KV: bf16})
	if err != nil {
		t.Fatal(err)
	}
	if e.Decode.Bound != "memory" || e.Prefill.Bound != "compute" {
		t.Errorf("bounds: prefill %s, decode %s; want compute, memory", e.Prefill.Bound, e.Decode.Bound)
	}
	// Hand computation of the first decode step: 8.045 GB of weights + 1025 cached
	// tokens·147,456 B of KV over 3350 GB/s·0.8.
	step := (4_022_468_096*2.0 + 1025*147456) / (3350e9 * 0.8)
	first := s.DecodeStep(1024, 1, bf16, bf16, bf16)
	if got, _, _ := e.Rates.Time(first); !near(got, step, 0.01) {
		t.Errorf("decode step %.3g s, hand %.3g s", got, step)
	}
	// Prefill: 2·(params − embedding)·1024 + attention 4·36·32·128·1024·1025/2 + head,
	// over 989.5 TFLOP/s·0.6.
	pf := (2*float64(4_022_468_096-388_956_160)*1024 + 4*36*32*128*1024*1025/2 + 2*151936*2560) / (989.5e12 * 0.6)
	if !near(e.Prefill.Seconds, pf, 0.01) {
		t.Errorf("prefill %.3g s, hand %.3g s", e.Prefill.Seconds, pf)
	}
	if e.OutputOverInput < 5 {
		t.Errorf("output/input cost %.1f: want several times", e.OutputOverInput)
	}
	// The LM head is ~10% of a 4B model's decode bytes (seeds), ~26% of a 0.6B model's.
	if !near(e.LMHeadByteShare, 0.097, 0.05) {
		t.Errorf("Qwen3-4B LM head byte share %.3f, want ≈0.097", e.LMHeadByteShare)
	}
	small, err := shape(t, "qwen3-0.6b").Estimate(hw, Workload{Prompt: 1024, Output: 256, Batch: 1, DType: bf16, KV: bf16})
	if err != nil {
		t.Fatal(err)
	}
	if small.LMHeadByteShare < 0.22 || small.LMHeadByteShare > 0.28 {
		t.Errorf("Qwen3-0.6B LM head byte share %.3f, want ≈0.26", small.LMHeadByteShare)
	}
	// Batching divides the weight reads among sequences: the ratio falls with batch.
	big, err := s.Estimate(hw, Workload{Prompt: 1024, Output: 256, Batch: 64, DType: bf16, KV: bf16})
	if err != nil {
		t.Fatal(err)
	}
	if big.OutputOverInput >= e.OutputOverInput/4 {
		t.Errorf("output/input at batch 64 %.1f, at batch 1 %.1f: want a large drop", big.OutputOverInput, e.OutputOverInput)
	}
	// KV memory: (80 GB·0.9 − 8.045 GB of weights) / (1280 tokens·147,456 B) = 338.8.
	if e.MaxSeqs != 338 {
		t.Errorf("max sequences %d, want 338", e.MaxSeqs)
	}
	// At ~1.1k tokens of context each sequence's KV reads (170 MB) grow with the batch as
	// fast as its FLOPs (8 GFLOP): 47 FLOP/byte, under the H100's 221, so decode never turns
	// compute-bound. At 128 tokens the weights dominate and it does, at a batch of hundreds.
	if e.RidgeBatch != 0 {
		t.Errorf("ridge batch at 1152 tokens of context: %d, want none", e.RidgeBatch)
	}
	short := s.RidgeBatch(e.Rates, 128, bf16, bf16, bf16)
	if short < 200 || short > 1000 {
		t.Errorf("ridge batch at 128 tokens of context: %d, want a few hundred", short)
	}
}

func TestProfilesLoad(t *testing.T) {
	names := Profiles()
	if len(names) < 6 {
		t.Fatalf("profiles %v: want the GPUs and CPU classes", names)
	}
	for _, n := range names {
		p, err := LoadProfile(n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if p.Source == "" {
			t.Errorf("%s: no source", n)
		}
		if _, err := p.Rates(prec(t, "bf16"), 0); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	if _, err := LoadProfile("no-such-gpu"); err == nil {
		t.Error("unknown profile: no error")
	}
}

func TestBadInput(t *testing.T) {
	if _, err := ParseConfigJSON([]byte(`{"model_type":"llama","hidden_size":0}`)); err == nil {
		t.Error("zero hidden size: no error")
	}
	if _, err := ParseConfigJSON([]byte(`{"num_experts": 8, "num_experts_per_tok": 9, "vocab_size":1,"hidden_size":1,"num_hidden_layers":1,"num_attention_heads":1,"moe_intermediate_size":1}`)); err == nil {
		t.Error("more experts per token than experts: no error")
	}
	if _, err := ParsePrecision("q3_x"); err == nil {
		t.Error("unknown dtype: no error")
	}
}

// A calibrated CPU profile: decode at batch 1 runs the measured matrix×vector kernel, so a
// step takes weight bytes / its GB/s (plus the KV cache at the f32 kernel's rate); prefill
// runs the matrix×matrix kernel at the rate measured nearest its token count.
func TestCalibratedRates(t *testing.T) {
	hw := &Profile{Name: "test-cpu", Kind: "cpu", MemGB: 16, Calibration: []ThreadRates{
		{Threads: 1, ReadGBs: 10, FMAGFLOPS: 50, Kernels: map[string]KernelRates{
			"bf16": {GEMVGBs: 2, GEMMGFLOPS: 8, GEMM: []TokenRate{{16, 4}, {64, 6}, {256, 8}}},
			"f32":  {GEMVGBs: 4, GEMMGFLOPS: 8},
		}},
		{Threads: 2, ReadGBs: 20, FMAGFLOPS: 100},
	}}
	if err := hw.Validate(); err != nil {
		t.Fatal(err)
	}
	bf16, f32 := prec(t, "bf16"), prec(t, "f32")
	r, err := hw.Rates(bf16, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.WeightBW != 2e9 || r.OtherBW != 4e9 || r.MatVecFLOPS != 2e9 {
		t.Errorf("rates %+v", r)
	}
	for _, c := range []struct {
		tokens int
		gflops float64
	}{{1, 2}, {8, 4}, {16, 4}, {32, 5}, {64, 6}, {128, 7}, {1024, 8}} {
		if got := r.forBatch(c.tokens).FLOPS / 1e9; !near(got, c.gflops, 1e-9) {
			t.Errorf("%d tokens: %g GFLOP/s, want %g", c.tokens, got, c.gflops)
		}
	}
	// Two threads have no kernel rates: raw peaks.
	r2, err := hw.Rates(bf16, 2)
	if err != nil {
		t.Fatal(err)
	}
	if r2.WeightBW != 20e9 || r2.FLOPS != 100e9 {
		t.Errorf("2 threads: %+v", r2)
	}
	s := shape(t, "smollm2-135m")
	e, err := s.Estimate(hw, Workload{Prompt: 32, Output: 1, Batch: 1, DType: bf16, KV: f32, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	step := s.DecodeStep(32, 1, bf16, f32, f32)
	want := max(step.FLOPs/2e9, step.WeightBytes/2e9+(step.Bytes()-step.WeightBytes)/4e9)
	if !near(e.Decode.Seconds, want, 1e-9) {
		t.Errorf("decode step %g s, want %g", e.Decode.Seconds, want)
	}
	pf := s.Prefill(32, 1, bf16, f32, f32)
	if want := max(pf.FLOPs/5e9, pf.WeightBytes/2e9+(pf.Bytes()-pf.WeightBytes)/4e9); !near(e.Prefill.Seconds, want, 1e-9) {
		t.Errorf("prefill %g s, want %g", e.Prefill.Seconds, want)
	}
}

func TestPlan(t *testing.T) {
	s := shape(t, "qwen3-4b")
	bf16 := prec(t, "bf16")
	for _, c := range []struct {
		hw string
		tp int
	}{{"h100-sxm", 1}, {"l4", 1}} {
		hw, err := LoadProfile(c.hw)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Plan(hw, PlanInput{QPS: 10, Prompt: 1024, Output: 256, DType: bf16, KV: bf16, GPUHourPrice: 2})
		if err != nil {
			t.Fatal(err)
		}
		if p.TP != c.tp || p.Utilization > 0.8 || p.Batch > float64(p.BatchCap) {
			t.Errorf("%s: %+v", c.hw, p)
		}
		// Little's law at the steady batch: B = λ·output·step/(1 − λ·prefill).
		lambda := 10 / float64(p.Replicas)
		if b := lambda * 256 * p.DecodeStepS / (1 - lambda*p.PrefillS); !near(b, p.Batch, 0.05) {
			t.Errorf("%s: batch %g, Little's law gives %g", c.hw, p.Batch, b)
		}
	}
	// A p99 TTFT target tighter than a prefill cannot be met.
	h100, _ := LoadProfile("h100-sxm")
	if _, err := s.Plan(h100, PlanInput{QPS: 1, Prompt: 1024, Output: 16, DType: bf16, KV: bf16, P99TTFT: 0.001}); err == nil {
		t.Error("1 ms p99 TTFT: no error")
	}
}

// A mixture of experts too large for one device is planned with expert parallelism: Mixtral
// 8x7B in bf16 (93 GB) on 80 GB H100s takes TP 2 with 4 whole experts per device, and the
// launch commands ask vLLM and SGLang for it; Qwen3-30B-A3B (61 GB) fits one device, with no
// expert flags.
func TestPlanMoE(t *testing.T) {
	bf16 := prec(t, "bf16")
	h100, err := LoadProfile("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		config   string
		tp, per  int
		vllm, sg string
	}{
		{"mixtral-8x7b", 2, 4, "--enable-expert-parallel", "--ep-size 2"},
		{"qwen3-30b-a3b", 1, 0, "", ""},
	} {
		s, err := LoadShape(filepath.Join("..", "configs", c.config+".json"))
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Plan(h100, PlanInput{QPS: 2, Prompt: 1024, Output: 256, DType: bf16, KV: bf16})
		if err != nil {
			t.Fatal(err)
		}
		if p.TP != c.tp || p.ExpertParallel != (c.per > 0) || p.ExpertsPerDevice != c.per {
			t.Errorf("%s: TP %d, expert parallel %v with %d experts per device; want TP %d, %d per device", c.config, p.TP, p.ExpertParallel, p.ExpertsPerDevice, c.tp, c.per)
		}
		if c.vllm != "" && (!strings.Contains(p.VLLM, c.vllm) || !strings.Contains(p.SGLang, c.sg)) {
			t.Errorf("%s: launch commands\n%s\n%s\nwant %s and %s", c.config, p.VLLM, p.SGLang, c.vllm, c.sg)
		}
		if c.vllm == "" && (strings.Contains(p.VLLM, "expert") || strings.Contains(p.SGLang, "--ep-size")) {
			t.Errorf("%s on one device: expert-parallel flags in\n%s\n%s", c.config, p.VLLM, p.SGLang)
		}
		t.Logf("%s: %s\n%s\n%v", c.config, p.VLLM, p.SGLang, p.Notes)
	}
}
