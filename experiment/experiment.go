// Package experiment runs the three-arm specialization experiment on a real model and the
// Debian package task (package domain/debian): (0) the base model with a few-shot prompt,
// untrained; (1) the base vocabulary fine-tuned on the task; (2) the vocabulary specialized
// (prune + merged tokens) and then adapted with the same data, optimizer, steps and
// trainable tensors as arm 1. Each arm answers the same held-out records, greedy, under the
// task's JSON schema, measured by tokenwise; the report (Markdown, SVG, JSON) gives per arm
// the field-exact accuracy, valid-JSON rate, output tokens, decode steps, prefill and decode
// time, LM-head rows and the cost model's price per million requests on this CPU and on the
// shipped GPU profiles, with arm 2's saving split into fewer decode steps, a shorter prompt
// and the smaller head.
//
// The steps run the tokenwise commands themselves (corpus, export, adapt, specialize) through
// Options.Exec, each writing into the work folder; a rerun skips the steps that finished with
// the same options, continues an evaluation where it stopped, and redoes a step (and those
// after it) whose options changed.
package experiment

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tokenwise/tokenwise/tokenizer"
	"github.com/tokenwise/tokenwise/train"
)

// Exec runs one tokenwise command line (the arguments after "tokenwise"), writing its
// output to stdout and its log to stderr.
type Exec func(ctx context.Context, stdout, stderr io.Writer, args ...string) error

// Options configure a run. Sizes are knobs: Default is the real experiment, Quick a run
// that goes end to end in minutes.
type Options struct {
	Model string `json:"model"` // a .gguf file (exported to an HF folder) or an HF folder
	// Train and HeldOut are how many records of each split are used: the first ones, in
	// the corpus's seeded order, whose prompt and answer fit SeqLen base tokens. Validation
	// (specialize's --validation, adapt's --eval) gets at most HeldOut too.
	Train   int    `json:"train"`
	HeldOut int    `json:"held_out"`
	Seed    uint64 `json:"seed"` // the split's seed and the trainer's
	Apt     bool   `json:"apt"`  // also the apt lists' records (corpus --apt)
	DType   string `json:"dtype"`
	// Training, the same for arms 1 and 2.
	Steps int `json:"steps"`
	// Arm2Steps, when set, trains arm 2 for that many steps instead of Steps: arm 2's
	// sequences are shorter, so the same steps show it fewer tokens than arm 1.
	Arm2Steps int     `json:"arm2_steps,omitempty"`
	Batch     int     `json:"batch"`
	SeqLen    int     `json:"seq_len"`
	LR        float64 `json:"lr"`
	Trainable string  `json:"trainable"`
	EvalMax   int     `json:"eval_max"` // validation records in adapt's loss before and after
	// AdaptWith, when set, is the command that trains arms 1 and 2 in place of `tokenwise
	// adapt` (split on spaces; adapt's flags follow it), e.g. "python3 recipes/adapt.py",
	// the same recipe on GPUs.
	AdaptWith string `json:"adapt_with,omitempty"`
	// Specialization (arm 2).
	Add  int    `json:"add"`
	Init string `json:"init"`
	// Evaluation.
	Shots     int  `json:"shots"` // arm 0's few-shot examples
	MaxTokens int  `json:"max_tokens"`
	Schema    bool `json:"schema"` // generate under answer.schema.json
	Threads   int  `json:"threads"`
	// EvalWorkers answer that many held-out records at once in the evaluations (the
	// timing pass runs one at a time): the answers are the same, only sooner.
	EvalWorkers int `json:"-"`
	// TimeRecords is how many held-out records (the first ones) the timing pass runs
	// through the three arms; 0: all of them.
	TimeRecords int `json:"time_records,omitempty"`
	// Report: the CPU cost profile ("auto": the shipped profile for this CPU, else a quick
	// calibration), the GPU profiles (default: every shipped one) and prices per device
	// hour by profile name ("cpu" for the CPU profile), for dollars per million requests.
	Profile string             `json:"-"`
	GPUs    []string           `json:"-"`
	Prices  map[string]float64 `json:"-"`

	Work string `json:"-"`
	Exec Exec   `json:"-"`
	// Log gets the progress display (a TTY gets bars, anything else lines).
	Log io.Writer `json:"-"`
	TTY bool      `json:"-"`
}

// Default is the real experiment: a few thousand training records, a few hundred held out.
func Default() Options {
	return Options{Train: 3000, HeldOut: 200, Seed: 1, Apt: true, DType: "bf16",
		Steps: 300, Batch: 8, SeqLen: 512, LR: 3e-4, Trainable: "embed,head,first,last", EvalMax: 64,
		Add: 256, Init: "mean", Shots: 2, MaxTokens: 256, Schema: true, Threads: 2, Profile: "auto"}
}

// Quick is Default cut to run end to end in minutes (on today's trainer the two adapt
// runs dominate): a tiny experiment, useful to check the pipeline, not to conclude.
func Quick() Options {
	o := Default()
	o.Train, o.HeldOut, o.Steps, o.Batch, o.SeqLen, o.EvalMax, o.MaxTokens, o.Shots = 200, 8, 2, 1, 384, 2, 160, 1
	return o
}

func (o *Options) validate() error {
	switch {
	case o.Model == "":
		return errors.New("experiment: the model is required")
	case o.Work == "":
		return errors.New("experiment: the work folder is required")
	case o.Exec == nil:
		return errors.New("experiment: no Exec")
	case o.Train < 1 || o.HeldOut < 1:
		return fmt.Errorf("experiment: --train %d, --held-out %d: want at least 1 each", o.Train, o.HeldOut)
	case o.Steps < 1 || o.Arm2Steps < 0 || o.Batch < 1 || o.SeqLen < 16:
		return fmt.Errorf("experiment: --steps %d, --arm2-steps %d, --batch %d, --seq-len %d: want steps and batch >= 1, arm2-steps >= 0, seq-len >= 16", o.Steps, o.Arm2Steps, o.Batch, o.SeqLen)
	case o.Add < 0 || o.Shots < 0 || o.MaxTokens < 1:
		return fmt.Errorf("experiment: --add %d, --shots %d, --max-tokens %d: want add and shots >= 0, max-tokens >= 1", o.Add, o.Shots, o.MaxTokens)
	case o.DType != "bf16" && o.DType != "f32":
		return fmt.Errorf("experiment: --dtype %q: bf16 or f32", o.DType)
	}
	if _, err := os.Stat(o.Model); err != nil {
		return fmt.Errorf("experiment: model: %w", err)
	}
	return nil
}

// step is one resumable unit: it writes into the work folder and, once done, a marker
// holding its fingerprint (its arguments and those of the steps it reads).
type step struct {
	name, title string
	deps        []string
	key         []string // what the step's output depends on besides its deps
	outputs     []string // paths (relative to the work folder) removed before a fresh start
	resumable   bool     // a started step continues instead of starting over
	always      bool     // run every time (the report: cheap, and reads the profiles)
	run         func(ctx context.Context, s *stepRun) error
}

// stepRun is what a running step gets.
type stepRun struct {
	x   *runner
	log io.Writer // the step's log file
	// progress reports done of total units (adapt steps, prompts).
	progress func(done, total int)
}

type runner struct {
	o    Options
	work string
	fps  map[string]string
	disp *display
}

// Result is where a run wrote its report.
type Result struct {
	Markdown, SVG, JSON string
	Report              *Report
	Skipped             []string // steps skipped as already done
}

// Run runs (or resumes) the experiment in o.Work.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := os.MkdirAll(filepath.Join(o.Work, "steps"), 0o755); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(o.Work, "logs"), 0o755); err != nil {
		return nil, err
	}
	x := &runner{o: o, work: o.Work, fps: map[string]string{}}
	steps := x.steps()
	x.disp = &display{w: o.Log, tty: o.TTY, total: len(steps)}
	res := &Result{}
	for i, st := range steps {
		fp := x.fingerprint(st)
		x.fps[st.name] = fp
		donePath := filepath.Join(o.Work, "steps", st.name+".done")
		startPath := filepath.Join(o.Work, "steps", st.name+".started")
		if !st.always {
			if old, err := os.ReadFile(donePath); err == nil {
				if string(old) == fp {
					x.disp.skip(i+1, st.title)
					res.Skipped = append(res.Skipped, st.name)
					continue
				}
				x.disp.note(i+1, st.title, "options changed since it ran: redoing it")
			}
		}
		_ = os.Remove(donePath)
		if started, err := os.ReadFile(startPath); err != nil || string(started) != fp || !st.resumable {
			for _, p := range st.outputs {
				if err := os.RemoveAll(filepath.Join(o.Work, p)); err != nil {
					return nil, err
				}
			}
		}
		if err := os.WriteFile(startPath, []byte(fp), 0o644); err != nil {
			return nil, err
		}
		logPath := filepath.Join(o.Work, "logs", fmt.Sprintf("%02d-%s.log", i+1, st.name))
		lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(lf, "== %s (%s)\n", st.title, time.Now().UTC().Format(time.RFC3339))
		x.disp.start(i+1, st.title)
		begin := time.Now()
		err = st.run(ctx, &stepRun{x: x, log: lf, progress: x.disp.progress})
		lf.Close()
		if err != nil {
			x.disp.fail(err)
			return nil, fmt.Errorf("step %d/%d %s: %w (log: %s)", i+1, len(steps), st.title, err, logPath)
		}
		x.disp.finish(time.Since(begin))
		if err := os.WriteFile(donePath, []byte(fp), 0o644); err != nil {
			return nil, err
		}
		_ = os.Remove(startPath)
	}
	rep, err := readReport(filepath.Join(o.Work, "report.json"))
	if err != nil {
		return nil, err
	}
	res.Report = rep
	res.Markdown, res.SVG, res.JSON = filepath.Join(o.Work, "report.md"), filepath.Join(o.Work, "report.svg"), filepath.Join(o.Work, "report.json")
	return res, nil
}

// fingerprint is a step's arguments and its deps' fingerprints, hashed.
func (x *runner) fingerprint(st step) string {
	h := sha256.New()
	for _, k := range st.key {
		fmt.Fprintf(h, "%s\x00", k)
	}
	for _, d := range st.deps {
		fmt.Fprintf(h, "dep %s %s\x00", d, x.fps[d])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (x *runner) path(p ...string) string { return filepath.Join(append([]string{x.work}, p...)...) }

// armSteps is an arm's optimizer steps: Steps, or Arm2Steps for arm 2 where set.
func (o *Options) armSteps(arm int) int {
	if arm == 2 && o.Arm2Steps > 0 {
		return o.Arm2Steps
	}
	return o.Steps
}

// trainArgs are the adapt flags an arm trains with: the same for both, but for arm 2's
// steps under Arm2Steps.
func (x *runner) trainArgs(arm int) []string {
	o := x.o
	return []string{"--corpus", x.path("data", "train.jsonl"), "--eval", x.path("data", "validation.jsonl"),
		"--eval-max", strconv.Itoa(o.EvalMax), "--steps", strconv.Itoa(o.armSteps(arm)), "--batch", strconv.Itoa(o.Batch),
		"--seq-len", strconv.Itoa(o.SeqLen), "--lr", strconv.FormatFloat(o.LR, 'g', -1, 64), "--trainable", o.Trainable,
		"--seed", strconv.FormatUint(o.Seed, 10), "--threads", strconv.Itoa(o.Threads), "--dtype", o.DType}
}

// trainKey is what an arm's training depends on: its flags and the command that trains.
func (x *runner) trainKey(arm int) []string {
	if x.o.AdaptWith == "" {
		return x.trainArgs(arm)
	}
	return append([]string{"adapt-with " + x.o.AdaptWith}, x.trainArgs(arm)...)
}

func (x *runner) steps() []step {
	o := x.o
	modelKey := o.Model
	if st, err := os.Stat(o.Model); err == nil {
		modelKey = fmt.Sprintf("%s %d %d", o.Model, st.Size(), st.ModTime().UnixNano())
	}
	specArgs := []string{"--prune", "--add", strconv.Itoa(o.Add), "--init", o.Init}
	// Greedy answers do not depend on the thread count (TestExperimentEndToEnd answers on
	// one thread and checks them on two), so --threads is not part of an evaluation's key.
	evalKey := []string{strconv.Itoa(o.MaxTokens), strconv.FormatBool(o.Schema)}
	timeKey := append([]string{strconv.Itoa(o.Threads), strconv.Itoa(o.TimeRecords)}, evalKey...)
	return []step{
		{name: "export", title: "export the base model to an HF folder", key: []string{modelKey, o.DType}, outputs: []string{"base"},
			run: x.export},
		{name: "corpus", title: "build the Debian task (train / validation / held-out)", deps: []string{"export"},
			key:     []string{strconv.Itoa(o.Train), strconv.Itoa(o.HeldOut), strconv.FormatUint(o.Seed, 10), strconv.FormatBool(o.Apt), strconv.Itoa(o.SeqLen), strconv.Itoa(o.Shots)},
			outputs: []string{"data"}, run: x.corpus},
		{name: "eval-arm0", title: "arm 0: evaluate the base model, few-shot", deps: []string{"corpus"}, key: evalKey,
			outputs: []string{"eval/arm0.jsonl"}, resumable: true, run: func(ctx context.Context, s *stepRun) error { return x.eval(ctx, s, 0) }},
		{name: "train-arm1", title: "arm 1: fine-tune the base vocabulary (adapt)", deps: []string{"corpus"}, key: x.trainKey(1),
			outputs: []string{"arm1", "arm1.tmp"}, resumable: true, run: func(ctx context.Context, s *stepRun) error { return x.adapt(ctx, s, "base", "arm1", 1) }},
		{name: "eval-arm1", title: "arm 1: evaluate", deps: []string{"train-arm1"}, key: evalKey,
			outputs: []string{"eval/arm1.jsonl"}, resumable: true, run: func(ctx context.Context, s *stepRun) error { return x.eval(ctx, s, 1) }},
		{name: "specialize", title: "arm 2: specialize the vocabulary (prune + merged tokens)", deps: []string{"corpus"}, key: specArgs,
			outputs: []string{"spec"}, run: func(ctx context.Context, s *stepRun) error { return x.specialize(ctx, s, specArgs) }},
		{name: "train-arm2", title: "arm 2: adapt the specialized model", deps: []string{"specialize"}, key: x.trainKey(2),
			outputs: []string{"arm2", "arm2.tmp"}, resumable: true, run: func(ctx context.Context, s *stepRun) error { return x.adapt(ctx, s, "spec", "arm2", 2) }},
		{name: "eval-arm2", title: "arm 2: evaluate", deps: []string{"train-arm2"}, key: evalKey,
			outputs: []string{"eval/arm2.jsonl"}, resumable: true, run: func(ctx context.Context, s *stepRun) error { return x.eval(ctx, s, 2) }},
		{name: "time", title: "time the three arms in turn on each held-out record", deps: []string{"eval-arm0", "eval-arm1", "eval-arm2"}, key: timeKey,
			outputs: []string{"eval/timing.jsonl"}, run: x.timeArms},
		{name: "report", title: "write the report", deps: []string{"time"}, always: true,
			run: x.report},
	}
}

// export writes the base model as an HF folder: a GGUF through `tokenwise export`, a folder
// copied as it is.
func (x *runner) export(ctx context.Context, s *stepRun) error {
	tmp := x.path("base.tmp")
	_ = os.RemoveAll(tmp)
	if st, err := os.Stat(x.o.Model); err == nil && st.IsDir() {
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		for _, name := range []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} {
			data, err := os.ReadFile(filepath.Join(x.o.Model, name))
			if os.IsNotExist(err) && name != "config.json" && name != "model.safetensors" && name != "tokenizer.json" {
				continue
			}
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
				return err
			}
		}
		fmt.Fprintf(s.log, "copied %s (an HF folder, kept at its own dtype)\n", x.o.Model)
	} else if err := x.exec(ctx, s, nil, "export", "--model", x.o.Model, "--format", "hf", "--dtype", x.o.DType, "--out", tmp); err != nil {
		return err
	}
	return os.Rename(tmp, x.path("base"))
}

// exec runs a tokenwise command, its output into the step's log (and stdout into out too).
func (x *runner) exec(ctx context.Context, s *stepRun, out io.Writer, args ...string) error {
	fmt.Fprintf(s.log, "$ tokenwise %s\n", quoteArgs(args))
	stdout, stderr := s.streams(out)
	err := x.o.Exec(ctx, stdout, stderr, args...)
	stderr.flush()
	return err
}

// execExternal runs Options.AdaptWith with adapt's flags (args[0], "adapt", replaced by the
// command), its output going where exec's goes.
func (x *runner) execExternal(ctx context.Context, s *stepRun, out io.Writer, args ...string) error {
	cmdline := append(strings.Fields(x.o.AdaptWith), args[1:]...)
	fmt.Fprintf(s.log, "$ %s\n", quoteArgs(cmdline))
	stdout, stderr := s.streams(out)
	cmd := exec.CommandContext(ctx, cmdline[0], cmdline[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err := cmd.Run()
	stderr.flush()
	if err != nil {
		return fmt.Errorf("--adapt-with %q: %w", x.o.AdaptWith, err)
	}
	return nil
}

// streams are a command's stdout (the step's log, and out too) and stderr (the log, its
// "step i/n" lines moving the progress display).
func (s *stepRun) streams(out io.Writer) (io.Writer, *lineWatcher) {
	stdout := io.Writer(s.log)
	if out != nil {
		stdout = io.MultiWriter(s.log, out)
	}
	return stdout, &lineWatcher{w: s.log, on: func(line string) {
		if m := trainStep.FindStringSubmatch(line); m != nil {
			done, _ := strconv.Atoi(m[1])
			total, _ := strconv.Atoi(m[2])
			s.progress(done, total)
		}
	}}
}

var trainStep = regexp.MustCompile(`^step (\d+)/(\d+) `)

// corpus writes the three splits with `tokenwise corpus --task debian`, then keeps the
// first Train (HeldOut) records of each whose ChatML prompt, answer and end of turn fit
// SeqLen tokens of the base vocabulary, so that neither arm trains on a cut answer and both
// train on the same records.
func (x *runner) corpus(ctx context.Context, s *stepRun) error {
	o := x.o
	raw := x.path("data", "all")
	args := []string{"corpus", "--task", "debian", "--out", raw, "--train", "1000000", "--held-out", "1000000", "--seed", strconv.FormatUint(o.Seed, 10)}
	if o.Apt {
		args = append(args, "--apt")
	}
	if err := x.exec(ctx, s, nil, args...); err != nil {
		return err
	}
	tok, err := tokenizer.Load(x.path("base"))
	if err != nil {
		return err
	}
	stats := corpusStats{}
	for _, sp := range []struct {
		name string
		n    int
		dst  *splitStats
	}{{"train", o.Train, &stats.Train}, {"validation", o.HeldOut, &stats.Validation}, {"held-out", o.HeldOut, &stats.HeldOut}} {
		all, err := readJSONL(filepath.Join(raw, sp.name+".jsonl"))
		if err != nil {
			return err
		}
		var kept []Example
		for _, ex := range all {
			if len(kept) == sp.n {
				break
			}
			sp.dst.Seen++
			n := len(tok.Encode(train.ChatPrompt(ex.Prompt), false)) + len(tok.Encode(ex.Completion+train.EndOfTurn, false))
			if n <= o.SeqLen {
				kept = append(kept, ex)
			}
		}
		sp.dst.Available, sp.dst.Kept = len(all), len(kept)
		if len(kept) == 0 {
			return fmt.Errorf("%s: none of %d records fits --seq-len %d", sp.name, len(all), o.SeqLen)
		}
		if err := writeJSONL(x.path("data", sp.name+".jsonl"), kept); err != nil {
			return err
		}
		fmt.Fprintf(s.log, "%s: %d records kept of the first %d (%d in the split); the rest do not fit --seq-len %d\n", sp.name, len(kept), sp.dst.Seen, len(all), o.SeqLen)
	}
	trainSet, err := readJSONL(x.path("data", "train.jsonl"))
	if err != nil {
		return err
	}
	if err := writeJSONL(x.path("data", "shots.jsonl"), pickShots(trainSet, o.Shots)); err != nil {
		return err
	}
	if err := os.RemoveAll(raw); err != nil {
		return err
	}
	return writeJSON(x.path("data", "stats.json"), stats)
}

type splitStats struct {
	Available int `json:"available"` // records of the split on this machine
	Seen      int `json:"seen"`      // read before Kept were found
	Kept      int `json:"kept"`
}

type corpusStats struct {
	Train      splitStats `json:"train"`
	Validation splitStats `json:"validation"`
	HeldOut    splitStats `json:"held_out"`
}

// pickShots chooses arm 0's examples among the first 100 training records: the shortest
// with a dependency list and a homepage (every field of the answer filled), then the
// shortest others.
func pickShots(train []Example, n int) []Example {
	cand := train[:min(100, len(train))]
	full := func(e Example) bool {
		return !strings.Contains(e.Completion, `"depends": []`) && !strings.Contains(e.Completion, `"homepage": null`)
	}
	idx := make([]int, len(cand))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool {
		ea, eb := cand[idx[a]], cand[idx[b]]
		if full(ea) != full(eb) {
			return full(ea)
		}
		return len(ea.Prompt)+len(ea.Completion) < len(eb.Prompt)+len(eb.Completion)
	})
	var out []Example
	for _, i := range idx[:min(n, len(idx))] {
		out = append(out, cand[i])
	}
	return out
}

// adapt trains one arm: `tokenwise adapt` from the folder from, with the shared flags, into
// to.tmp, renamed to to when it finishes. adapt writes a checkpoint and its trainer state
// (weights, AdamW moments, step) every tenth of the run; a step that was cut (the process
// killed, the machine gone) finds that state in to.tmp on the rerun and continues with
// --resume, which gives the bits an unbroken run gives (train.TestResume). Run removes
// to.tmp when the step's options changed, so a resumed state is always this step's.
func (x *runner) adapt(ctx context.Context, s *stepRun, from, to string, arm int) error {
	tmp := x.path(to + ".tmp")
	state := filepath.Join(tmp, trainerState)
	var out bytes.Buffer
	args := append([]string{"adapt", "--model", x.path(from)}, x.trainArgs(arm)...)
	args = append(args, "--out", tmp, "--checkpoint-every", strconv.Itoa(max(1, x.o.armSteps(arm)/10)))
	if _, err := os.Stat(state); err == nil {
		fmt.Fprintf(s.log, "continuing from the trainer state in %s\n", state)
		args = append(args, "--resume")
	} else if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	run := x.exec
	if x.o.AdaptWith != "" {
		run = x.execExternal
	}
	if err := run(ctx, s, &out, args...); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "adapt.txt"), out.Bytes(), 0o644); err != nil {
		return err
	}
	// The state (as large as the trainable weights three times over) has done its job.
	if err := os.Remove(state); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.RemoveAll(x.path(to)); err != nil {
		return err
	}
	return os.Rename(tmp, x.path(to))
}

// trainerState is the file adapt keeps its resumable state in, inside --out (the CLI's
// trainerStateFile).
const trainerState = "trainer-state.bin"

// specialize writes arm 2's starting point with `tokenwise specialize`.
func (x *runner) specialize(ctx context.Context, s *stepRun, specArgs []string) error {
	tmp := x.path("spec.tmp")
	_ = os.RemoveAll(tmp)
	args := append([]string{"specialize", "--model", x.path("base"), "--corpus", x.path("data", "train.jsonl"),
		"--validation", x.path("data", "validation.jsonl"), "--held-out", x.path("data", "held-out.jsonl")}, specArgs...)
	args = append(args, "--out", tmp)
	if err := x.exec(ctx, s, nil, args...); err != nil {
		return err
	}
	return os.Rename(tmp, x.path("spec"))
}

// timeArms is the interleaved timing pass (timeArms in eval.go) whose times the report uses.
func (x *runner) timeArms(ctx context.Context, s *stepRun) error {
	held, err := readJSONL(x.path("data", "held-out.jsonl"))
	if err != nil {
		return err
	}
	shots, err := readJSONL(x.path("data", "shots.jsonl"))
	if err != nil {
		return err
	}
	dirs := make([]string, len(armDirs))
	prefixes := make([]string, len(armDirs))
	want := make([][]Record, len(armDirs))
	for i, d := range armDirs {
		dirs[i] = x.path(d)
		if want[i], err = readRecords(x.path("eval", fmt.Sprintf("arm%d.jsonl", i))); err != nil {
			return err
		}
	}
	prefixes[0] = FewShotPrefix(shots)
	if n := x.o.TimeRecords; n > 0 && n < len(held) {
		held = held[:n]
		for i := range want {
			want[i] = want[i][:min(n, len(want[i]))]
		}
	}
	path := x.path("eval", "timing.jsonl")
	fmt.Fprintf(s.log, "time %d held-out records through the %d arms in turn -> %s\n", len(held), len(dirs), path)
	_, err = timeArms(ctx, dirs, prefixes, path, held, want, evalOptions{MaxTokens: x.o.MaxTokens, Threads: x.o.Threads, Schema: x.o.Schema}, s.progress)
	return err
}

// armDirs are the folders each arm is evaluated in.
var armDirs = []string{"base", "arm1", "arm2"}

// eval runs the held-out split through one arm.
func (x *runner) eval(ctx context.Context, s *stepRun, arm int) error {
	held, err := readJSONL(x.path("data", "held-out.jsonl"))
	if err != nil {
		return err
	}
	var prefix string
	if arm == 0 {
		shots, err := readJSONL(x.path("data", "shots.jsonl"))
		if err != nil {
			return err
		}
		prefix = FewShotPrefix(shots)
	}
	if err := os.MkdirAll(x.path("eval"), 0o755); err != nil {
		return err
	}
	path := x.path("eval", fmt.Sprintf("arm%d.jsonl", arm))
	fmt.Fprintf(s.log, "evaluate %s on %d held-out records (greedy, at most %d tokens, schema %v) -> %s\n", x.path(armDirs[arm]), len(held), x.o.MaxTokens, x.o.Schema, path)
	recs, err := evaluate(ctx, x.path(armDirs[arm]), path, held, evalOptions{Prefix: prefix, MaxTokens: x.o.MaxTokens, Threads: x.o.Threads, Workers: x.o.EvalWorkers, Schema: x.o.Schema}, s.progress)
	if err != nil {
		return err
	}
	exact := 0
	for _, r := range recs {
		if r.Exact() {
			exact++
		}
	}
	fmt.Fprintf(s.log, "%d records, %d exact\n", len(recs), exact)
	return nil
}

func writeJSONL(path string, xs []Example) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, x := range xs {
		if err := enc.Encode(x); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func writeJSON(path string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func quoteArgs(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		if a == "" || strings.ContainsAny(a, " \t\"'$\\|&;<>()*?") {
			b.WriteString(strconv.Quote(a))
		} else {
			b.WriteString(a)
		}
	}
	return b.String()
}

// lineWatcher passes writes through and calls on for each complete line.
type lineWatcher struct {
	w   io.Writer
	on  func(string)
	buf []byte
}

func (l *lineWatcher) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.on(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	return n, err
}

func (l *lineWatcher) flush() {
	if len(l.buf) > 0 {
		l.on(string(l.buf))
		l.buf = nil
	}
}
