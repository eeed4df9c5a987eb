package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/convert"
	"github.com/tokenwise/tokenwise/specialize"
)

func newExportCmd() *cobra.Command {
	var (
		modelPath, format, dtype, out, name string
		asJSON                              bool
	)
	cmd := &cobra.Command{
		Use:   "export --model PATH --format gguf|hf [--dtype f32|f16|bf16|q8_0|q4_k_m|q5_k_m|q6_k|...] --out PATH",
		Short: "Convert a checkpoint between a Hugging Face folder and a GGUF file",
		Long: `Convert a whole checkpoint: weights, config and tokenizer.

--format gguf reads an HF folder (config.json, model.safetensors or shards, tokenizer.json,
tokenizer_config.json, generation_config.json) and writes one GGUF file that llama.cpp runs:
llama.cpp's tensor names, the q/k row order of its llama graph (Llama, Mistral), the
llama.*/qwen2.*/qwen3.* metadata and the tokenizer (tokenizer.ggml.*, with the pre-tokenizer
llama.cpp must use). --format hf reads a GGUF file and writes an HF folder.

--dtype sets the dtype of the weight matrices (q8_0 for GGUF only; norms and biases stay f32
in GGUF as llama.cpp expects). q4_k_s, q4_k_m, q5_k_s, q5_k_m and q6_k (GGUF only) are
llama-quantize's file types: each matrix gets the k-quant llama-quantize gives it (Q4_K_M:
Q6_K for the output matrix and for attn_v and ffn_down in the first and last eighth of the
layers and every third layer between, Q4_K elsewhere; Q5_K_M the same over Q5_K), with
blocks identical to llama-quantize's for the same f32 weights.
Without it every tensor keeps its dtype, so a round trip HF -> GGUF -> HF is bit-exact;
quantized GGUF weights become f32 in an HF folder.`,
		Example: `  tokenwise export --model Qwen3-0.6B/ --format gguf --dtype f16 --out qwen3.gguf
  tokenwise export --model smollm2.gguf --format hf --out smollm2-hf/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if modelPath == "" || out == "" {
				return fmt.Errorf("export: --model and --out are required")
			}
			st, err := os.Stat(modelPath)
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			opts := convert.Options{DType: dtype, Name: name}
			start := time.Now()
			switch strings.ToLower(format) {
			case "gguf":
				if !st.IsDir() {
					return fmt.Errorf("export: --format gguf needs an HF folder as --model, %s is a file", modelPath)
				}
				err = convert.HFToGGUF(modelPath, out, opts)
				if err == nil {
					warnUnportable(cmd.ErrOrStderr(), modelPath)
				}
			case "hf":
				if st.IsDir() {
					return fmt.Errorf("export: --format hf needs a .gguf file as --model, %s is a folder", modelPath)
				}
				err = convert.GGUFToHF(modelPath, out, opts)
			default:
				return fmt.Errorf("export: --format %q: want gguf or hf", format)
			}
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			secs := time.Since(start).Seconds()
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{
					"model": modelPath, "format": strings.ToLower(format), "dtype": dtype, "out": out, "seconds": secs,
				})
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s (%.1f s)\n", out, secs)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", "", "HF checkpoint folder (for --format gguf) or .gguf file (for --format hf)")
	f.StringVar(&format, "format", "", "output format: gguf or hf")
	f.StringVar(&dtype, "dtype", "", "dtype of the weight matrices: f32, f16, bf16, q8_0, or "+convert.KMixNames+" (default: keep)")
	f.StringVar(&out, "out", "", "output .gguf file or HF folder")
	f.StringVar(&name, "name", "", "GGUF general.name (default: the folder's name)")
	f.BoolVar(&asJSON, "json", false, "print {\"model\",\"format\",\"dtype\",\"out\",\"seconds\"}")
	return cmd
}

// warnUnportable says when a GGUF carries added tokens that transformers' GGUF tokenizer
// converter drops (specialize --portable), so that whoever serves it through vLLM or SGLang
// knows to pass the tokenizer.json.
func warnUnportable(w io.Writer, dir string) {
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return
	}
	if n, total, err := specialize.UnportableAdded(data); err == nil && n > 0 {
		fmt.Fprintf(w, "note: %d of the %d added tokens hold a space or a non-ASCII byte; transformers' GGUF tokenizer "+
			"(AutoTokenizer with gguf_file=, vLLM and SGLang given only the GGUF) drops them and tokenizes to more ids: "+
			"give those the tokenizer.json (vLLM --tokenizer %s), or specialize with --portable\n", n, total, dir)
	}
}
