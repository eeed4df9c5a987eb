package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/experiment"
)

// execInProcess runs a tokenwise command line in this process, as the experiment's steps do.
func execInProcess(ctx context.Context, stdout, stderr io.Writer, args ...string) error {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetIn(strings.NewReader(""))
	return root.ExecuteContext(ctx)
}

func newExperimentCmd() *cobra.Command {
	o := experiment.Default()
	var (
		quick, asJSON bool
		prices        []string
	)
	cmd := &cobra.Command{
		Use:   "experiment --model GGUF|DIR --work DIR [--quick]",
		Short: "The three-arm specialization experiment on a real model and the Debian package task",
		Long: `Experiment measures vocabulary specialization against its honest baseline on a real model:
  arm 0  the base model, a few-shot prompt (--shots examples from train), untrained
  arm 1  the base vocabulary fine-tuned on the task (tokenwise adapt)
  arm 2  tokenwise specialize (--prune --add --init), then tokenwise adapt with the same
         records, order, optimizer, steps and trainable tensors as arm 1
on the Debian package task (tokenwise corpus --task debian: this machine's package records
as fixed-schema JSON, split by source package). Every arm answers the same held-out records,
greedy, under domain/debian/answer.schema.json (--schema=false: unconstrained).

Steps, each writing into --work: export the base model to an HF folder (--dtype), build the
task (records whose ChatML prompt and answer fit --seq-len base tokens), evaluate arm 0,
train and evaluate arm 1, specialize, train and evaluate arm 2, write the report. A rerun
skips the steps that finished with the same options, continues an evaluation where it
stopped, and redoes a step (and those after it) whose options changed. Each step's command
lines and logs are in --work/logs.

The report (--work/report.md, report.svg, report.json): per arm the field-exact accuracy per
JSON field and for all fields, valid-JSON rate, prompt and output tokens, decode steps,
prefill and decode ms per request as tokenwise measured them, LM-head rows; the cost model's
device hours (and, with --price, dollars) per million requests at batch 1 on this CPU's
profile (--profile) and the shipped GPU profiles, with arm 2's saving against arm 1 split
into fewer decode steps, a shorter prompt and the smaller head; and the issue's goals for arm
2 against arm 1 (accuracy within 1 point, 40% fewer output tokens, 50% lower measured time).

The defaults are the real experiment; --quick (scripts/experiment-smollm2.sh with QUICK=1) is
a tiny one that runs end to end in minutes: ` + quickSummary() + `.
Flags given with --quick override its sizes.`,
		Example: `  scripts/experiment-smollm2.sh                    # the real experiment on SmolLM2-135M-Instruct
  QUICK=1 scripts/experiment-smollm2.sh            # minutes
  tokenwise experiment --model smollm2.gguf --work exp/ --quick --price cpu=0.10,h100-sxm=2.50`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if quick {
				q := experiment.Quick()
				f := cmd.Flags()
				set := func(name string, dst, src any) {
					if !f.Changed(name) {
						switch d := dst.(type) {
						case *int:
							*d = *src.(*int)
						}
					}
				}
				set("train", &o.Train, &q.Train)
				set("held-out", &o.HeldOut, &q.HeldOut)
				set("steps", &o.Steps, &q.Steps)
				set("batch", &o.Batch, &q.Batch)
				set("seq-len", &o.SeqLen, &q.SeqLen)
				set("eval-max", &o.EvalMax, &q.EvalMax)
				set("max-tokens", &o.MaxTokens, &q.MaxTokens)
				set("shots", &o.Shots, &q.Shots)
			}
			o.Prices = map[string]float64{}
			for _, p := range prices {
				name, v, ok := strings.Cut(p, "=")
				f, err := strconv.ParseFloat(v, 64)
				if !ok || name == "" || err != nil || f < 0 {
					return fmt.Errorf("experiment: --price %q: want PROFILE=DOLLARS_PER_HOUR (cpu for the CPU profile)", p)
				}
				o.Prices[name] = f
			}
			o.Exec = execInProcess
			o.Log = cmd.ErrOrStderr()
			if f, ok := o.Log.(*os.File); ok {
				o.TTY = isTerminal(f)
			}
			res, err := experiment.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(res.Report)
			}
			fmt.Fprint(cmd.OutOrStdout(), res.Report.Accuracy)
			for _, g := range res.Report.Goals {
				met := "missed"
				if g.Met {
					met = "met"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "goal %s %s: %s (measured %.1f; %s)\n", g.What, g.Target, met, g.Measured, g.Note)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report: %s (chart %s, data %s)\n", res.Markdown, res.SVG, res.JSON)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Model, "model", "", "the base model: a .gguf file (exported to an HF folder at --dtype) or an HF folder")
	f.StringVar(&o.Work, "work", "", "work folder: every step's output, logs and the report (a rerun resumes it)")
	f.BoolVar(&quick, "quick", false, "a tiny run, end to end in minutes: its sizes, except those given as flags")
	f.IntVar(&o.Train, "train", o.Train, "training records (the first that fit --seq-len)")
	f.IntVar(&o.HeldOut, "held-out", o.HeldOut, "held-out records evaluated (and at most this many validation records)")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the split and of the training order")
	f.BoolVar(&o.Apt, "apt", o.Apt, "also the apt lists' package records (tokenwise corpus --apt); false: the installed packages only")
	f.StringVar(&o.DType, "dtype", o.DType, "dtype of the exported base and of the trained checkpoints: bf16 or f32")
	f.IntVar(&o.Steps, "steps", o.Steps, "optimizer steps of each arm's adapt")
	f.IntVar(&o.Arm2Steps, "arm2-steps", 0, "arm 2's steps, if not --steps (its sequences are shorter: equal training tokens take more steps)")
	f.IntVar(&o.Batch, "batch", o.Batch, "sequences per step")
	f.IntVar(&o.SeqLen, "seq-len", o.SeqLen, "records longer than this many base tokens are left out")
	f.Float64Var(&o.LR, "lr", o.LR, "peak learning rate")
	f.StringVar(&o.Trainable, "trainable", o.Trainable, `tensors both arms train (adapt --trainable): "all" or a list of embed, head, norm, first, last, layer.N`)
	f.StringVar(&o.AdaptWith, "adapt-with", "", `train arms 1 and 2 with this command instead of tokenwise adapt, given adapt's flags (e.g. "python3 recipes/adapt.py", the recipe on GPUs)`)
	f.IntVar(&o.EvalMax, "eval-max", o.EvalMax, "validation records in adapt's loss before and after")
	f.IntVar(&o.Add, "add", o.Add, "new tokens arm 2's specialization may add")
	f.StringVar(&o.Init, "init", o.Init, "new-row initialization: mean, exp or fvt")
	f.IntVar(&o.Shots, "shots", o.Shots, "arm 0's few-shot examples")
	f.IntVar(&o.MaxTokens, "max-tokens", o.MaxTokens, "generation cap per record")
	f.BoolVar(&o.Schema, "schema", o.Schema, "generate under the answer's JSON Schema (grammar masks and jump-forward)")
	f.IntVar(&o.Threads, "threads", o.Threads, "threads for training and inference")
	f.IntVar(&o.TimeRecords, "time-records", 0, "held-out records (the first ones) the timing pass runs through the three arms (0: all)")
	f.IntVar(&o.EvalWorkers, "eval-workers", 1, "held-out records answered at once in the evaluations, --threads split among them (the timing pass answers one at a time)")
	f.StringVar(&o.Profile, "profile", o.Profile, "the CPU's cost profile: auto (the shipped profile for this CPU, else a quick calibration), a name or a file")
	f.StringSliceVar(&o.GPUs, "gpus", nil, "GPU profiles to price on (default: every shipped one)")
	f.StringSliceVar(&prices, "price", nil, "PROFILE=DOLLARS per device hour, for dollars per million requests (cpu names the CPU profile)")
	f.BoolVar(&asJSON, "json", false, "print report.json on stdout")
	return cmd
}

func quickSummary() string {
	q := experiment.Quick()
	return fmt.Sprintf("--train %d --held-out %d --steps %d --batch %d --seq-len %d --eval-max %d --max-tokens %d --shots %d",
		q.Train, q.HeldOut, q.Steps, q.Batch, q.SeqLen, q.EvalMax, q.MaxTokens, q.Shots)
}
