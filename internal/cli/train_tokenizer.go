package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/specialize"
	tokentrain "github.com/tokenwise/tokenwise/tokenizer/train"
)

func newTrainTokenizerCmd() *cobra.Command {
	var (
		corpus    []string
		vocabSize int
		out       string
	)
	cmd := &cobra.Command{
		Use:   "train-tokenizer --corpus FILE... --vocab-size N --out DIR",
		Short: "Learn a byte-level BPE vocabulary and write a tokenizer.json",
		Long: `Learn a byte-level BPE tokenizer from corpus files (text, or JSONL with {"text"} or
{"prompt","completion"} lines) and write DIR/tokenizer.json and DIR/tokenizer_config.json.
The layout is Qwen2's: the Qwen2 pre-tokenizer regex, the GPT-2 byte alphabet (256 ids),
learned merges, then the special tokens <|endoftext|>, <|im_start|>, <|im_end|> and a ChatML
chat template. HF tokenizers loads the file and gives the same ids as tokenwise.`,
		Example: `  tokenwise train-tokenizer --corpus essays.jsonl --vocab-size 4096 --out tok/`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(corpus) == 0 || out == "" || vocabSize <= 0 {
				return errors.New("train-tokenizer: --corpus, --vocab-size and --out are required")
			}
			docs, err := specialize.ReadCorpus(corpus...)
			if err != nil {
				return fmt.Errorf("train-tokenizer: %w", err)
			}
			texts := make([]string, len(docs))
			for i, d := range docs {
				texts[i] = d.Text
			}
			start := time.Now()
			res, err := tokentrain.Train(texts, tokentrain.Options{VocabSize: vocabSize, Progress: func(done, total int) {
				fmt.Fprintf(cmd.ErrOrStderr(), "\rmerges %d/%d", done, total)
			}})
			fmt.Fprintln(cmd.ErrOrStderr())
			if err != nil {
				return fmt.Errorf("train-tokenizer: %w", err)
			}
			tj, err := res.TokenizerJSON()
			if err != nil {
				return fmt.Errorf("train-tokenizer: %w", err)
			}
			cj, err := res.TokenizerConfigJSON()
			if err != nil {
				return fmt.Errorf("train-tokenizer: %w", err)
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(out, "tokenizer.json"), tj, 0o644); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(out, "tokenizer_config.json"), cj, 0o644); err != nil {
				return err
			}
			n := len(res.Vocab) + len(res.Specials)
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d ids (%d bytes + %d learned + %d special), %d merges from %d texts in %s\n",
				filepath.Join(out, "tokenizer.json"), n, 256, len(res.Vocab)-256, len(res.Specials), len(res.Merges), len(texts), time.Since(start).Round(time.Millisecond))
			if n < vocabSize {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: the corpus ran out of pairs seen twice: %d ids, not %d\n", n, vocabSize)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&corpus, "corpus", nil, "corpus files (text or JSONL); repeat or comma-separate")
	f.IntVar(&vocabSize, "vocab-size", 0, "total vocabulary size: 256 bytes + learned tokens + 3 special tokens")
	f.StringVar(&out, "out", "", "output folder")
	return cmd
}
