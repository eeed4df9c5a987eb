package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newAdaptCmd() *cobra.Command {
	var a trainArgs
	cmd := &cobra.Command{
		Use:   "adapt --model SPECIALIZED --corpus FILE... --out DIR",
		Short: "Fine-tune a specialized model so it uses its new vocabulary",
		Long: `Lightly fine-tune a model after vocabulary specialization (tokenwise specialize), so that it
learns to read and emit its new merged tokens: by default only the embeddings, the LM head and
the first and last blocks train (AdaptiVocab's recipe), with a small learning rate. The corpus
is encoded with the specialized model's own tokenizer. Checkpoints go to --out (every
--checkpoint-every steps and at the end); the held-out loss is reported before and after
(--eval, or the last 5% of the corpus).`,
		Example: `  tokenwise adapt --model q3-essay/ --corpus train.jsonl --eval test.jsonl --steps 200 --out q3-essay-adapted/`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.modelDir == "" {
				return errors.New("adapt: --model is required")
			}
			return runTraining(cmd.OutOrStdout(), cmd.ErrOrStderr(), &a, "adapt")
		},
	}
	a.flags(cmd, 100, 3e-4, "embed,head,first,last")
	return cmd
}
