package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/cost"
)

type costFlags struct {
	model     string
	hardware  string
	prompt    int
	output    int
	batch     int
	dtype     string
	kvDType   string
	threads   int
	memBudget string
	plot      string
	jsonOut   bool
}

func newCostCmd() *cobra.Command {
	var f costFlags
	cmd := &cobra.Command{
		Use:   "cost --model PATH|CONFIG --hardware NAME|FILE",
		Short: "Roofline cost of prefill vs decode for a model on a device",
		Long: `Cost counts, for --batch sequences of --prompt input and --output generated tokens, the
FLOPs and bytes of each phase (weights, KV cache reads and writes, activations) and times
them on the roofline: time = max(FLOPs / FLOP rate, bytes / bandwidth), with rates from the
hardware profile (datasheet peak × efficiency for GPUs; measured kernel rates for a profile
written by 'tokenwise calibrate'). Prefill is one pass over all prompts (logits for the
last position only); decode is --output steps, step j attending over prompt + j tokens.

It reports tokens per second per phase, the output-over-input cost (decode time per output
token / prefill time per input token), KV bytes per token and per sequence, how many
sequences fit in the memory budget next to the weights, the LM head's share of decode, and
for MoE configs (num_experts, num_experts_per_tok, moe_intermediate_size) active vs total
parameters. Shipped profiles: ` + strings.Join(cost.Profiles(), ", ") + `.`,
		Example: `  tokenwise cost --model configs/qwen3-4b.json --hardware h100-sxm --prompt 1024 --output 256
  tokenwise calibrate --out cpu.json && tokenwise cost --model DIR --hardware cpu.json --threads 2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCost(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "config.json, a model folder or a .gguf file")
	fl.StringVar(&f.hardware, "hardware", "", "profile name or file (tokenwise calibrate)")
	fl.IntVar(&f.prompt, "prompt", 512, "input tokens per sequence")
	fl.IntVar(&f.output, "output", 128, "output tokens per sequence")
	fl.IntVar(&f.batch, "batch", 1, "sequences processed together")
	fl.StringVar(&f.dtype, "dtype", "", "weight dtype: f32, f16, bf16, fp8, int8, q8_0, q4_0 (default: the weights', else config torch_dtype, else bf16)")
	fl.StringVar(&f.kvDType, "kv-dtype", "", "KV cache dtype (default: f32 on a CPU profile, as tokenwise stores it; else the weight dtype if 16-bit, else bf16)")
	fl.IntVar(&f.threads, "threads", 0, "CPU profiles: use the calibration for this many threads (0: the most)")
	fl.StringVar(&f.memBudget, "mem-budget", "", "memory for weights + KV cache, e.g. 72GB, 20GiB (default: 90% of the device)")
	fl.StringVar(&f.plot, "plot", "", "write an SVG of time per token vs batch size to this file")
	fl.BoolVar(&f.jsonOut, "json", false, `print the estimate as JSON (includes "prefill_tok_s", "decode_tok_s", "output_over_input_cost")`)
	return cmd
}

// costInputs resolves the model, hardware and dtypes shared by cost and plan.
func costInputs(command, modelPath, hardware, dtype, kvDType string) (*cost.Shape, *cost.Profile, cost.Precision, cost.Precision, error) {
	var zero cost.Precision
	if modelPath == "" || hardware == "" {
		return nil, nil, zero, zero, fmt.Errorf("%s: --model and --hardware are required", command)
	}
	s, err := cost.LoadShape(modelPath)
	if err != nil {
		return nil, nil, zero, zero, fmt.Errorf("%s: --model: %w", command, err)
	}
	hw, err := cost.LoadProfile(hardware)
	if err != nil {
		return nil, nil, zero, zero, fmt.Errorf("%s: --hardware: %w", command, err)
	}
	if dtype == "" {
		dtype = cost.WeightsDType(modelPath)
	}
	if dtype == "" {
		dtype = s.TorchDType
	}
	if dtype == "" {
		dtype = "bf16"
	}
	dt, err := cost.ParsePrecision(dtype)
	if err != nil {
		return nil, nil, zero, zero, fmt.Errorf("%s: --dtype: %w", command, err)
	}
	if kvDType == "" {
		switch {
		case hw.Kind == "cpu":
			kvDType = "f32"
		case dt.Bytes == 2:
			kvDType = dt.Name
		default:
			kvDType = "bf16"
		}
	}
	kv, err := cost.ParsePrecision(kvDType)
	if err != nil {
		return nil, nil, zero, zero, fmt.Errorf("%s: --kv-dtype: %w", command, err)
	}
	return s, hw, dt, kv, nil
}

func runCost(f costFlags, stdout, stderr io.Writer) error {
	s, hw, dt, kv, err := costInputs("cost", f.model, f.hardware, f.dtype, f.kvDType)
	if err != nil {
		return err
	}
	var budget float64
	if f.memBudget != "" {
		b, err := parseByteSize(f.memBudget)
		if err != nil {
			return fmt.Errorf("cost: --mem-budget: %w", err)
		}
		budget = float64(b)
	}
	w := cost.Workload{Prompt: f.prompt, Output: f.output, Batch: f.batch, DType: dt, KV: kv, Threads: f.threads, MemBudget: budget}
	e, err := s.Estimate(hw, w)
	if err != nil {
		return fmt.Errorf("cost: %w", err)
	}
	if f.plot != "" {
		if err := writePlot(f.plot, s, hw, w); err != nil {
			return fmt.Errorf("cost: --plot: %w", err)
		}
		fmt.Fprintf(stderr, "wrote %s\n", f.plot)
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(e)
	}
	printEstimate(stdout, s, e)
	return nil
}

func writePlot(path string, s *cost.Shape, hw *cost.Profile, w cost.Workload) error {
	var batches []int
	for b := 1; b <= 4096; b *= 2 {
		batches = append(batches, b)
	}
	pts, err := s.Sweep(hw, w, batches)
	if err != nil {
		return err
	}
	title := fmt.Sprintf("%s on %s (%s weights, %s KV): prompt %d, output %d", s.Name, hw.Name, w.DType.Name, w.KV.Name, w.Prompt, w.Output)
	svg := cost.PlotSVG(title, pts)
	if path == "-" {
		return errors.New("write the SVG to a file, not stdout")
	}
	return os.WriteFile(path, []byte(svg), 0o644)
}

func printEstimate(out io.Writer, s *cost.Shape, e *cost.Estimate) {
	p := e.Params
	w := e.Workload
	fmt.Fprintf(out, "%s on %s: %s weights, %s KV, batch %d, prompt %d, output %d\n", e.Model, e.Hardware, w.DType, w.KVDType, w.Batch, w.Prompt, w.Output)
	if s.MoE() {
		fmt.Fprintf(out, "params   %.3fB total, %.3fB active per token (%d of %d experts) + %.3fB embedding\n",
			float64(p.Total)/1e9, float64(p.Active)/1e9, s.ExpertsPerTok, s.Experts, float64(p.Embedding)/1e9)
	} else {
		fmt.Fprintf(out, "params   %.3fB (%.3fB embedding%s)\n", float64(p.Total)/1e9, float64(p.Embedding)/1e9, map[bool]string{true: ", tied LM head", false: ""}[s.TiedEmbeddings])
	}
	if s.MoE() {
		fmt.Fprintf(out, "experts  a decode step of batch %d reads %.1f of %d experts per layer (uniform routing, E·(1−(1−k/E)^B); a trained router touches fewer)\n",
			w.Batch, e.DecodeExperts, s.Experts)
	}
	flops := fmt.Sprintf("%.1f TFLOP/s", e.Rates.FLOPS/1e12)
	if e.Rates.FLOPS < 1e12 {
		flops = fmt.Sprintf("%.2f GFLOP/s", e.Rates.FLOPS/1e9)
	}
	fmt.Fprintf(out, "rates    %s, %s GB/s weights, %s GB/s KV: %s\n", flops, gbs(e.Rates.WeightBW), gbs(e.Rates.OtherBW), e.Rates.Basis)
	fmt.Fprintf(out, "memory   weights %s, KV %s/token, %s/sequence; %d sequences fit in %s\n",
		human(e.WeightBytes), human(e.KVBytesPerToken), human(e.KVBytesPerSeq), e.MaxSeqs, human(e.MemBudget))
	if w.Batch > e.MaxSeqs {
		fmt.Fprintf(out, "WARNING  batch %d does not fit: the KV cache of only %d sequences fits next to the weights\n", w.Batch, e.MaxSeqs)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "%-8s %10s %10s %10s %10s %10s %11s %10s %8s\n", "phase", "TFLOP", "weights", "KV read", "KV write", "activ.", "time", "tok/s", "bound")
	for _, ph := range []struct {
		name string
		p    cost.PhaseEstimate
	}{{"prefill", e.Prefill}, {"decode", e.Decode}} {
		fmt.Fprintf(out, "%-8s %10.3f %10s %10s %10s %10s %9.2f ms %10.1f %8s\n", ph.name, ph.p.FLOPs/1e12,
			human(ph.p.WeightBytes), human(ph.p.KVReadBytes), human(ph.p.KVWriteBytes), human(ph.p.ActivationBytes),
			ph.p.Seconds*1000, ph.p.TokS, ph.p.Bound)
	}
	if e.Prefill.OverheadS > 0 || e.Decode.OverheadS > 0 {
		fmt.Fprintf(out, "%-8s prefill %.2f ms, decode %.2f ms of the times above: product calls, vector ops between them, attention\n",
			"overhead", e.Prefill.OverheadS*1000, e.Decode.OverheadS*1000)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "per token  prefill %.3f ms/input token, decode %.3f ms/output token\n", e.Prefill.SecondsPerToken*1000, e.Decode.SecondsPerToken*1000)
	fmt.Fprintf(out, "output/input cost  %.1f×\n", e.OutputOverInput)
	fmt.Fprintf(out, "LM head in decode  %.1f%% of FLOPs, %.1f%% of bytes, %.1f%% of time\n", 100*e.LMHeadFLOPShare, 100*e.LMHeadByteShare, 100*e.LMHeadTimeShare)
	if e.RidgeBatch > 0 {
		fmt.Fprintf(out, "decode turns compute-bound at batch %d (context %d)\n", e.RidgeBatch, w.Prompt+w.Output/2)
	} else {
		fmt.Fprintf(out, "decode stays memory-bound at any batch at context %d (KV reads grow with the batch)\n", w.Prompt+w.Output/2)
	}
}

// gbs prints a bandwidth in GB/s with three significant digits, without exponents.
func gbs(bytesPerS float64) string {
	v := bytesPerS / 1e9
	if v >= 100 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// human prints bytes with a decimal unit.
func human(b float64) string {
	switch {
	case b >= 1e12:
		return fmt.Sprintf("%.2f TB", b/1e12)
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", b/1e3)
	}
	return fmt.Sprintf("%.0f B", b)
}
