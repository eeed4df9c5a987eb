package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/convert"
	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

func newSynthCmd() *cobra.Command {
	var (
		configPath, tokPath, dtype, out string
		seed                            uint64
	)
	cmd := &cobra.Command{
		Use:   "synth --config CONFIG.json [--tokenizer FILE] [--dtype f32|f16|bf16|q4_k_m|q5_k_m|q6_k|...] [--seed N] --out DIR|FILE.gguf",
		Short: "Write a random-weight Hugging Face checkpoint of a given shape",
		Long: `Write a seeded random-weight checkpoint for the architecture and shape in CONFIG.json
(a Hugging Face config.json: llama, mistral, qwen2 or qwen3) into DIR: config.json,
generation_config.json and model.safetensors, plus tokenizer.json (and tokenizer_config.json
when it sits next to it) copied from --tokenizer, whose vocabulary must fit vocab_size.

The weights are initialized so that greedy decoding is decided by wide logit margins, not
near-ties (see model.RandomWeights), so engines that round differently still agree on
greedy tokens. The same config, dtype and seed always give the same bytes.
The project's own shapes are in configs/ (Qwen3-0.6B, Qwen3-4B, Llama-3.2-1B, SmolLM2-135M,
Qwen3-30B-A3B, Mixtral-8x7B, and tiny-* ones for tests).

--dtype q4_k_s, q4_k_m, q5_k_s, q5_k_m or q6_k writes one GGUF file (--out FILE.gguf, --tokenizer required) in that
llama-quantize file type, its quantized blocks drawn at random directly instead of
quantized from float weights: for shapes too large for a float checkpoint on this machine
(a Qwen3-30B-A3B is 61 GB in bf16 and an hour of Q4_K quantization), to measure speed and
memory. Each tensor has the dtype and shape export --dtype would give it and its weights
the spread the float synth draws them with, but greedy tokens are not kept apart by wide
margins: for parity tests, synth floats and export them.`,
		Example: `  tokenwise synth --config configs/qwen3-0.6b.json --tokenizer tokenizer.json --dtype bf16 --out /tmp/qwen3-synth
  tokenwise synth --config configs/qwen3-30b-a3b.json --tokenizer tokenizer.json --dtype q4_k_m --out /tmp/qwen3-30b-a3b-q4_k_m.gguf`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if configPath == "" || out == "" {
				return errors.New("--config and --out are required")
			}
			if d := strings.ToLower(dtype); convert.IsKMix(d) {
				return synthGGUF(configPath, tokPath, d, seed, out, cmd.ErrOrStderr())
			}
			dt, ok := map[string]tensor.DType{"f32": tensor.F32, "f16": tensor.F16, "bf16": tensor.BF16}[dtype]
			if !ok {
				return fmt.Errorf("--dtype %q: want f32, f16, bf16 (a checkpoint folder), or %s (a GGUF file)", dtype, convert.KMixNames)
			}
			if strings.HasSuffix(out, ".gguf") {
				return fmt.Errorf("--out %s: a float synth writes a checkpoint folder (export it to GGUF with tokenwise export), a GGUF synth needs --dtype %s", out, convert.KMixNames)
			}
			return synth(configPath, tokPath, dt, seed, out, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&configPath, "config", "", "config.json giving the architecture and shape")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer.json (or a folder holding one) to ship with the checkpoint")
	f.StringVar(&dtype, "dtype", "bf16", "weight dtype: f32, f16 or bf16; "+convert.KMixNames+" for a GGUF file of random k-quant blocks")
	f.Uint64Var(&seed, "seed", 0, "random seed")
	f.StringVarP(&out, "out", "o", "", "output folder (created), or the .gguf file for a k-quant --dtype")
	return cmd
}

var torchDTypes = map[tensor.DType]string{tensor.F32: "float32", tensor.F16: "float16", tensor.BF16: "bfloat16"}

func synth(configPath, tokPath string, dt tensor.DType, seed uint64, out string, log io.Writer) error {
	raw, cfg, err := readSynthConfig(configPath)
	if err != nil {
		return err
	}
	var tokFiles map[string][]byte
	if tokPath != "" {
		if tokFiles, err = tokenizerFiles(tokPath, cfg.VocabSize); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}

	// config.json as given, with torch_dtype saying what was written.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return fmt.Errorf("%s: %w", configPath, err)
	}
	fields["torch_dtype"], _ = json.Marshal(torchDTypes[dt])
	if err := writeJSONFile(filepath.Join(out, "config.json"), fields); err != nil {
		return err
	}
	gen := map[string]any{"_from_model_config": true}
	if len(cfg.BOS) == 1 {
		gen["bos_token_id"] = cfg.BOS[0]
	}
	switch len(cfg.EOS) {
	case 0:
	case 1:
		gen["eos_token_id"] = cfg.EOS[0]
	default:
		gen["eos_token_id"] = cfg.EOS
	}
	if err := writeJSONFile(filepath.Join(out, "generation_config.json"), gen); err != nil {
		return err
	}
	for name, data := range tokFiles {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return err
		}
	}

	// Weights are generated one tensor at a time as the writer asks for them, so a
	// checkpoint larger than memory can be written.
	r, err := model.NewRandom(cfg, seed, dt)
	if err != nil {
		return err
	}
	ts := r.Tensors()
	var size int64
	for _, t := range ts {
		n, _ := dt.BytesFor(t.NumElements())
		size += int64(n)
	}
	path := filepath.Join(out, "model.safetensors")
	err = safetensors.WriteStream(path, ts, map[string]string{"format": "pt"}, func(i int) ([]byte, error) {
		return r.Data(ts[i].Name)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "wrote %s: %s, %d tensors, %.1f MB of %v weights, seed %d\n", out, cfg.Architecture, len(ts), float64(size)/1e6, dt, seed)
	return nil
}

// readSynthConfig reads and parses --config.
func readSynthConfig(path string) ([]byte, *model.Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := model.ParseConfig(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return raw, cfg, nil
}

// synthGGUF writes a random k-quant GGUF file (convert.SynthGGUF).
func synthGGUF(configPath, tokPath, dtype string, seed uint64, out string, log io.Writer) error {
	if !strings.HasSuffix(out, ".gguf") {
		return fmt.Errorf("--out %s: --dtype %s writes one GGUF file: give a path ending in .gguf", out, dtype)
	}
	if tokPath == "" {
		return fmt.Errorf("--dtype %s: a GGUF file carries its tokenizer: give --tokenizer", dtype)
	}
	raw, cfg, err := readSynthConfig(configPath)
	if err != nil {
		return err
	}
	files, err := tokenizerFiles(tokPath, cfg.VocabSize)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := convert.SynthGGUF(raw, files["tokenizer.json"], files["tokenizer_config.json"], out, dtype, seed); err != nil {
		return fmt.Errorf("%s: %w", configPath, err)
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "wrote %s: %s %s, %.2f GB of random blocks, seed %d, in %s\n", out, cfg.Architecture, dtype, float64(st.Size())/1e9, seed, time.Since(start).Round(time.Second))
	return nil
}

// tokenizerFiles reads the tokenizer.json at path (a file or a folder) and the
// tokenizer_config.json beside it, after checking the vocabulary fits the model's.
func tokenizerFiles(path string, vocabSize int) (map[string][]byte, error) {
	tk, err := tokenizer.Load(path)
	if err != nil {
		return nil, fmt.Errorf("--tokenizer %s: %w", path, err)
	}
	if n := tk.VocabSize(); n > vocabSize {
		return nil, fmt.Errorf("--tokenizer %s: %d tokens do not fit the config's vocab_size %d", path, n, vocabSize)
	}
	dir, file := path, "tokenizer.json"
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		dir, file = filepath.Dir(path), filepath.Base(path)
	}
	files := map[string][]byte{}
	if files["tokenizer.json"], err = os.ReadFile(filepath.Join(dir, file)); err != nil {
		return nil, err
	}
	if data, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		files["tokenizer_config.json"] = data
	}
	return files, nil
}

func writeJSONFile(path string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
