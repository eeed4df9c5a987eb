package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/specialize"
	"github.com/tokenwise/tokenwise/tokenizer"
)

func newAnalyzeCmd() *cobra.Command {
	var (
		tokPath, htmlPath string
		corpus            []string
		asJSON            bool
		add, maxNgram     int
		hidden, elemBytes int
	)
	cmd := &cobra.Command{
		Use:   "analyze --tokenizer PATH --corpus FILE... [--json] [--html FILE]",
		Short: "Show how a corpus fragments and what vocabulary specialization would save",
		Long: `Measure a corpus under a tokenizer: tokens per byte and per word (input and output
sides apart), how many ids the corpus ever uses, how many cover 50/90/99% of its tokens,
the most fragmented words and JSON keys, and the projected effect of specialization —
the same pruning and merged tokens 'tokenwise specialize' builds: tokens saved, and the
LM-head rows (bytes with --hidden/--elem-bytes, or read from a model folder's config.json)
each decode step would no longer score.

Corpus files are plain text (one text each) or JSONL: {"text"} lines, or
{"prompt","completion"} lines whose completions are the output side.`,
		Example: `  tokenwise analyze --tokenizer Qwen3-0.6B/ --corpus train.jsonl --html report.html`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tokPath == "" || len(corpus) == 0 {
				return errors.New("analyze: --tokenizer and --corpus are required")
			}
			tokJSON, err := tokenizerJSON(tokPath)
			if err != nil {
				return fmt.Errorf("analyze: %w", err)
			}
			docs, err := specialize.ReadCorpus(corpus...)
			if err != nil {
				return fmt.Errorf("analyze: %w", err)
			}
			if hidden == 0 {
				hidden, elemBytes = configShape(tokPath)
			}
			var progress func(done, total int)
			if len(docs) >= 5000 {
				bar := progressbar.NewOptions(len(docs), progressbar.OptionSetWriter(cmd.ErrOrStderr()),
					progressbar.OptionSetDescription("encoding"), progressbar.OptionThrottle(200e6))
				progress = func(done, _ int) { _ = bar.Set(done) }
			}
			a, err := specialize.Analyze(tokJSON, docs, specialize.Options{Prune: true, Add: add, MaxNgram: maxNgram},
				hidden, elemBytes, progress)
			if err != nil {
				return fmt.Errorf("analyze: %w", err)
			}
			if htmlPath != "" {
				f, err := os.Create(htmlPath)
				if err != nil {
					return fmt.Errorf("analyze: %w", err)
				}
				if err := a.HTML(f); err != nil {
					f.Close()
					return fmt.Errorf("analyze: %s: %w", htmlPath, err)
				}
				if err := f.Close(); err != nil {
					return fmt.Errorf("analyze: %s: %w", htmlPath, err)
				}
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetEscapeHTML(false)
				return enc.Encode(a)
			}
			a.Text(cmd.OutOrStdout())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer.json, model folder or GGUF")
	f.StringSliceVar(&corpus, "corpus", nil, "corpus files (text or JSONL); repeat or comma-separate")
	f.BoolVar(&asJSON, "json", false, "print the analysis as JSON")
	f.StringVar(&htmlPath, "html", "", "also write an HTML page with token boundaries before/after")
	f.IntVar(&add, "add", 256, "new tokens in the projection")
	f.IntVar(&maxNgram, "max-ngram", 8, "most tokens one new token may replace")
	f.IntVar(&hidden, "hidden", 0, "hidden size, to turn LM-head rows into bytes (default: config.json next to the tokenizer)")
	f.IntVar(&elemBytes, "elem-bytes", 2, "bytes per LM-head weight with --hidden")
	return cmd
}

// tokenizerJSON returns the tokenizer.json bytes of a tokenizer.json, a model folder or a GGUF.
func tokenizerJSON(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return os.ReadFile(filepath.Join(path, "tokenizer.json"))
	}
	if strings.HasSuffix(strings.ToLower(path), ".gguf") {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		data, _, _, _, err := tokenizer.GGUFToHF(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return data, nil
	}
	return os.ReadFile(path)
}

// configShape reads hidden_size and the weight dtype's size from the config.json of the model
// folder a tokenizer path belongs to; zeros when there is none.
func configShape(tokPath string) (hidden, elemBytes int) {
	dir := tokPath
	if st, err := os.Stat(tokPath); err != nil || !st.IsDir() {
		dir = filepath.Dir(tokPath)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return 0, 0
	}
	c, err := model.ParseHFConfig(raw)
	if err != nil || c.HiddenSize <= 0 {
		return 0, 0
	}
	switch c.TorchDType {
	case "float32":
		return c.HiddenSize, 4
	default:
		return c.HiddenSize, 2
	}
}
