package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/demo"
)

func newDemoCmd() *cobra.Command {
	var (
		o            demo.Options
		htmlPath     string
		asJSON, keep bool
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show vocabulary specialization end to end on the embedded model (no download)",
		Long: `Run the whole tokenwise story on the model embedded in the binary, with no network:
the base model (trained by tokenwise on an essay-grading task whose JSON verdict is computable
from the essay) → analyze the domain → specialize its vocabulary (prune + add new tokens)
→ the specialized model adapted to its new tokens (the committed artifact made by
scripts/make-demo-model.sh after the same specialization) → the same held-out prompts
through the base and the adapted model, greedy.

Prints a table of output tokens, decode steps, prefill and decode time, LM-head rows, valid
JSON, verdict and score accuracy (with 95% intervals, and why the score accuracy cannot
pass about 40%), and the cost model's price per request; then a sample (its input, the
expected answer, each model's) and a 'tokenwise generate' command that asks the base model
in its training format. Writes an HTML report with a chart (--html).

--profile auto (the default) prices on the shipped CPU profile measured on a machine like
this one (same CPU model, instruction set and core count), else on a quick calibration of
this machine (read bandwidth and FMA peak, under a second); the output says which, and why.`,
		Example: `  tokenwise demo
  tokenwise demo --prompts 100 --html report.html`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			work, err := os.MkdirTemp("", "tokenwise-demo-")
			if err != nil {
				return err
			}
			if keep {
				fmt.Fprintf(cmd.ErrOrStderr(), "work folder: %s\n", work)
			} else {
				defer os.RemoveAll(work)
			}
			base, err := demo.ExtractModel(filepath.Join(work, "base"))
			if err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			adapted, err := demo.ExtractAdapted(filepath.Join(work, "adapted"))
			if err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			o.Log = cmd.ErrOrStderr()
			// The generate command it prints names a folder that is there after the demo:
			// demo/model in a checkout (where `go run ./cmd/tokenwise demo` runs), else the
			// extracted copy when --keep keeps it.
			o.CommandModel = filepath.Join("demo", "model")
			if _, err := os.Stat(filepath.Join(o.CommandModel, "model.safetensors")); err != nil && keep {
				o.CommandModel = base
			}
			res, err := demo.Run(cmd.Context(), base, adapted, work, o)
			if err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			res.AdaptedFrom = "the committed artifact (demo/adapted, made by scripts/make-demo-model.sh)"
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			fmt.Fprint(cmd.OutOrStdout(), res.Table())
			if _, err := os.Stat(o.CommandModel); err != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "  (%s is the base model's folder in the tokenwise repository: run the command there, or run the demo with --keep for an extracted copy)\n", o.CommandModel)
			}
			if htmlPath != "" {
				if err := os.WriteFile(htmlPath, []byte(res.HTML()), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "report: %s\n", htmlPath)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "done in %s\n", res.Elapsed.Round(time.Second))
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Prompts, "prompts", 100, "held-out prompts through each model")
	f.IntVar(&o.MaxTokens, "max-tokens", 200, "generation cap per prompt")
	f.IntVar(&o.Threads, "threads", 2, "kernel threads")
	f.StringVar(&o.Profile, "profile", "auto", "cost model hardware profile: auto (the shipped profile for this CPU, else a quick calibration), a shipped name or a file from tokenwise calibrate")
	f.Float64Var(&o.PricePerHour, "price", 0.10, "price of the profile's device per hour, in dollars")
	f.StringVar(&htmlPath, "html", "tokenwise-demo.html", `HTML report path ("" for none)`)
	f.BoolVar(&asJSON, "json", false, "print the results as JSON")
	f.BoolVar(&keep, "keep", false, "keep the work folder (extracted and specialized models)")
	return cmd
}
