package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/engine/spec"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
	"github.com/tokenwise/tokenwise/train"
)

// trainArgs are the flags train and adapt share.
type trainArgs struct {
	config, modelDir, tokDir, out, dtype, trainable string
	corpus, eval                                    []string
	steps, batch, accum, warmup, seqLen, threads    int
	checkpointEvery, evalMax, stopAt                int
	lr, minLR, wd, clip                             float64
	seed                                            uint64
	completionOnly, resume                          bool
}

func (a *trainArgs) flags(cmd *cobra.Command, steps int, lr float64, trainable string) {
	f := cmd.Flags()
	f.StringVar(&a.modelDir, "model", "", "start from this Hugging Face checkpoint folder")
	f.StringVar(&a.tokDir, "tokenizer", "", "tokenizer folder or tokenizer.json (default: the model's)")
	f.StringSliceVar(&a.corpus, "corpus", nil, `training corpus: JSONL {"prompt","completion"} or {"text"} lines, or text files`)
	f.StringSliceVar(&a.eval, "eval", nil, "held-out corpus for the final evaluation (default: the last 5% of --corpus)")
	f.StringVar(&a.out, "out", "", "output folder (checkpoints are written here)")
	f.IntVar(&a.steps, "steps", steps, "optimizer steps (the length of the learning-rate schedule)")
	f.IntVar(&a.stopAt, "stop-at", 0, "stop after this many steps, the schedule still spanning --steps (a reproducible prefix of the run)")
	f.IntVar(&a.batch, "batch", 8, "sequences per micro-batch")
	f.IntVar(&a.accum, "accum", 1, "micro-batches per optimizer step (gradient accumulation)")
	f.Float64Var(&a.lr, "lr", lr, "peak learning rate")
	f.Float64Var(&a.minLR, "min-lr", 0, "final learning rate of the cosine (default lr/10)")
	f.IntVar(&a.warmup, "warmup", 0, "linear warmup steps (default steps/20)")
	f.Float64Var(&a.wd, "weight-decay", 0.1, "AdamW weight decay on matrices")
	f.Float64Var(&a.clip, "clip", 1, "gradient norm clipping")
	f.IntVar(&a.seqLen, "seq-len", 0, "cut sequences to this many tokens (default: the model's context)")
	f.BoolVar(&a.completionOnly, "completion-only", true, "train prompt/completion records on the completion tokens only")
	f.IntVar(&a.threads, "threads", 0, "worker threads (default: all CPUs)")
	f.Uint64Var(&a.seed, "seed", 1, "seed for initialization and data order")
	f.IntVar(&a.checkpointEvery, "checkpoint-every", 0, "write a checkpoint every N steps (and at the end)")
	f.IntVar(&a.evalMax, "eval-max", 200, "at most this many held-out records in the evaluation")
	f.StringVar(&a.dtype, "dtype", "bf16", "checkpoint dtype: bf16 or f32")
	f.BoolVar(&a.resume, "resume", false, "continue from the trainer state in --out ("+trainerStateFile+", written at every checkpoint): same flags and corpus, same result as a run never stopped")
	f.StringVar(&a.trainable, "trainable", trainable, `tensors to train: "all", or a comma list of embed, head, norm, first, last, layer.N, or name substrings`)
}

// trainerStateFile is the file in --out that holds what --resume continues from: the
// trainable float32 weights, AdamW moments and step (train.Options.State).
const trainerStateFile = "trainer-state.bin"

// trainableFunc turns the --trainable list into a predicate on tensor names.
func trainableFunc(spec string, layers int, tied bool) (func(string) bool, error) {
	if spec == "" || spec == "all" {
		return nil, nil
	}
	var parts []string
	for _, p := range strings.Split(spec, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "":
		case p == "embed":
			parts = append(parts, "model.embed_tokens.")
		case p == "head":
			parts = append(parts, "lm_head.")
			if tied { // the head is the embedding
				parts = append(parts, "model.embed_tokens.")
			}
		case p == "norm":
			parts = append(parts, "model.norm.")
		case p == "first":
			parts = append(parts, "model.layers.0.")
		case p == "last":
			parts = append(parts, fmt.Sprintf("model.layers.%d.", layers-1))
		case strings.HasPrefix(p, "layer."):
			n, err := strconv.Atoi(p[len("layer."):])
			if err != nil || n < 0 || n >= layers {
				return nil, fmt.Errorf("--trainable %q: want layer.N with 0 <= N < %d", p, layers)
			}
			parts = append(parts, fmt.Sprintf("model.layers.%d.", n))
		default:
			parts = append(parts, p)
		}
	}
	return func(name string) bool {
		for _, p := range parts {
			if strings.Contains(name, p) {
				return true
			}
		}
		return false
	}, nil
}

// runTraining trains (or adapts) a model as a says and writes the checkpoint to a.out.
func runTraining(stdout, stderr io.Writer, a *trainArgs, what string) error {
	if len(a.corpus) == 0 || a.out == "" {
		return fmt.Errorf("%s: --corpus and --out are required", what)
	}
	tokPath := a.tokDir
	if tokPath == "" {
		tokPath = a.modelDir
	}
	if tokPath == "" {
		return fmt.Errorf("%s: give --tokenizer (or --model, whose tokenizer is used)", what)
	}
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		return fmt.Errorf("%s: tokenizer: %w", what, err)
	}
	tokDir := tokPath
	if st, err := os.Stat(tokPath); err == nil && !st.IsDir() {
		tokDir = filepath.Dir(tokPath)
	}
	var net *train.Net
	switch {
	case a.modelDir != "":
		if net, err = train.Load(a.modelDir); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if tok.VocabSize() > net.Cfg.VocabSize {
			return fmt.Errorf("%s: tokenizer has %d ids, the model's vocab_size is %d", what, tok.VocabSize(), net.Cfg.VocabSize)
		}
	case a.config != "":
		cfg, err := model.ReadConfig(a.config)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		cfg.VocabSize = tok.VocabSize()
		cfg.BOS, cfg.EOS = nil, nil
		for _, s := range []string{train.EndOfTurn, "<|endoftext|>"} {
			if id, ok := tok.TokenID(s); ok {
				cfg.EOS = append(cfg.EOS, id)
			}
		}
		if net, err = train.New(cfg, a.seed); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	default:
		return fmt.Errorf("%s: give --model DIR or --config config.json", what)
	}
	cfg := net.Cfg
	pairs, err := train.ReadPairs(a.corpus...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var held []train.Pair
	if len(a.eval) > 0 {
		if held, err = train.ReadPairs(a.eval...); err != nil {
			return fmt.Errorf("%s: --eval: %w", what, err)
		}
	} else if len(pairs) >= 20 {
		k := len(pairs) / 20
		held, pairs = pairs[len(pairs)-k:], pairs[:len(pairs)-k]
	}
	if len(held) > a.evalMax {
		held = held[:a.evalMax]
	}
	seqLen := a.seqLen
	if seqLen <= 0 || seqLen > cfg.MaxPositions {
		seqLen = cfg.MaxPositions
	}
	encode := func(ps []train.Pair) []train.Sequence {
		out := make([]train.Sequence, 0, len(ps))
		for _, p := range ps {
			// A record cut before its completion has nothing to learn from.
			if s := train.Encode(tok, p, a.completionOnly, seqLen); s.Targets() > 0 {
				out = append(out, s)
			}
		}
		return out
	}
	data, heldSeqs := encode(pairs), encode(held)
	if len(data) == 0 {
		return fmt.Errorf("%s: no training sequence has a target token within --seq-len %d", what, seqLen)
	}
	trainable, err := trainableFunc(a.trainable, cfg.NumLayers, cfg.TieEmbeddings)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var dt tensor.DType
	switch a.dtype {
	case "bf16":
		dt = tensor.BF16
	case "f32":
		dt = tensor.F32
	default:
		return fmt.Errorf("%s: --dtype %q: want bf16 or f32", what, a.dtype)
	}
	extra := map[string][]byte{}
	// The tokenizer's files, and the draft index in its ids (same vocabulary after training).
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "vocab_map.json", "special_tokens_map.json", spec.DraftIndexFile} {
		if b, err := os.ReadFile(filepath.Join(tokDir, name)); err == nil {
			extra[name] = b
		}
	}
	gen, err := generationConfig(cfg)
	if err != nil {
		return err
	}
	extra["generation_config.json"] = gen
	nTok := 0
	for _, s := range data {
		nTok += len(s.IDs)
	}
	fmt.Fprintf(stderr, "%s: %s %d layers × %d hidden, %d params; %d sequences (%d tokens), %d held out; %d steps × %d sequences\n",
		what, cfg.Architecture, cfg.NumLayers, cfg.HiddenSize, net.NumParams(), len(data), nTok, len(heldSeqs), a.steps, a.batch*a.accum)
	var before float64
	if len(heldSeqs) > 0 {
		if before, err = net.Loss(heldSeqs, a.threads); err != nil {
			return fmt.Errorf("%s: eval: %w", what, err)
		}
		fmt.Fprintf(stderr, "held-out loss before: %.4f\n", before)
	}
	if err := os.MkdirAll(a.out, 0o755); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	start := time.Now()
	stats, err := train.Run(net, data, train.Options{
		Steps: a.steps, Batch: a.batch, Accum: a.accum, LR: a.lr, MinLR: a.minLR, Warmup: a.warmup,
		WeightDecay: a.wd, Clip: a.clip, Threads: a.threads, Seed: a.seed, Trainable: trainable, StopAt: a.stopAt,
		Log: stderr, LogEvery: max(1, a.steps/50), CheckpointEvery: a.checkpointEvery,
		Checkpoint: func(step int) error { return net.Save(a.out, dt, extra) },
		State:      filepath.Join(a.out, trainerStateFile), Resume: a.resume,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	el := time.Since(start)
	toks := 0
	for _, s := range stats {
		toks += s.Tokens
	}
	if len(stats) == 0 {
		fmt.Fprintf(stdout, "%s: the trainer state in %s is already at the last step: nothing to train\n", what, a.out)
	} else {
		fmt.Fprintf(stdout, "%s: %d steps in %s (%.0f tokens/s), final train loss %.4f\n", what, len(stats), el.Round(time.Second), float64(toks)/el.Seconds(), stats[len(stats)-1].Loss)
	}
	if len(heldSeqs) > 0 {
		after, err := net.Loss(heldSeqs, a.threads)
		if err != nil {
			return fmt.Errorf("%s: eval: %w", what, err)
		}
		fmt.Fprintf(stdout, "held-out loss: %.4f -> %.4f (%d sequences)\n", before, after, len(heldSeqs))
	}
	fmt.Fprintf(stdout, "checkpoint: %s\n", a.out)
	return nil
}

// generationConfig renders generation_config.json with the model's end-of-turn ids.
func generationConfig(cfg *model.Config) ([]byte, error) {
	g := map[string]any{"do_sample": false}
	switch len(cfg.EOS) {
	case 0:
	case 1:
		g["eos_token_id"] = cfg.EOS[0]
	default:
		g["eos_token_id"] = cfg.EOS
	}
	if len(cfg.BOS) > 0 {
		g["bos_token_id"] = cfg.BOS[0]
	}
	return jsonIndent(g)
}

func jsonIndent(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func newTrainCmd() *cobra.Command {
	var a trainArgs
	cmd := &cobra.Command{
		Use:   "train (--config config.json --tokenizer DIR | --model DIR) --corpus FILE... --out DIR",
		Short: "Train a Llama/Qwen-family model on the CPU",
		Long: `Train a decoder-only model (llama, mistral, qwen2, qwen3) on a corpus, on the CPU, and write a
Hugging Face checkpoint (model.safetensors, config.json, generation_config.json and the
tokenizer files) that every tokenwise command loads.

Start fresh from a config.json (its vocab_size is set to the tokenizer's) or continue from a
checkpoint with --model. Prompt/completion records are rendered in ChatML and, with
--completion-only (the default), only the completion tokens carry the loss. AdamW with
gradient clipping, linear warmup then cosine decay, gradient accumulation (--accum),
each product split over --threads workers. --resume continues a stopped run (--stop-at, a
crash) from the state its last checkpoint wrote to --out. Progress (loss, learning rate, gradient
norm, tokens/s) goes to stderr; the held-out loss is reported before and after.`,
		Example: `  tokenwise train --config configs/demo.json --tokenizer tok/ --corpus train.jsonl --steps 500 --out model/`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if (a.config == "") == (a.modelDir == "") {
				return errors.New("train: give exactly one of --config and --model")
			}
			return runTraining(cmd.OutOrStdout(), cmd.ErrOrStderr(), &a, "train")
		},
	}
	a.flags(cmd, 300, 1e-3, "all")
	cmd.Flags().StringVar(&a.config, "config", "", "config.json giving the architecture and shape of a fresh model")
	return cmd
}
