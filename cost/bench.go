package cost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// BenchOptions say what Bench runs.
type BenchOptions struct {
	PromptTokens int // prompt length of the prefill (default 128)
	GenTokens    int // decode steps (default 32)
	Threads      int // kernel threads (0: one per CPU)
	Repeats      int // timed generations; the median is reported (default 3)
	Warmup       int // untimed generations first (default 1)
	// KVCache is the KV cache dtype (tensor.F32, the zero value, or tensor.F16).
	KVCache tensor.DType
	// Mmap maps the checkpoint instead of reading it into memory (model.Options.Mmap).
	Mmap bool
	Log  io.Writer
}

// BenchResult is one model's measured speed. Rates are medians over the repeats.
type BenchResult struct {
	Model   string `json:"model"`
	DType   string `json:"dtype"` // the dtype holding most weight bytes
	Threads int    `json:"threads"`
	// GGMLBuild is the llama.cpp CPU build whose arithmetic the kernels ran (kernels.GGMLBuild:
	// avx2, avx512, or amx, TOKENWISE_GGML_BUILD): the same model runs at other rates under
	// each (docs/kernels.md).
	GGMLBuild    string  `json:"ggml_build"`
	PromptTokens int     `json:"prompt_tokens"`
	GenTokens    int     `json:"gen_tokens"`
	Repeats      int     `json:"repeats"`
	PrefillTokS  float64 `json:"prefill_tok_s"`
	DecodeTokS   float64 `json:"decode_tok_s"`
	// DecodeGBs is the bytes one decode step must read — every weight tensor as stored
	// (the embedding table only when it is also the LM head; of a mixture of experts, the
	// k experts a token picks per layer) and the KV cache so far — times steps per second.
	DecodeGBs       float64 `json:"decode_gb_s"`
	PrefillGFLOPS   float64 `json:"prefill_gflop_s"`
	DecodeGFLOPS    float64 `json:"decode_gflop_s"`
	WeightBytesStep float64 `json:"weight_bytes_per_step"`
	KVBytesStep     float64 `json:"kv_bytes_per_step"` // mean over the steps
	DecodeMsPerStep float64 `json:"decode_ms_per_step"`
	LMHeadMsPerStep float64 `json:"lm_head_ms_per_step"`
	// LMHeadShare is the LM-head product's time over the decode step's, by CPU time where
	// available (as the *_cpu rates), else elapsed; LMHeadShareWall always by elapsed time.
	LMHeadShare     float64 `json:"lm_head_share"`
	LMHeadShareWall float64 `json:"lm_head_share_wall"`
	// PrefillTokSCPU and DecodeTokSCPU use the process's CPU time per thread instead of
	// elapsed time (a prefill-only generation, then a full one: the difference is the
	// decode), so that busy neighbours on a shared machine do not count. Compare them with a
	// profile from `calibrate --clock cpu`. Absent where CPU time is not available.
	PrefillTokSCPU float64 `json:"prefill_tok_s_cpu,omitempty"`
	DecodeTokSCPU  float64 `json:"decode_tok_s_cpu,omitempty"`
	// PeakRSS is the process's largest resident set over the whole bench (weights are
	// memory-mapped, so the pages the model reads count), next to what it must hold: every
	// weight tensor as stored, and the KV cache of one prompt+gen-token sequence. Absent
	// where the system does not report it.
	PeakRSS      int64 `json:"peak_rss_bytes,omitempty"`
	WeightsBytes int64 `json:"weights_bytes"`
	KVCacheBytes int64 `json:"kv_cache_bytes"`
	// ParamsTotal and ParamsActive count the model's parameters (Params.Total, Active): for a
	// mixture of experts, active is what one token multiplies by (k of the experts).
	ParamsTotal  int64 `json:"params_total"`
	ParamsActive int64 `json:"params_active"`
	// Experts and ExpertsPerTok describe a mixture of experts (0 for a dense model): a decode
	// step of one sequence reads ExpertsPerTok of each layer's Experts, and WeightBytesStep
	// counts just those.
	Experts         int       `json:"experts,omitempty"`
	ExpertsPerTok   int       `json:"experts_per_tok,omitempty"`
	PrefillRunsTokS []float64 `json:"prefill_runs_tok_s"`
	DecodeRunsTokS  []float64 `json:"decode_runs_tok_s"`
}

// Bench measures prefill and decode of the model at path with the engine's generation
// loop, which times the two phases (engine.Timing): prompt ids are fixed pseudo-random
// tokens, decoding is greedy and ignores EOS, so every run does exactly GenTokens steps.
//
// The LM head's share is measured by running the same matrix×vector kernel the model uses
// on the model's own head weights, GenTokens times, with the same thread count: the
// model does not expose per-part timers.
func Bench(ctx context.Context, path string, tok *tokenizer.Tokenizer, o BenchOptions) (*BenchResult, error) {
	if o.PromptTokens <= 0 {
		o.PromptTokens = 128
	}
	if o.GenTokens <= 0 {
		o.GenTokens = 32
	}
	if o.Repeats <= 0 {
		o.Repeats = 3
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	}
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format, a...)
		}
	}
	m, err := model.Load(path, model.Options{Threads: o.Threads, KVCache: o.KVCache, Mmap: o.Mmap})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	cfg := m.Config()
	if need := o.PromptTokens + o.GenTokens + 1; need > cfg.MaxPositions {
		return nil, fmt.Errorf("%s: %d prompt + %d generated tokens exceed the context (%d)", path, o.PromptTokens, o.GenTokens, cfg.MaxPositions)
	}
	vocab := min(cfg.VocabSize, tok.VocabSize())
	rng := rand.New(rand.NewPCG(7, 11))
	ids := make([]int, o.PromptTokens)
	for i := range ids {
		ids[i] = rng.IntN(vocab)
	}
	gen := func(steps int) (*engine.Result, error) {
		res, err := engine.Generate(ctx, m, tok, ids, engine.Options{MaxTokens: steps + 1, IgnoreEOS: true,
			MaxContext: o.PromptTokens + o.GenTokens + 1})
		if err != nil {
			return nil, err
		}
		if res.Timing.DecodeSteps != steps {
			return nil, fmt.Errorf("bench: %d decode steps, want %d (finish %s)", res.Timing.DecodeSteps, steps, res.FinishReason)
		}
		return res, nil
	}
	for i := range o.Warmup {
		if _, err := gen(min(o.GenTokens, 4)); err != nil {
			return nil, err
		}
		logf("warmup %d done\n", i+1)
	}
	r := &BenchResult{Model: path, PromptTokens: o.PromptTokens, GenTokens: o.GenTokens, Repeats: o.Repeats}
	threads := float64(o.Threads)
	if o.Threads <= 0 {
		threads = float64(runtime.GOMAXPROCS(0)) // what the model's pool starts
	}
	var cpuPrefill, cpuDecode []float64
	for i := range o.Repeats {
		c0, cpuOK := processCPU()
		if _, err := gen(0); err != nil {
			return nil, err
		}
		c1, _ := processCPU()
		res, err := gen(o.GenTokens)
		if err != nil {
			return nil, err
		}
		c2, _ := processCPU()
		r.PrefillRunsTokS = append(r.PrefillRunsTokS, res.Timing.PrefillTokS)
		r.DecodeRunsTokS = append(r.DecodeRunsTokS, res.Timing.DecodeTokS)
		if pf, all := (c1 - c0).Seconds(), (c2 - c1).Seconds(); cpuOK && pf > 0 && all > pf {
			cpuPrefill = append(cpuPrefill, float64(o.PromptTokens)/(pf/threads))
			cpuDecode = append(cpuDecode, float64(o.GenTokens)/((all-pf)/threads))
		}
		logf("run %d: prefill %.1f tok/s, decode %.2f tok/s\n", i+1, res.Timing.PrefillTokS, res.Timing.DecodeTokS)
	}
	r.PrefillTokS, r.DecodeTokS = median(r.PrefillRunsTokS), median(r.DecodeRunsTokS)
	r.PrefillTokSCPU, r.DecodeTokSCPU = median(cpuPrefill), median(cpuDecode)

	// The peak resident set of generation, read before the file is mapped a second time
	// below for its tensor table.
	if rss, ok := peakRSS(); ok {
		r.PeakRSS = rss
	}

	// What a step reads and computes.
	w, err := openWeights(path)
	if err != nil {
		return nil, err
	}
	defer w.close()
	var head tensor.Info
	var ok bool
	for _, name := range []string{"lm_head.weight", "output.weight", "model.embed_tokens.weight", "token_embd.weight"} {
		if head, ok = w.tensor(name); ok {
			break
		}
	}
	if !ok {
		return nil, fmt.Errorf("%s: no LM head or embedding tensor", path)
	}
	r.DType = dominantDType(w.tensors)
	for _, t := range w.tensors {
		r.WeightsBytes += int64(len(t.Data))
		r.WeightBytesStep += float64(len(t.Data))
		isEmbed := t.Name == "model.embed_tokens.weight" || t.Name == "token_embd.weight"
		if isEmbed && t.Name != head.Name {
			r.WeightBytesStep -= float64(len(t.Data)) // a lookup reads one row, not the table
		}
	}
	if cfg.MoE() {
		// One token's step reads k of each layer's experts, which all have one size: of the
		// expert tensors (HF: one per expert, GGUF: stacked), the share k/E.
		var experts float64
		for _, t := range w.tensors {
			if strings.Contains(t.Name, ".experts.") || strings.Contains(t.Name, "_exps.") {
				experts += float64(len(t.Data))
			}
		}
		r.WeightBytesStep -= experts * (1 - float64(cfg.ExpertsPerTok)/float64(cfg.NumExperts))
		r.Experts, r.ExpertsPerTok = cfg.NumExperts, cfg.ExpertsPerTok
	}
	shape := FromModelConfig(cfg)
	params := shape.Params()
	r.ParamsTotal, r.ParamsActive = params.Total, params.Active
	f32 := precisions["f32"]
	meanCtx := float64(o.PromptTokens) + float64(o.GenTokens-1)/2
	kvTok := float64(m.KVBytesPerToken())
	r.KVBytesStep = (meanCtx + 2) * kvTok // read ctx+1, write 1
	r.KVCacheBytes = int64(float64(o.PromptTokens+o.GenTokens) * kvTok)
	r.DecodeGBs = (r.WeightBytesStep + r.KVBytesStep) * r.DecodeTokS / 1e9
	pf := shape.Prefill(o.PromptTokens, 1, f32, f32, f32)
	r.PrefillGFLOPS = pf.FLOPs / (float64(o.PromptTokens) / r.PrefillTokS) / 1e9
	var decFLOPs float64
	for j := range o.GenTokens {
		decFLOPs += shape.DecodeStep(o.PromptTokens+j, 1, f32, f32, f32).FLOPs
	}
	r.DecodeGFLOPS = decFLOPs / float64(o.GenTokens) * r.DecodeTokS / 1e9
	r.DecodeMsPerStep = 1000 / r.DecodeTokS

	// The LM head alone: the same kernel on the model's own bytes, as many steps, same threads.
	hm := m.LMHead()
	pool := kernels.NewPool(o.Threads)
	defer pool.Close()
	r.Threads = pool.Threads()
	r.GGMLBuild = kernels.CurrentGGMLBuild().String()
	scratch := kernels.NewScratch(pool.Threads())
	x := make([]float32, cfg.HiddenSize)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	logits := make([]float32, cfg.VocabSize)
	kernels.MatVec(pool, logits, hm, x, scratch) // warm
	// In a decode step the rest of the weights stream through the caches between two head
	// products, so a head that fits in the last-level cache is read from memory all the
	// same; timed back to back it would stay cached and its share come out too small
	// (SmolLM2-135M's 56 MB head on this project's 260 MiB L3: 1.2 ms back to back, about
	// 10% of a step). So when the head fits, as many bytes as the rest of a step reads (at
	// most twice the cache) are streamed, untimed, before each timed product.
	var evict []uint64
	if llc := lastLevelCacheMiB(sysCPUCache) << 20; llc > 0 && len(head.Data) < llc {
		if n := min(int(r.WeightBytesStep)-len(head.Data), 2*llc) / 8; n > 0 {
			evict = make([]uint64, n)
			for i := range evict {
				evict[i] = uint64(i)
			}
		}
	}
	var perStep, perStepCPU []float64
	for range o.Repeats {
		var wall, cpu float64
		cpuOK := true
		for range o.GenTokens {
			if evict != nil {
				kernels.SumWords(evict)
			}
			c0, ok0 := processCPU()
			start := time.Now()
			kernels.MatVec(pool, logits, hm, x, scratch)
			wall += time.Since(start).Seconds()
			c1, ok1 := processCPU()
			cpu += (c1 - c0).Seconds()
			cpuOK = cpuOK && ok0 && ok1
		}
		perStep = append(perStep, wall*1000/float64(o.GenTokens))
		if cpuOK {
			perStepCPU = append(perStepCPU, cpu/threads*1000/float64(o.GenTokens))
		}
	}
	r.LMHeadMsPerStep = median(perStep)
	r.LMHeadShareWall = r.LMHeadMsPerStep / r.DecodeMsPerStep
	r.LMHeadShare = r.LMHeadShareWall
	if r.DecodeTokSCPU > 0 && len(perStepCPU) > 0 {
		r.LMHeadShare = median(perStepCPU) * r.DecodeTokSCPU / 1000
	}
	return r, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// weights is every tensor of a model file, for byte accounting.
type weights struct {
	tensors []tensor.Info
	close   func() error
}

func (w *weights) tensor(name string) (tensor.Info, bool) {
	for _, t := range w.tensors {
		if t.Name == name {
			return t, true
		}
	}
	return tensor.Info{}, false
}

func openWeights(path string) (*weights, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		if !strings.EqualFold(filepath.Ext(path), ".gguf") {
			return nil, fmt.Errorf("%s: not a model folder or a .gguf file", path)
		}
		f, err := gguf.Open(path)
		if err != nil {
			return nil, err
		}
		return &weights{tensors: f.Tensors(), close: f.Close}, nil
	}
	m, err := safetensors.OpenModel(path)
	if err != nil {
		return nil, err
	}
	w := &weights{close: m.Close}
	for _, n := range m.Names() {
		t, ok := m.Tensor(n)
		if !ok {
			return nil, errors.Join(fmt.Errorf("%s: tensor %q listed but not found", path, n), m.Close())
		}
		t.Name = n
		w.tensors = append(w.tensors, t)
	}
	return w, nil
}

// WeightsDType is the dtype holding most of the weight bytes of a model folder or GGUF
// file, as a cost-model dtype name ("" if path holds no weights or their dtype has no cost
// model, such as k-quants).
func WeightsDType(path string) string {
	w, err := openWeights(path)
	if err != nil {
		return ""
	}
	defer w.close()
	return dominantDType(w.tensors)
}

func dominantDType(ts []tensor.Info) string {
	byDType := map[string]float64{}
	for _, t := range ts {
		byDType[strings.ToLower(t.DType.String())] += float64(len(t.Data))
	}
	best := ""
	for d, b := range byDType {
		if best == "" || b > byDType[best] || (b == byDType[best] && d < best) {
			best = d
		}
	}
	if _, ok := precisions[best]; !ok {
		return ""
	}
	return best
}
