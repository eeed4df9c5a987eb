package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/cost"
	"github.com/tokenwise/tokenwise/model"
)

type benchFlags struct {
	model   string
	prompt  int
	gen     int
	threads int
	repeats int
	warmup  int
	kvDType string
	mmap    bool
	jsonOut bool
}

func newBenchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench --model PATH",
		Short: "Measure prefill and decode throughput, effective bandwidth and the LM head's share",
		Long: `Bench runs the engine's generation loop on fixed pseudo-random prompt ids (greedy, EOS
ignored, so every run decodes exactly --gen-tokens steps) after --warmup untimed runs, and
reports the median over --repeats runs of:
  prefill tok/s  prompt tokens / prefill time (one batched pass, first token sampled)
  decode tok/s   decode steps / decode time
  decode GB/s    bytes one step must read (every weight tensor as stored, the embedding
                 table only when it is the LM head, of a mixture of experts only the k
                 experts a token picks, plus the KV cache) × steps per second
  params         total and (mixtures of experts) active per token
  GFLOP/s        counted by the cost model over the same shape
  lm_head_share  the LM head's matrix×vector (same kernel, the model's own head weights,
                 same threads, timed over as many steps) over the decode step time; a head
                 that fits the last-level cache is timed after streaming as many other
                 bytes as a step reads, so it comes from memory as in a step
PATH is a Hugging Face folder with tokenizer.json, or a .gguf file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model: a Hugging Face folder or a .gguf file")
	fl.IntVar(&f.prompt, "prompt-tokens", 128, "prompt length")
	fl.IntVar(&f.gen, "gen-tokens", 32, "decode steps")
	fl.IntVar(&f.threads, "threads", 0, "compute threads (0: one per CPU)")
	fl.IntVar(&f.repeats, "repeats", 3, "timed runs (the median is reported)")
	fl.IntVar(&f.warmup, "warmup", 1, "untimed runs first")
	fl.StringVar(&f.kvDType, "kv-cache-dtype", "f32", "KV cache dtype: f32, or f16 (llama.cpp's default)")
	fl.BoolVar(&f.mmap, "mmap", false, "map the checkpoint from the page cache (quick to load, shared between processes) instead of reading it into huge-page memory (faster decode)")
	fl.BoolVar(&f.jsonOut, "json", false, `print {"prefill_tok_s","decode_tok_s","decode_gb_s","lm_head_share",...}`)
	return cmd
}

func runBench(ctx context.Context, f benchFlags, stdout, stderr io.Writer) error {
	if f.model == "" {
		return errors.New("bench: --model is required")
	}
	if f.prompt <= 0 || f.gen <= 0 || f.repeats <= 0 || f.warmup < 0 {
		return fmt.Errorf("bench: --prompt-tokens %d, --gen-tokens %d, --repeats %d must be positive, --warmup %d not negative", f.prompt, f.gen, f.repeats, f.warmup)
	}
	kv, err := model.ParseKVDType(f.kvDType)
	if err != nil {
		return fmt.Errorf("bench: --kv-cache-dtype: %w", err)
	}
	tok, err := loadModelTokenizer(f.model)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	modelGC()
	if ctx == nil {
		ctx = context.Background()
	}
	r, err := cost.Bench(ctx, f.model, tok, cost.BenchOptions{
		PromptTokens: f.prompt, GenTokens: f.gen, Threads: f.threads, Repeats: f.repeats, Warmup: f.warmup, KVCache: kv, Mmap: f.mmap, Log: stderr,
	})
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(stdout, "model %s (%s), %d threads, llama.cpp's %s arithmetic, prompt %d, %d decode steps, median of %d\n",
		r.Model, r.DType, r.Threads, r.GGMLBuild, r.PromptTokens, r.GenTokens, r.Repeats)
	if r.Experts > 0 {
		fmt.Fprintf(stdout, "params   %.4gB total, %.4gB active per token (%d of %d experts per layer)\n",
			float64(r.ParamsTotal)/1e9, float64(r.ParamsActive)/1e9, r.ExpertsPerTok, r.Experts)
	} else {
		fmt.Fprintf(stdout, "params   %.4gB\n", float64(r.ParamsTotal)/1e9)
	}
	fmt.Fprintf(stdout, "prefill  %9.1f tok/s  %7.2f GFLOP/s\n", r.PrefillTokS, r.PrefillGFLOPS)
	fmt.Fprintf(stdout, "decode   %9.2f tok/s  %7.2f GFLOP/s  %6.2f GB/s (%.1f MB weights + %.1f MB KV per step)\n",
		r.DecodeTokS, r.DecodeGFLOPS, r.DecodeGBs, r.WeightBytesStep/1e6, r.KVBytesStep/1e6)
	fmt.Fprintf(stdout, "LM head  %9.2f ms of %.2f ms per step: %.1f%%\n", r.LMHeadMsPerStep, r.DecodeMsPerStep, 100*r.LMHeadShare)
	if r.PeakRSS > 0 {
		fmt.Fprintf(stdout, "memory   %s\n", memoryBreakdown(r.PeakRSS, r.WeightsBytes, r.KVCacheBytes))
	}
	return nil
}

// memoryBreakdown splits the peak resident set into the weights, the KV cache and the rest
// (the program and the Go runtime, the tokenizer, activations). With --mmap, pages of the weights
// may never be read in, and the peak can be under weights + KV.
func memoryBreakdown(peakRSS, weights, kv int64) string {
	mb := func(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/1e6) }
	other := peakRSS - weights - kv
	if other < 0 {
		return fmt.Sprintf("peak RSS %s (less than weights %s + KV %s: not all of the weights were resident)", mb(peakRSS), mb(weights), mb(kv))
	}
	return fmt.Sprintf("peak RSS %s (weights %s, KV cache %s, other %s: program and Go runtime, tokenizer, activations)",
		mb(peakRSS), mb(weights), mb(kv), mb(other))
}

// modelGC tunes the collector for a process that runs a model (bench, generate, serve),
// unless GOGC is set: a cycle starts once the heap has grown 5% over what the last one
// kept, instead of Go's default 100%. Beside the memory-mapped weights the heap is small and long-lived (tokenizer, KV
// cache, activations: ~53 MB for Qwen3-0.6B) and, with the generation loop reusing its
// logits and its sequence's cache, little else is allocated (~4 MB a generation), so
// cycles stay rare and cheap: 12 in bench's 6 timed generations of 128+32 tokens, 0.14 s of
// CPU in all (~0.5%); 7 cycles at 10%. At 100% the heap may double, as much as the whole
// 10% allowed over weights + KV cache for a 0.6B q8_0 model. Qwen3-0.6B q8_0 peak RSS over
// weights + KV (bench --prompt-tokens 128 --gen-tokens 8 --kv-cache-dtype f16): +14.5% at
// GOGC=100, +9.7..10.4% at 10, +9.4..9.8% at 5. Called after the tokenizer is built, whose
// loading allocates much more per byte kept.
func modelGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(5)
	}
	// The tokenizer's loading garbage goes back to the system now, before the weights are
	// read in (model.Options.Mmap false: all resident at once), not gradually after: +17 MB
	// of peak RSS on Qwen3-0.6B q8_0 otherwise.
	debug.FreeOSMemory()
}
