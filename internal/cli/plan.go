package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/cost"
)

type planFlags struct {
	model, hardware, dtype, kvDType, serve string
	qps, p99, price, memUtil               float64
	prompt, output, maxBatch               int
	jsonOut                                bool
}

func newPlanCmd() *cobra.Command {
	var f planFlags
	cmd := &cobra.Command{
		Use:   "plan --model PATH|CONFIG --hardware NAME|FILE [--qps Q] [--prompt N] [--output M]",
		Short: "Size a deployment: tensor parallelism, replicas, throughput, latency, cost per million tokens",
		Long: `Plan finds the tensor-parallel degree (1, 2, 4, 8, 16: it must divide the attention heads,
and each device must hold its share of the weights plus KV cache) and the number of replicas
that serve --qps requests of --prompt input and --output generated tokens with the fewest
devices, keeping each replica under 80% of its capacity and, with --p99-ttft, the estimated
99th-percentile time to first token under the target. Times come from the same roofline as
'tokenwise cost', plus two all-reduces per layer over the interconnect when TP > 1.
With --gpu-hour-price it splits the bill into cost per million input and output tokens by
the device time each phase takes. It prints matching vLLM and SGLang launch commands for the
model --serve-name names: by default the --model folder or .gguf file; for a bare
config.json (such as configs/qwen3-4b.json, a shape with no weights) they serve $MODEL, a
placeholder for the Hugging Face id or checkpoint folder you would pass.
Without --qps it plans for 1 request per second.`,
		Example: `  tokenwise plan --model configs/qwen3-4b.json --hardware h100-sxm --qps 20 --prompt 1024 --output 256 --gpu-hour-price 2.5`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlan(f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "config.json, a model folder or a .gguf file")
	fl.StringVar(&f.hardware, "hardware", "", "profile name or file")
	fl.Float64Var(&f.qps, "qps", 1, "requests per second to serve")
	fl.IntVar(&f.prompt, "prompt", 512, "input tokens per request")
	fl.IntVar(&f.output, "output", 128, "output tokens per request")
	fl.Float64Var(&f.p99, "p99-ttft", 0, "target 99th-percentile time to first token, seconds (0: none)")
	fl.Float64Var(&f.price, "gpu-hour-price", 0, "price of one device-hour (0: no cost figures)")
	fl.StringVar(&f.dtype, "dtype", "", "weight dtype (as for cost)")
	fl.StringVar(&f.kvDType, "kv-dtype", "", "KV cache dtype (as for cost)")
	fl.IntVar(&f.maxBatch, "max-batch", 256, "most sequences per replica (vLLM --max-num-seqs)")
	fl.Float64Var(&f.memUtil, "mem-util", 0.9, "share of device memory for weights + KV cache")
	fl.StringVar(&f.serve, "serve-name", "", "Hugging Face id or checkpoint folder in the launch commands (default: the --model folder or .gguf; $MODEL for a config file)")
	fl.BoolVar(&f.jsonOut, "json", false, "print the plan as JSON")
	return cmd
}

func runPlan(f planFlags, stdout io.Writer) error {
	s, hw, dt, kv, err := costInputs("plan", f.model, f.hardware, f.dtype, f.kvDType)
	if err != nil {
		return err
	}
	if f.qps <= 0 {
		return fmt.Errorf("plan: --qps %g: must be positive", f.qps)
	}
	serve, note := f.serve, ""
	if serve == "" {
		serve, note = servedModel(f.model)
	}
	pl, err := s.Plan(hw, cost.PlanInput{
		QPS: f.qps, Prompt: f.prompt, Output: f.output, P99TTFT: f.p99, GPUHourPrice: f.price,
		DType: dt, KV: kv, MaxBatch: f.maxBatch, MemUtil: f.memUtil, Model: serve,
	})
	if err != nil {
		return err
	}
	if note != "" {
		pl.Notes = append(pl.Notes, note)
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(pl)
	}
	fmt.Fprintf(stdout, "%s on %s, %s weights, %s KV: %.3g req/s of %d in + %d out tokens\n", s.Name, hw.Name, dt.Name, kv.Name, f.qps, f.prompt, f.output)
	fmt.Fprintf(stdout, "deployment  TP %d × %d replicas = %d devices\n", pl.TP, pl.Replicas, pl.Devices)
	fmt.Fprintf(stdout, "memory      %s weights + %s KV per device: %d sequences per replica (batch cap %d)\n",
		human(pl.WeightBytes), human(pl.KVBytes), pl.MaxSeqs, pl.BatchCap)
	fmt.Fprintf(stdout, "per replica capacity %.3g req/s, load %.0f%%, steady decode batch %.1f\n", pl.CapacityQPS, 100*pl.Utilization, pl.Batch)
	fmt.Fprintf(stdout, "latency     prefill %.1f ms, TTFT p50 %.1f ms, p99 %.1f ms, decode %.1f tok/s per sequence, end to end %.2f s\n",
		pl.PrefillS*1000, pl.TTFTP50*1000, pl.TTFTP99*1000, pl.DecodeTokS, pl.LatencyS)
	fmt.Fprintf(stdout, "throughput  %.0f input + %.0f output tok/s\n", pl.InputTokS, pl.OutputTokS)
	if pl.CostPerHour > 0 {
		fmt.Fprintf(stdout, "cost        %.2f per hour: %.4f per million input tokens, %.4f per million output tokens (%.1f×)\n",
			pl.CostPerHour, pl.CostPerMIn, pl.CostPerMOut, pl.CostPerMOut/pl.CostPerMIn)
	}
	for _, n := range pl.Notes {
		fmt.Fprintf(stdout, "note        %s\n", n)
	}
	fmt.Fprintf(stdout, "\nvLLM:    %s\nSGLang:  %s\n", pl.VLLM, pl.SGLang)
	return nil
}

// modelPlaceholder stands for the model in launch commands when --model is a shape, not a
// checkpoint: the user sets it (MODEL=Qwen/Qwen3-4B) or passes --serve-name.
const modelPlaceholder = "$MODEL"

// servedModel is what vLLM and SGLang should load for --model: the checkpoint folder (also
// when --model is the config.json inside one that holds weights) or the .gguf file as
// given; for a config file with no weights beside it, the placeholder and a note saying so.
func servedModel(modelPath string) (serve, note string) {
	dir := ""
	if st, err := os.Stat(modelPath); err == nil && st.IsDir() {
		dir = modelPath
	} else if strings.EqualFold(filepath.Ext(modelPath), ".gguf") {
		return modelPath, ""
	} else if filepath.Base(modelPath) == "config.json" {
		dir = filepath.Dir(modelPath)
	}
	if dir != "" {
		if w, _ := filepath.Glob(filepath.Join(dir, "*.safetensors")); len(w) > 0 {
			return filepath.Clean(dir), ""
		}
	}
	return modelPlaceholder, fmt.Sprintf("%s has no weights to serve: the launch commands load %s; set it to the model's Hugging Face id or checkpoint folder (MODEL=Qwen/Qwen3-4B), or pass --serve-name", modelPath, modelPlaceholder)
}
