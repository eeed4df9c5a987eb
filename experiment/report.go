package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tokenwise/tokenwise/cost"
	"github.com/tokenwise/tokenwise/model"
)

// Report is what report.json holds (report.md and report.svg render it).
type Report struct {
	Model   string      `json:"model"`
	CPU     string      `json:"cpu"`
	Options Options     `json:"options"`
	Corpus  corpusStats `json:"corpus"`
	Arms    []Arm       `json:"arms"`
	Spec    *SpecInfo   `json:"specialization,omitempty"`
	// InterleavedTimes says the arms' prefill and decode times are the interleaved pass's
	// (eval/timing.jsonl), not their evaluations'.
	InterleavedTimes bool `json:"interleaved_times"`
	// TimedRecords is how many held-out records that pass ran (the first ones; all of them
	// unless --time-records said fewer).
	TimedRecords int `json:"timed_records,omitempty"`
	// CPUProfile is the cost model's profile of this CPU, and CPUProfileWhy how it was chosen.
	CPUProfile    string `json:"cpu_profile"`
	CPUProfileWhy string `json:"cpu_profile_why"`
	// Savings split arm 2's cost against arm 1's, per profile.
	Savings []Saving `json:"savings"`
	Goals   []Goal   `json:"goals"`
	// Accuracy is the report's accuracy and token table (Markdown): it holds no timing, so
	// two runs with the same options and seed give the same text.
	Accuracy string `json:"accuracy_table"`
	Written  string `json:"written"`
}

// Arm is one arm's measurements over the held-out records.
type Arm struct {
	Arm     int    `json:"arm"`
	Name    string `json:"name"`
	Dir     string `json:"dir"`
	Prompts int    `json:"prompts"`
	// FieldAcc[i] is the share of records whose Fields[i] is right; Exact the share with
	// all of them right (with its 95% Wilson interval), FieldMean their mean.
	FieldAcc  []float64  `json:"field_acc"`
	Exact     float64    `json:"exact"`
	ExactCI   [2]float64 `json:"exact_ci95"`
	FieldMean float64    `json:"field_mean"`
	ValidJSON float64    `json:"valid_json"`
	CutShort  int        `json:"cut_by_max_tokens"`
	// Per request, averaged: tokens as tokenwise counted them, time as it measured it.
	PromptTokens float64 `json:"avg_prompt_tokens"`
	OutputTokens float64 `json:"avg_output_tokens"`
	DecodeSteps  float64 `json:"avg_decode_steps"`
	JumpedTokens float64 `json:"avg_jumped_tokens"`
	PrefillMs    float64 `json:"avg_prefill_ms"`
	DecodeMs     float64 `json:"avg_decode_ms"`
	LMHeadRows   int     `json:"lm_head_rows"`
	Params       int64   `json:"params"`
	// MeasuredHoursPerM is this CPU's hours per million requests at the measured
	// prefill + decode time, one request at a time.
	MeasuredHoursPerM float64     `json:"measured_cpu_hours_per_million"`
	Costs             []Cost      `json:"cost_model"`
	Train             *TrainStats `json:"train,omitempty"`
}

// Cost is the cost model's price of one arm's average request (batch 1) on one profile.
type Cost struct {
	Profile   string  `json:"profile"`
	Kind      string  `json:"kind"`
	Seconds   float64 `json:"seconds_per_request"`
	HoursPerM float64 `json:"device_hours_per_million"`
	// USDPerM is HoursPerM at Options.Prices (0 and Priced false when none was given).
	USDPerM float64 `json:"usd_per_million,omitempty"`
	Priced  bool    `json:"priced"`
}

// Saving is arm 2's cost-model saving against arm 1 on one profile, as fractions of arm
// 1's cost, split in this order: arm 1's model with arm 2's decode steps (Steps), then
// also its prompt length (Prompt), then arm 2's smaller vocabulary (Head).
type Saving struct {
	Profile string  `json:"profile"`
	Total   float64 `json:"total"`
	Steps   float64 `json:"fewer_steps"`
	Prompt  float64 `json:"shorter_prompt"`
	Head    float64 `json:"smaller_head"`
}

// Goal is one of the targets for arm 2 against arm 1.
type Goal struct {
	What     string  `json:"what"`
	Target   string  `json:"target"`
	Measured float64 `json:"measured"`
	Met      bool    `json:"met"`
	Note     string  `json:"note"`
}

// TrainStats are what `tokenwise adapt` printed.
type TrainStats struct {
	Steps      int     `json:"steps"`
	Seconds    float64 `json:"seconds"`
	TokensPerS float64 `json:"tokens_per_s"`
	FinalLoss  float64 `json:"final_train_loss"`
	EvalBefore float64 `json:"validation_loss_before"`
	EvalAfter  float64 `json:"validation_loss_after"`
}

// SpecInfo is the specialization's summary (spec/report.json).
type SpecInfo struct {
	VocabBefore   int    `json:"vocab_before"`
	VocabAfter    int    `json:"vocab_after"`
	Kept          int    `json:"kept_tokens"`
	NewMerges     int    `json:"new_merge_tokens"`
	NewAdded      int    `json:"new_added_tokens"`
	Init          string `json:"init"`
	HeldOutBefore struct {
		Input  int `json:"input"`
		Output int `json:"output"`
	} `json:"-"`
}

var armNames = []string{"0 base, few-shot", "1 base vocab, fine-tuned", "2 specialized + adapted"}

func readReport(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	return &r, json.Unmarshal(data, &r)
}

// report gathers the arms' records and writes report.json, report.md and report.svg.
func (x *runner) report(ctx context.Context, s *stepRun) error {
	o := x.o
	rep := &Report{Model: o.Model, CPU: cost.ThisCPU().String(), Options: o, Written: time.Now().UTC().Format(time.RFC3339)}
	if data, err := os.ReadFile(x.path("data", "stats.json")); err == nil {
		_ = json.Unmarshal(data, &rep.Corpus)
	}
	cpu, why, err := cpuProfile(o.Profile, o.Threads)
	if err != nil {
		return fmt.Errorf("cost profile: %w", err)
	}
	rep.CPUProfile, rep.CPUProfileWhy = cpu.Name, why
	profiles := []*cost.Profile{cpu}
	gpus := o.GPUs
	if gpus == nil {
		for _, n := range cost.Profiles() {
			if p, err := cost.LoadProfile(n); err == nil && p.Kind == "gpu" {
				gpus = append(gpus, n)
			}
		}
	}
	for _, n := range gpus {
		p, err := cost.LoadProfile(n)
		if err != nil {
			return fmt.Errorf("GPU profile: %w", err)
		}
		profiles = append(profiles, p)
	}
	timings, err := readTimings(x.path("eval", "timing.jsonl"))
	if err != nil {
		return err
	}
	rep.InterleavedTimes = len(timings) > 0
	var cfgs []*model.Config
	for i, dir := range armDirs {
		recs, err := readRecords(x.path("eval", fmt.Sprintf("arm%d.jsonl", i)))
		if err != nil {
			return err
		}
		cfg, err := model.ReadConfig(x.path(dir))
		if err != nil {
			return err
		}
		cfgs = append(cfgs, cfg)
		a := summarize(recs)
		a.Arm, a.Name, a.Dir, a.LMHeadRows = i, armNames[i], x.path(dir), cfg.VocabSize
		a.Params = int64(cost.FromModelConfig(cfg).Params().Total)
		if rep.InterleavedTimes {
			// The interleaved pass's times, not the evaluation's (see timeArms).
			var n int
			a.PrefillMs, a.DecodeMs = 0, 0
			for _, t := range timings {
				if t.Arm == i {
					a.PrefillMs += t.PrefillMs
					a.DecodeMs += t.DecodeMs
					n++
				}
			}
			if n == 0 || n > len(recs) || (i > 0 && n != rep.TimedRecords) {
				return fmt.Errorf("eval/timing.jsonl: %d timings of arm %d for %d records", n, i, len(recs))
			}
			rep.TimedRecords = n
			a.PrefillMs /= float64(n)
			a.DecodeMs /= float64(n)
		}
		a.MeasuredHoursPerM = (a.PrefillMs + a.DecodeMs) / 1000 * 1e6 / 3600
		for _, p := range profiles {
			sec, err := x.costAt(cfg, p, a.PromptTokens+a.JumpedTokens, a.OutputTokens-a.JumpedTokens)
			if err != nil {
				return fmt.Errorf("cost model, arm %d on %s: %w", i, p.Name, err)
			}
			c := Cost{Profile: p.Name, Kind: p.Kind, Seconds: sec, HoursPerM: sec * 1e6 / 3600}
			if price, ok := x.price(p); ok {
				c.USDPerM, c.Priced = c.HoursPerM*price, true
			}
			a.Costs = append(a.Costs, c)
		}
		if i > 0 {
			a.Train = readTrainStats(x.path(dir, "adapt.txt"))
		}
		rep.Arms = append(rep.Arms, a)
	}
	if data, err := os.ReadFile(x.path("spec", "report.json")); err == nil {
		var si SpecInfo
		if json.Unmarshal(data, &si) == nil {
			rep.Spec = &si
		}
	}
	a1, a2 := rep.Arms[1], rep.Arms[2]
	for _, p := range profiles {
		c := func(cfg *model.Config, prompt, output float64) float64 {
			sec, _ := x.costAt(cfg, p, prompt, output)
			return sec
		}
		p1, o1 := a1.PromptTokens+a1.JumpedTokens, a1.OutputTokens-a1.JumpedTokens
		p2, o2 := a2.PromptTokens+a2.JumpedTokens, a2.OutputTokens-a2.JumpedTokens
		c11, cA, cB, c22 := c(cfgs[1], p1, o1), c(cfgs[1], p1, o2), c(cfgs[1], p2, o2), c(cfgs[2], p2, o2)
		if c11 > 0 {
			rep.Savings = append(rep.Savings, Saving{Profile: p.Name, Total: 1 - c22/c11, Steps: (c11 - cA) / c11, Prompt: (cA - cB) / c11, Head: (cB - c22) / c11})
		}
	}
	rep.Goals = goals(a1, a2)
	rep.Accuracy = accuracyTable(rep.Arms)
	if err := writeJSON(x.path("report.json"), rep); err != nil {
		return err
	}
	held, err := readJSONL(x.path("data", "held-out.jsonl"))
	if err != nil {
		return err
	}
	var texts [3][]Record
	for i := range texts {
		texts[i], _ = readRecords(x.path("eval", fmt.Sprintf("arm%d.jsonl", i)))
	}
	if err := os.WriteFile(x.path("report.md"), []byte(rep.markdown(held, texts)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(x.path("report.svg"), []byte(rep.svg()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(s.log, "wrote %s, %s, %s\n", x.path("report.md"), x.path("report.svg"), x.path("report.json"))
	return nil
}

// price is the price per device hour given for a profile ("cpu" names the CPU profile).
func (x *runner) price(p *cost.Profile) (float64, bool) {
	if v, ok := x.o.Prices[p.Name]; ok {
		return v, true
	}
	if p.Kind == "cpu" {
		v, ok := x.o.Prices["cpu"]
		return v, ok
	}
	return 0, false
}

// costAt is the cost model's seconds for one request of this shape at batch 1: weights at
// the experiment's dtype on the CPU (KV f32, as tokenwise keeps it), bf16 on a GPU. A token
// the grammar appended without a step is computed in the next step's pass, as a prompt
// token is, so the callers count it as prompt, not output.
func (x *runner) costAt(cfg *model.Config, p *cost.Profile, prompt, output float64) (float64, error) {
	dts, kvs := "bf16", "bf16"
	if p.Kind == "cpu" {
		dts, kvs = x.o.DType, "f32"
	}
	dt, err := cost.ParsePrecision(dts)
	if err != nil {
		return 0, err
	}
	kv, err := cost.ParsePrecision(kvs)
	if err != nil {
		return 0, err
	}
	e, err := cost.FromModelConfig(cfg).Estimate(p, cost.Workload{Prompt: max(1, int(math.Round(prompt))), Output: max(0, int(math.Round(output))),
		Batch: 1, DType: dt, KV: kv, Threads: max(1, x.o.Threads)})
	if err != nil {
		return 0, err
	}
	return e.Prefill.Seconds + e.Decode.Seconds, nil
}

// cpuProfile is the CPU profile the report prices on, and how it was chosen.
func cpuProfile(name string, threads int) (*cost.Profile, string, error) {
	if name != "" && name != "auto" {
		p, err := cost.LoadProfile(name)
		return p, "as asked (--profile)", err
	}
	match, why := cost.MatchProfile(cost.ThisCPU())
	if match != "" {
		p, err := cost.LoadProfile(match)
		return p, "shipped; " + why, err
	}
	p, err := cost.QuickCalibrate("this-machine", max(1, threads), 0)
	if err != nil {
		return nil, "", err
	}
	return p, "a quick calibration of this machine (read bandwidth and FMA peak), since " + why, nil
}

// summarize averages an arm's records.
func summarize(recs []Record) Arm {
	a := Arm{Prompts: len(recs), FieldAcc: make([]float64, len(Fields))}
	if len(recs) == 0 {
		return a
	}
	exact, valid := 0, 0
	for _, r := range recs {
		for i, ok := range r.Right {
			if ok && i < len(Fields) {
				a.FieldAcc[i]++
			}
		}
		if r.Exact() {
			exact++
		}
		if r.Valid {
			valid++
		}
		if r.Finish == "length" {
			a.CutShort++
		}
		a.PromptTokens += float64(r.PromptTokens)
		a.OutputTokens += float64(r.OutputTokens)
		a.DecodeSteps += float64(r.DecodeSteps)
		a.JumpedTokens += float64(r.JumpedTokens)
		a.PrefillMs += r.PrefillMs
		a.DecodeMs += r.DecodeMs
	}
	n := float64(len(recs))
	for i := range a.FieldAcc {
		a.FieldAcc[i] /= n
		a.FieldMean += a.FieldAcc[i] / float64(len(Fields))
	}
	a.Exact, a.ValidJSON, a.ExactCI = float64(exact)/n, float64(valid)/n, wilson(exact, len(recs))
	a.PromptTokens /= n
	a.OutputTokens /= n
	a.DecodeSteps /= n
	a.JumpedTokens /= n
	a.PrefillMs /= n
	a.DecodeMs /= n
	return a
}

var (
	adaptLine = regexp.MustCompile(`adapt: (\d+) steps in (\S+) \((\d+) tokens/s\), final train loss ([0-9.]+)`)
	lossLine  = regexp.MustCompile(`held-out loss: ([0-9.]+) -> ([0-9.]+)`)
)

// readTrainStats reads what adapt printed on stdout (nil if it is not there).
func readTrainStats(path string) *TrainStats {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	t := &TrainStats{}
	if m := adaptLine.FindStringSubmatch(string(data)); m != nil {
		t.Steps, _ = strconv.Atoi(m[1])
		if d, err := time.ParseDuration(m[2]); err == nil {
			t.Seconds = d.Seconds()
		}
		t.TokensPerS, _ = strconv.ParseFloat(m[3], 64)
		t.FinalLoss, _ = strconv.ParseFloat(m[4], 64)
	}
	if m := lossLine.FindStringSubmatch(string(data)); m != nil {
		t.EvalBefore, _ = strconv.ParseFloat(m[1], 64)
		t.EvalAfter, _ = strconv.ParseFloat(m[2], 64)
	}
	return t
}

// goals checks the three targets for arm 2 against arm 1.
func goals(a1, a2 Arm) []Goal {
	var out []Goal
	d := (a2.Exact - a1.Exact) * 100
	out = append(out, Goal{What: "field-exact accuracy (all fields), arm 2 − arm 1", Target: ">= -1 point", Measured: d, Met: d >= -1,
		Note: fmt.Sprintf("%.1f%% vs %.1f%% (%d records each)", a2.Exact*100, a1.Exact*100, a1.Prompts)})
	if a1.Exact == 0 && a2.Exact == 0 {
		// Equal at nothing right is no evidence of equal accuracy.
		out[0].Met, out[0].Note = false, out[0].Note+"; neither arm got a record right, so this says nothing"
	}
	if a1.OutputTokens > 0 {
		r := (1 - a2.OutputTokens/a1.OutputTokens) * 100
		out = append(out, Goal{What: "output tokens, fewer than arm 1", Target: ">= 40%", Measured: r, Met: r >= 40,
			Note: fmt.Sprintf("%.1f vs %.1f per request", a2.OutputTokens, a1.OutputTokens)})
	}
	if w1 := a1.PrefillMs + a1.DecodeMs; w1 > 0 {
		w2 := a2.PrefillMs + a2.DecodeMs
		r := (1 - w2/w1) * 100
		out = append(out, Goal{What: "measured wall-clock per request on this CPU (batch 1), lower than arm 1", Target: ">= 50%", Measured: r, Met: r >= 50,
			Note: fmt.Sprintf("%.0f vs %.0f ms", w2, w1)})
	}
	return out
}

// accuracyTable is the Markdown table of accuracy and token counts (no timings).
func accuracyTable(arms []Arm) string {
	var b strings.Builder
	b.WriteString("| arm | records | valid JSON | all fields exact | mean field |")
	for _, f := range Fields {
		b.WriteString(" " + f + " |")
	}
	b.WriteString(" prompt tokens | output tokens | decode steps | cut at max | LM-head rows |\n|---|---|---|---|---|")
	b.WriteString(strings.Repeat("---|", len(Fields)))
	b.WriteString("---|---|---|---|---|\n")
	for _, a := range arms {
		fmt.Fprintf(&b, "| %s | %d | %s | %s [%s, %s] | %s |", a.Name, a.Prompts, pct(a.ValidJSON), pct(a.Exact), pct(a.ExactCI[0]), pct(a.ExactCI[1]), pct(a.FieldMean))
		for _, v := range a.FieldAcc {
			b.WriteString(" " + pct(v) + " |")
		}
		fmt.Fprintf(&b, " %.1f | %.1f | %.1f | %d | %d |\n", a.PromptTokens, a.OutputTokens, a.DecodeSteps, a.CutShort, a.LMHeadRows)
	}
	return b.String()
}

func pct(v float64) string { return fmt.Sprintf("%.1f%%", v*100) }

// markdown renders the report.
func (r *Report) markdown(held []Example, recs [3][]Record) string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "# Specialization experiment: %s on the Debian package task\n\n", r.Model)
	fmt.Fprintf(&b, "Written %s on %s. Three arms answer the same %d held-out records (greedy, at most %d tokens, under answer.schema.json: %v).\n\n",
		r.Written, r.CPU, r.Arms[0].Prompts, o.MaxTokens, o.Schema)
	fmt.Fprintf(&b, "- Data: `tokenwise corpus --task debian` (seed %d, apt lists %v): train %d records (of the first %d; %d in the split), validation %d, held-out %d (of the first %d; %d in the split); kept: ChatML prompt + answer within %d base tokens.\n",
		o.Seed, o.Apt, r.Corpus.Train.Kept, r.Corpus.Train.Seen, r.Corpus.Train.Available, r.Corpus.Validation.Kept, r.Corpus.HeldOut.Kept, r.Corpus.HeldOut.Seen, r.Corpus.HeldOut.Available, o.SeqLen)
	fmt.Fprintf(&b, "- Arm 0: the base model (%s) with %d few-shot example(s) from train before each prompt, untrained.\n", o.DType, o.Shots)
	trainer := "`tokenwise adapt`"
	if o.AdaptWith != "" {
		trainer = "`" + o.AdaptWith + "`"
	}
	same, steps := "", fmt.Sprintf("%d steps", o.Steps)
	if o.armSteps(2) != o.Steps {
		same, steps = " but the steps", fmt.Sprintf("%d steps (arm 1), %d (arm 2, --arm2-steps)", o.Steps, o.Arm2Steps)
	}
	fmt.Fprintf(&b, "- Arms 1 and 2: %s with the same records, order and flags%s: %s × %d sequences, lr %g, trainable `%s`, seed %d.\n", trainer, same, steps, o.Batch, o.LR, o.Trainable, o.Seed)
	if r.Spec != nil {
		fmt.Fprintf(&b, "- Arm 2's vocabulary: `tokenwise specialize --prune --add %d --init %s`: %d -> %d ids (%d kept, %d new merges, %d added tokens).\n",
			o.Add, o.Init, r.Spec.VocabBefore, r.Spec.VocabAfter, r.Spec.Kept, r.Spec.NewMerges, r.Spec.NewAdded)
	}
	b.WriteString("\n## Accuracy and tokens\n\n")
	b.WriteString("Field-exact: a field counts when it equals the expected answer's exactly (the maintainer as its name and email; depends as the whole list). Tokens as tokenwise counted them; decode steps exclude tokens the grammar appended without a step.\n\n")
	b.WriteString(r.Accuracy)
	b.WriteString("\n## Measured per request on this CPU (batch 1)\n\n")
	if r.InterleavedTimes {
		b.WriteString("From a pass after the evaluations that ran each held-out record through the three arms in turn (the same answers), so that load from anything else on the machine falls on the arms alike; the evaluations' own times are in eval/armN.jsonl.")
		if n := len(r.Arms); n > 0 && r.TimedRecords < r.Arms[0].Prompts {
			fmt.Fprintf(&b, " The pass ran the first %d of the %d held-out records (--time-records).", r.TimedRecords, r.Arms[0].Prompts)
		}
		b.WriteString("\n\n")
	} else {
		b.WriteString("From the evaluations, which ran one arm after another: load from anything else on the machine can fall on one arm more than another.\n\n")
	}
	b.WriteString("| arm | prefill ms | decode ms | total ms | CPU hours per 1M requests |\n|---|---|---|---|---|\n")
	for _, a := range r.Arms {
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %.1f |\n", a.Name, a.PrefillMs, a.DecodeMs, a.PrefillMs+a.DecodeMs, a.MeasuredHoursPerM)
	}
	fmt.Fprintf(&b, "\n## Cost model per million requests (batch 1)\n\nCPU profile %s: %s. GPU profiles: datasheet peaks × efficiencies (docs/cost.md); weights bf16 on a GPU, %s on the CPU. Device hours per million requests", r.CPUProfile, r.CPUProfileWhy, o.DType)
	if len(o.Prices) > 0 {
		b.WriteString(" (and dollars at the prices given)")
	}
	b.WriteString(".\n\n| profile |")
	for _, a := range r.Arms {
		fmt.Fprintf(&b, " arm %d |", a.Arm)
	}
	b.WriteString(" arm 2 vs 1 | from fewer steps | from shorter prompt | from smaller head |\n|---|---|---|---|---|---|---|---|\n")
	for pi, s := range r.Savings {
		fmt.Fprintf(&b, "| %s |", s.Profile)
		for _, a := range r.Arms {
			c := a.Costs[pi]
			if c.Priced {
				fmt.Fprintf(&b, " %.3g h ($%.3g) |", c.HoursPerM, c.USDPerM)
			} else {
				fmt.Fprintf(&b, " %.3g h |", c.HoursPerM)
			}
		}
		fmt.Fprintf(&b, " %s | %s | %s | %s |\n", signed(-s.Total), signed(-s.Steps), signed(-s.Prompt), signed(-s.Head))
	}
	b.WriteString("\nThe split is sequential: arm 1's model at arm 2's decode steps, then also at arm 2's prompt length, then arm 2's vocabulary.\n")
	b.WriteString("\n## Goals (arm 2 against arm 1)\n\n| goal | target | measured | met | |\n|---|---|---|---|---|\n")
	for _, g := range r.Goals {
		met := "no"
		if g.Met {
			met = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %.1f | %s | %s |\n", g.What, g.Target, g.Measured, met, g.Note)
	}
	b.WriteString("\n## Training\n\n| arm | steps | seconds | tokens/s | final train loss | validation loss before -> after |\n|---|---|---|---|---|---|\n")
	for _, a := range r.Arms[1:] {
		if t := a.Train; t != nil {
			fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | %.4f | %.4f -> %.4f |\n", a.Name, t.Steps, t.Seconds, t.TokensPerS, t.FinalLoss, t.EvalBefore, t.EvalAfter)
		}
	}
	b.WriteString("\n## Samples\n\n")
	for i := range min(2, len(held)) {
		fmt.Fprintf(&b, "Held-out record %d, expected:\n\n```json\n%s\n```\n\n", i, held[i].Completion)
		for arm := range recs {
			if i < len(recs[arm]) {
				fmt.Fprintf(&b, "Arm %d (%d output tokens, %d decode steps):\n\n```\n%s\n```\n\n", arm, recs[arm][i].OutputTokens, recs[arm][i].DecodeSteps, recs[arm][i].Text)
			}
		}
	}
	b.WriteString("![chart](report.svg)\n")
	return b.String()
}

func signed(v float64) string { return fmt.Sprintf("%+.1f%%", v*100) }

// wilson is the 95% Wilson score interval of k successes in n trials.
func wilson(k, n int) [2]float64 {
	if n == 0 {
		return [2]float64{0, 1}
	}
	const z = 1.959964
	p, nf := float64(k)/float64(n), float64(n)
	c := (p + z*z/(2*nf)) / (1 + z*z/nf)
	h := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / (1 + z*z/nf)
	return [2]float64{max(0, c-h), min(1, c+h)}
}
