package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/domain/debian"
)

type corpusFlags struct {
	out            string
	train, heldOut int
	jsonOut        bool
	example, field string
	task           string
	seed           uint64
	apt            bool
}

func newCorpusCmd() *cobra.Command {
	var f corpusFlags
	cmd := &cobra.Command{
		Use:   "corpus --out DIR [--task essays|debian] [--train N] [--held-out N] [--json]",
		Short: "Write the seeded essay-grading domain corpus (train and held-out JSONL) for analyze and specialize",
		Long: `Corpus writes the domain the demo model was trained on: essay-grading requests and the
JSON verdicts a grader writes for them (package domain). Each line of the JSONL files is
{"prompt": ..., "completion": ...}:
  prompt      a fixed grading instruction (rubric and the eight keys), "Topic: ..." and a
              2-3 paragraph student essay
  completion  {"score": 1-5, "grammar", "coherence", "vocabulary": 1-5, "verdict": "pass"
              or "fail" (pass when score >= 3), "strengths", "weaknesses", "feedback"}
The essay shows whether it is weak (score 1-2: sentences without capitals, run-ons) or not,
so the verdict is computable from it; the score within each group is drawn at random, so no
grader can expect more than 40% score accuracy (domain.BestScoreAccuracy).

--out DIR gets train.jsonl (--train examples, seed 1: what the demo model and its
adaptation were trained on) and held-out.jsonl (--held-out examples, seed 2: what the demo
measures on); a split of 0 examples is not written. The same counts always give the same
files. These are the corpus files 'tokenwise analyze' and 'tokenwise specialize' read:
prompts count as the input side, completions as the output side.

--task debian writes a task with real variation instead (package domain/debian): each
prompt is an instruction and a Debian package record of this machine (/var/lib/dpkg/status,
plus every record of the apt lists with --apt, when they are filled), each completion the
record as fixed-schema JSON (name, version, section, priority, architecture, maintainer
{name, email}, depends, homepage, description; domain/debian/answer.schema.json). The records
are split by a --seed'ed hash of their source package into train (80%), validation (10%,
for specialize --validation) and held-out (10%), so no split holds a sibling package of
another's; --train and --held-out cap train and held-out (and validation) at their first N
by that hash. The data is made from what is installed, so it differs between machines.

Without --json it logs each file to stderr; --json prints
{"files": [{"split","seed","examples","path","bytes"}, ...]} on stdout.

--example SPLIT:N prints the prompt (or, with --field completion, the expected answer) of
example N (from 1) of that split on stdout, as it is in the file, and writes no files: a
prompt in the demo model's own format for 'tokenwise generate --prompt-file'.`,
		Example: `  tokenwise corpus --out essays/
  tokenwise corpus --example held-out:1 > essay.txt
  tokenwise generate --model demo/model --chat --prompt-file essay.txt
  tokenwise analyze --tokenizer MODEL --corpus essays/train.jsonl
  tokenwise specialize --model MODEL --corpus essays/train.jsonl --held-out essays/held-out.jsonl --prune --add 256 --out MODEL-essays/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCorpus(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "folder to write train.jsonl and held-out.jsonl into (created if needed)")
	fl.IntVar(&f.train, "train", 2000, "examples in train.jsonl (seed 1)")
	fl.IntVar(&f.heldOut, "held-out", 500, "examples in held-out.jsonl (seed 2)")
	fl.StringVar(&f.example, "example", "", "print one example's text instead of writing files: SPLIT:N, SPLIT train or held-out, N from 1")
	fl.StringVar(&f.field, "field", "prompt", "with --example: prompt or completion")
	fl.StringVar(&f.task, "task", "essays", "essays (the demo's seeded essay grading) or debian (this machine's package records as JSON)")
	fl.Uint64Var(&f.seed, "seed", 1, "with --task debian: the split's seed")
	fl.BoolVar(&f.apt, "apt", false, "with --task debian: also the apt lists' records (apt-cache dumpavail)")
	fl.BoolVar(&f.jsonOut, "json", false, `print {"files": [{"split","seed","examples","path","bytes"}]}`)
	return cmd
}

// corpusJSON is the --json output.
type corpusJSON struct {
	Files []domain.File `json:"files"`
}

func runCorpus(f corpusFlags, stdout, stderr io.Writer) error {
	if f.example != "" {
		return printExample(f, stdout)
	}
	if f.out == "" {
		return errors.New("corpus: --out is required")
	}
	if f.train < 0 || f.heldOut < 0 || f.train+f.heldOut == 0 {
		return fmt.Errorf("corpus: --train %d, --held-out %d: must not be negative, and not both 0", f.train, f.heldOut)
	}
	var files []domain.File
	var err error
	switch f.task {
	case "essays":
		files, err = domain.WriteSplits(f.out, domain.Splits(f.train, f.heldOut))
	case "debian":
		files, err = writeDebian(f)
	default:
		return fmt.Errorf("corpus: --task %q: essays or debian", f.task)
	}
	if err != nil {
		return fmt.Errorf("corpus: %w", err)
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(corpusJSON{Files: files})
	}
	for _, fi := range files {
		fmt.Fprintf(stderr, "wrote %s: %d %s examples (seed %d), %s\n", fi.Path, fi.N, fi.Name, fi.Seed, human(float64(fi.Bytes)))
	}
	return nil
}

// printExample writes one example's prompt or completion (--example SPLIT:N, --field).
func printExample(f corpusFlags, stdout io.Writer) error {
	name, num, ok := strings.Cut(f.example, ":")
	n, err := strconv.Atoi(num)
	if !ok || err != nil || n < 1 {
		return fmt.Errorf("corpus: --example %q: want SPLIT:N, such as held-out:1 (N from 1)", f.example)
	}
	var seed uint64
	switch name {
	case "train":
		seed = domain.TrainSeed
	case "held-out":
		seed = domain.HeldOutSeed
	default:
		return fmt.Errorf("corpus: --example %q: split %q is train or held-out", f.example, name)
	}
	ex := domain.Generate(seed, n)[n-1]
	switch f.field {
	case "prompt":
		_, err = io.WriteString(stdout, ex.Prompt)
	case "completion":
		_, err = io.WriteString(stdout, ex.Completion)
	default:
		return fmt.Errorf("corpus: --field %q: prompt or completion", f.field)
	}
	return err
}

// writeDebian writes the Debian package task's three splits.
func writeDebian(f corpusFlags) ([]domain.File, error) {
	recs, err := debian.System(f.apt)
	if err != nil {
		return nil, err
	}
	sp := debian.Splits(recs, f.seed)
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return nil, err
	}
	var files []domain.File
	for _, s := range []struct {
		name string
		max  int
	}{{debian.Train, f.train}, {debian.Validation, f.heldOut}, {debian.HeldOut, f.heldOut}} {
		xs := sp[s.name]
		if len(xs) > s.max {
			xs = xs[:s.max]
		}
		if len(xs) == 0 {
			continue
		}
		path := filepath.Join(f.out, s.name+".jsonl")
		var b bytes.Buffer
		if err := debian.WriteJSONL(&b, xs); err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return nil, err
		}
		files = append(files, domain.File{Split: domain.Split{Name: s.name, Seed: f.seed, N: len(xs)}, Path: path, Bytes: int64(b.Len())})
	}
	return files, nil
}
