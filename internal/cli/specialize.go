package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/engine/spec"
	"github.com/tokenwise/tokenwise/specialize"
	"github.com/tokenwise/tokenwise/tokenizer"
)

func newSpecializeCmd() *cobra.Command {
	var (
		modelPath, out, init    string
		corpus, heldOut, valid  []string
		prune, gguf, asJSON     bool
		portable                bool
		add, maxNgram, padTo    int
		minDocs, maxBytes       int
		inputWeight, minSupport float64
	)
	cmd := &cobra.Command{
		Use:   "specialize --model PATH --corpus FILE... --out DIR [--prune] [--add N] [--max-ngram K] [--init mean|exp|fvt] [--gguf]",
		Short: "Fit a model's vocabulary to a domain: prune unused tokens, add merged ones",
		Long: `Specialize the vocabulary of a model (HF folder, or GGUF converted first) to a corpus and
write a new HF checkpoint to --out: model.safetensors with the embedding and LM-head rows
sliced by the id map, tokenizer.json (loads in HF tokenizers with the same ids), configs
with bos/eos/pad renumbered, vocab_map.json (new -> old ids), report.json and report.txt.

--prune keeps every token the corpus uses, the special and added tokens, the byte alphabet
and every piece BPE builds on the way to a kept token; every corpus text then encodes to
exactly its old ids under the map, and any other text still encodes and decodes.
--add N adds up to N tokens: merges appended after the original ones inside pre-tokens
(never lengthen a text), and added tokens across pre-token boundaries (JSON punctuation
with keys, recurring phrases), chosen by savings (output tokens weigh 1, input tokens
--input-weight). Candidates that would lengthen any corpus text are dropped; the check
runs on every text.

What an added token may be, so that it travels to other loaders and generalizes:
  --min-docs M        it recurs in at least M records (a JSONL line's prompt and completion
                      are one record): a string seen in one or two is memorized, not the
                      domain's structure (default 3)
  --validation FILE   records not counted for savings; a token must occur in at least
                      --min-support of them (default 0.01) to be chosen
  --max-token-bytes N no new token is longer (default 32: llama-cpp-python reads each
                      token's text through a 32-byte buffer and loses a longer one)
  --portable          added tokens only of printable ASCII without spaces: the only ones
                      transformers' GGUF tokenizer converter keeps (AutoTokenizer with
                      gguf_file=, which vLLM and SGLang use when given only a GGUF); it drops
                      the rest, and the prompt tokenizes to many more ids there. HF
                      tokenizers and llama.cpp keep every added token, and most savings on
                      spaced JSON hold a space, so this is off by default; with --gguf and
                      without it, specialize says how many tokens that converter would drop
                      (serve such a GGUF with the tokenizer.json: vLLM --tokenizer DIR).

The new tokens' rows are only initialized: until 'tokenwise adapt' trains them, the
specialized model has never seen its prompts' merged tokens and its greedy output is
degenerate in every engine. specialize says so when it adds tokens; pruning alone keeps
the outputs token for token.

New rows: --init mean (of the parts), exp (AdaptiVocab's exponential weights: toward the
last token for input embeddings, the first for output) or fvt (mean over the old
tokenization). vocab_size is padded to a multiple of --pad-to; padding rows are zero and
never sampled. --held-out reports the reduction on texts not used for choosing tokens.`,
		Example: `  tokenwise specialize --model Qwen3-0.6B/ --corpus train.jsonl --held-out test.jsonl --prune --add 512 --out q3-essay/ --gguf`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if modelPath == "" || len(corpus) == 0 || out == "" {
				return errors.New("specialize: --model, --corpus and --out are required")
			}
			if !prune && add <= 0 {
				return errors.New("specialize: nothing to do: give --prune and/or --add N")
			}
			if maxBytes < 0 || minDocs < 0 || minSupport < 0 || minSupport > 1 {
				return fmt.Errorf("specialize: --max-token-bytes %d, --min-docs %d, --min-support %g: want counts >= 0 and a fraction in [0, 1]", maxBytes, minDocs, minSupport)
			}
			docs, err := specialize.ReadCorpus(corpus...)
			if err != nil {
				return fmt.Errorf("specialize: %w", err)
			}
			var held []specialize.Doc
			if len(heldOut) > 0 {
				if held, err = specialize.ReadCorpus(heldOut...); err != nil {
					return fmt.Errorf("specialize: --held-out: %w", err)
				}
			}
			var validation []specialize.Doc
			if len(valid) > 0 {
				if validation, err = specialize.ReadCorpus(valid...); err != nil {
					return fmt.Errorf("specialize: --validation: %w", err)
				}
			}
			logw := cmd.ErrOrStderr()
			start := time.Now()
			r, err := specialize.Run(modelPath, docs, out, specialize.RunOptions{
				Options: specialize.Options{Prune: prune, Add: add, MaxNgram: maxNgram, InputWeight: inputWeight,
					MinDocs: minDocs, Validation: validation, MinSupport: minSupport, MaxTokenBytes: maxBytes, Portable: portable,
					Log: func(f string, a ...any) { fmt.Fprintf(logw, f+"\n", a...) }},
				Init: init, PadTo: padTo, GGUF: gguf, HeldOut: held,
			})
			if err != nil {
				return fmt.Errorf("specialize: %w", err)
			}
			if n, err := writeDraftIndex(out, docs); err != nil {
				return fmt.Errorf("specialize: draft index: %w", err)
			} else if n > 0 {
				fmt.Fprintf(logw, "wrote %s: drafts from %d completions (--speculate domain)\n", filepath.Join(out, spec.DraftIndexFile), n)
			}
			if r.NewAdded+r.NewMerges > 0 {
				fmt.Fprintf(logw, "%s\n", adaptNotice(r.NewAdded+r.NewMerges, out, corpus))
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetEscapeHTML(false)
				return enc.Encode(r)
			}
			fmt.Fprint(cmd.OutOrStdout(), r.Text())
			fmt.Fprintf(logw, "wrote %s (%.1f s)\n", out, time.Since(start).Seconds())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", "", "HF checkpoint folder or .gguf file")
	f.StringSliceVar(&corpus, "corpus", nil, "corpus files (text or JSONL); repeat or comma-separate")
	f.StringSliceVar(&heldOut, "held-out", nil, "held-out corpus files to report the reduction on")
	f.StringVar(&out, "out", "", "output folder")
	f.BoolVar(&prune, "prune", false, "drop tokens the corpus does not need")
	f.IntVar(&add, "add", 0, "new tokens to add (merges and added tokens)")
	f.IntVar(&maxNgram, "max-ngram", 8, "most tokens one new token may replace")
	f.Float64Var(&inputWeight, "input-weight", 1.0/7, "weight of a saved input token against a saved output token")
	f.IntVar(&minDocs, "min-docs", 3, "records an added token must recur in")
	f.StringSliceVar(&valid, "validation", nil, "records an added token must hold up on (not counted for savings)")
	f.Float64Var(&minSupport, "min-support", 0.01, "fraction of --validation records an added token must occur in")
	f.IntVar(&maxBytes, "max-token-bytes", specialize.DefaultMaxTokenBytes, "longest new token, in bytes")
	f.BoolVar(&portable, "portable", false, "added tokens only of printable ASCII without spaces (what transformers' GGUF converter keeps)")
	f.StringVar(&init, "init", "mean", "new-row initialization: mean, exp or fvt")
	f.IntVar(&padTo, "pad-to", 64, "pad vocab_size to a multiple of this")
	f.BoolVar(&gguf, "gguf", false, "also write model.gguf (llama.cpp)")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON")
	return cmd
}

// writeDraftIndex writes the n-gram index of the corpus's completions, in the specialized
// tokenizer's ids, beside the model (spec.DraftIndexFile), for --speculate domain. A corpus
// without completions writes none. It returns the completions indexed.
func writeDraftIndex(dir string, docs []specialize.Doc) (int, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return 0, err
	}
	x := newDraftIndex()
	n := 0
	for _, d := range docs {
		if d.Side == specialize.Output {
			x.Add(tok.Encode(d.Text, false))
			n++
		}
	}
	if n == 0 {
		return 0, nil
	}
	return n, x.WriteFile(filepath.Join(dir, spec.DraftIndexFile))
}

// draftIndexEntries bounds the index: 256k contexts, about 25 MB in memory and 13 MB on
// disk at most, which a domain's few thousand answers do not reach.
const draftIndexEntries = 1 << 18

// newDraftIndex is an empty domain index as specialize writes it and serve starts one:
// contexts of up to three tokens, at most draftIndexEntries of them.
func newDraftIndex() *spec.Index { return spec.NewIndex(3, draftIndexEntries) }

// adaptNotice says what a model with new tokens needs before it answers well.
func adaptNotice(n int, out string, corpus []string) string {
	return fmt.Sprintf("NOTE: the %d new tokens have initialized rows only: until they are trained, the specialized "+
		"model's greedy output is degenerate (in every engine). Run\n  tokenwise adapt --model %s --corpus %s --out %s-adapted\n"+
		"before serving it.", n, out, strings.Join(corpus, ","), strings.TrimSuffix(out, "/"))
}
