package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tokenwise/tokenwise/cost"
	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/grammar"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/specialize"
	"github.com/tokenwise/tokenwise/tokenizer"
	"github.com/tokenwise/tokenwise/train"
)

// Seeds of the domain splits (`tokenwise corpus` writes the same): the base model and the
// adaptation were trained on TrainSeed; the demo measures on HeldOutSeed, which neither saw.
const (
	TrainSeed   = domain.TrainSeed
	HeldOutSeed = domain.HeldOutSeed
)

// SpecializeOptions is the specialization the demo runs and the committed adapted model was
// trained after (scripts/make-demo-model.sh): prune, then add at most 128 new tokens (added
// tokens across word boundaries, and merges inside words; Result.Specialization says how
// many of each).
//
// MinDocs 1 and no byte cap are the selection the committed adapted model was made with,
// before specialize's defaults became --min-docs 3 and --max-token-bytes 32: the demo model
// runs in tokenwise only, where long tokens travel fine, and retraining the adapted model
// takes make-demo-model.sh's full run.
var SpecializeOptions = specialize.RunOptions{Options: specialize.Options{Prune: true, Add: 128, MinDocs: 1, MaxTokenBytes: 1 << 20}, Init: "exp"}

// SpecializeCorpus is the domain text the specialization is fitted to: n training examples.
func SpecializeCorpus(n int) []specialize.Doc {
	var docs []specialize.Doc
	for _, ex := range domain.Generate(TrainSeed, n) {
		docs = append(docs, specialize.Doc{Text: ex.Prompt, Side: specialize.Input}, specialize.Doc{Text: ex.Completion, Side: specialize.Output})
	}
	return docs
}

// Options configure a demo run.
type Options struct {
	Prompts   int // held-out prompts evaluated through each model
	MaxTokens int // generation cap per prompt
	Threads   int // kernel threads
	// Profile is the cost profile (package cost): a shipped name or a file, or "" / "auto"
	// for the shipped CPU profile measured on a machine like this one, else a quick
	// calibration of this machine (Result.ProfileWhy says which, and why).
	Profile      string
	PricePerHour float64 // of the profile's device, for cost per request
	// CommandModel is the --model of the generate command the result prints (default: the
	// base folder Run was given).
	CommandModel string
	Log          io.Writer
}

// ModelResult is one model's measurements over the held-out prompts.
type ModelResult struct {
	Name         string  `json:"name"`
	Dir          string  `json:"dir"`
	VocabRows    int     `json:"lm_head_rows"`
	Params       int64   `json:"params"`
	Prompts      int     `json:"prompts"`
	PromptTokens float64 `json:"avg_prompt_tokens"`
	OutputTokens float64 `json:"avg_output_tokens"`
	DecodeSteps  float64 `json:"avg_decode_steps"`
	PrefillMs    float64 `json:"avg_prefill_ms"`
	DecodeMs     float64 `json:"avg_decode_ms"`
	ValidJSON    float64 `json:"valid_json"`    // fraction of completions that parse as the schema's object
	VerdictAcc   float64 `json:"verdict_acc"`   // fraction with the right verdict
	ScoreAcc     float64 `json:"score_acc"`     // fraction with the right score
	CostPerReq   float64 `json:"cost_per_req"`  // dollars, cost model at the average shape
	CostSeconds  float64 `json:"cost_seconds"`  // modelled seconds per request
	LMHeadShare  float64 `json:"lm_head_share"` // of modelled decode time
	// VerdictCI and ScoreCI are the 95% (Wilson) intervals of the two accuracies over
	// Prompts prompts.
	VerdictCI [2]float64 `json:"verdict_acc_ci95"`
	ScoreCI   [2]float64 `json:"score_acc_ci95"`
	Answers   []Answer   `json:"-"` // per prompt, in order
	// Schema is the same prompts with structured output: domain.Schema's grammar masks each
	// step and jump-forward appends the text it forces.
	Schema SchemaResult `json:"with_schema"`
}

// SchemaResult is a model's run under domain.Schema.
type SchemaResult struct {
	OutputTokens float64 `json:"avg_output_tokens"`
	DecodeSteps  float64 `json:"avg_decode_steps"`
	ForcedShare  float64 `json:"forced_share"` // of output tokens, forced by the grammar
	JumpedShare  float64 `json:"jumped_share"` // of output tokens, appended without a step
	WallMs       float64 `json:"avg_wall_ms"`  // prefill + decode per request
	PlainWallMs  float64 `json:"avg_plain_wall_ms"`
	ValidJSON    float64 `json:"valid_json"`
	VerdictAcc   float64 `json:"verdict_acc"`
	SameText     float64 `json:"same_text"`    // fraction of answers identical to the plain run's
	CostPerReq   float64 `json:"cost_per_req"` // the cost model at this shape
}

// Answer is one model's completion of one held-out prompt, scored.
type Answer struct {
	Text                  string
	Valid, Verdict, Score bool // parses as the schema; right verdict; right score
	Fields                int  // of the schema's 8 fields, how many equal the expected ones
	// Predicted is the score answered (0: not valid), Weak whether the essay is weak
	// (expected score 1-2).
	Predicted int
	Weak      bool
	// OtherTopic says the answer names a topic other than the essay's.
	OtherTopic bool
}

// Sample is one held-out prompt with its expected answer and each model's.
type Sample struct {
	Index    int    `json:"index"` // among the held-out prompts, from 0
	Prompt   string `json:"prompt"`
	Expected string `json:"expected"`
	Base     string `json:"base"`
	Adapted  string `json:"adapted"`
}

// Paired compares two models prompt by prompt: how many prompts only one of them got right,
// and the two-sided sign-test p-value of that split (1 when they never differ).
type Paired struct {
	BaseOnly    int     `json:"base_only"`
	AdaptedOnly int     `json:"adapted_only"`
	P           float64 `json:"p"`
}

// Result is a whole demo run.
type Result struct {
	Base, Adapted  ModelResult
	Specialization *specialize.Report
	Analysis       *specialize.Analysis
	Profile        string
	ProfileWhy     string // how the profile was chosen: asked for, matched to this CPU, or measured
	PricePerHour   float64
	AdaptedFrom    string // "committed artifact" or how it was made
	// SameSpecialization says the adapted model's tokenizer is the one this run's
	// specialization wrote.
	SameSpecialization bool
	OutputReduction    float64
	// Verdict and Score compare the two models' accuracies prompt by prompt.
	Verdict, Score Paired
	// ScoreCeiling is the score accuracy a perfect grader can expect (domain.BestScoreAccuracy).
	ScoreCeiling float64 `json:"score_acc_ceiling"`
	Samples      []Sample
	// Generate is a `tokenwise generate` command line (after "tokenwise") that puts
	// GenerateSample's prompt to the base model in its training format, and GenerateAnswer
	// what the base model answered it in this run (greedy, so the command prints the same).
	Generate       []string
	GenerateSample Sample
	GenerateAnswer string
	Elapsed        time.Duration
}

// Evaluate runs the held-out prompts through the model in dir with greedy decoding, scores
// the JSON verdicts and prices the average request on the cost profile p.
func Evaluate(ctx context.Context, name, dir string, exs []domain.Example, p *cost.Profile, o Options) (*ModelResult, error) {
	m, err := model.Load(dir, model.Options{Threads: o.Threads})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	r := &ModelResult{Name: name, Dir: dir, VocabRows: m.Config().VocabSize, Prompts: len(exs)}
	schema, err := engine.NewGrammars(tok, 1).Compile(grammar.Spec{JSONSchema: []byte(domain.Schema)}, grammar.Options{Whitespace: grammar.Spaced})
	if err != nil {
		return nil, fmt.Errorf("%s: domain schema: %w", name, err)
	}
	var promptToks, outToks, steps int
	var prefill, decode float64
	var sc struct {
		out, steps, forced, jumped, valid, verdict, same int
		wall                                             float64
	}
	for i, ex := range exs {
		ids := tok.Encode(train.ChatPrompt(ex.Prompt), false)
		res, err := engine.Generate(ctx, m, tok, ids, engine.Options{MaxTokens: o.MaxTokens})
		if err != nil {
			return nil, fmt.Errorf("%s: prompt %d: %w", name, i, err)
		}
		sres, err := engine.Generate(ctx, m, tok, ids, engine.Options{MaxTokens: o.MaxTokens, Grammar: schema})
		if err != nil {
			return nil, fmt.Errorf("%s: prompt %d with the schema: %w", name, i, err)
		}
		sc.out += sres.Usage.CompletionTokens
		sc.steps += sres.Timing.DecodeSteps
		sc.forced += sres.Timing.ForcedTokens
		sc.jumped += sres.Timing.JumpedTokens
		sc.wall += sres.Timing.PrefillMs + sres.Timing.DecodeMs
		sa := grade(sres.Text, ex)
		sc.valid += btoi(sa.Valid)
		sc.verdict += btoi(sa.Verdict)
		sc.same += btoi(sres.Text == res.Text)
		promptToks += len(ids)
		outToks += res.Usage.CompletionTokens
		steps += res.Timing.DecodeSteps
		prefill += res.Timing.PrefillMs
		decode += res.Timing.DecodeMs
		r.Answers = append(r.Answers, grade(res.Text, ex))
		if o.Log != nil && (i+1)%10 == 0 {
			fmt.Fprintf(o.Log, "  %s: %d/%d prompts\n", name, i+1, len(exs))
		}
	}
	n := float64(len(exs))
	r.PromptTokens, r.OutputTokens, r.DecodeSteps = float64(promptToks)/n, float64(outToks)/n, float64(steps)/n
	r.PrefillMs, r.DecodeMs = prefill/n, decode/n
	valid, verdict, score := r.counts()
	r.ValidJSON, r.VerdictAcc, r.ScoreAcc = float64(valid)/n, float64(verdict)/n, float64(score)/n
	r.VerdictCI, r.ScoreCI = wilson(verdict, len(exs)), wilson(score, len(exs))
	if err := r.costModel(m.Config(), p, o); err != nil {
		return nil, fmt.Errorf("%s: cost model: %w", name, err)
	}
	r.Schema = SchemaResult{OutputTokens: float64(sc.out) / n, DecodeSteps: float64(sc.steps) / n,
		ForcedShare: ratio(sc.forced, sc.out), JumpedShare: ratio(sc.jumped, sc.out),
		WallMs: sc.wall / n, PlainWallMs: r.PrefillMs + r.DecodeMs,
		ValidJSON: float64(sc.valid) / n, VerdictAcc: float64(sc.verdict) / n, SameText: float64(sc.same) / n}
	// The cost model prices a request by its passes: a jumped token is computed in the pass
	// of the next one, as a prompt token is, so the schema run costs like a request with
	// that many fewer output tokens and that many more prompt tokens.
	if r.Schema.CostPerReq, err = r.costAt(m.Config(), p, o, r.PromptTokens+float64(sc.jumped)/n, float64(sc.out-sc.jumped)/n); err != nil {
		return nil, fmt.Errorf("%s: cost model: %w", name, err)
	}
	return r, nil
}

// grade scores a completion against the expected answer.
func grade(text string, ex domain.Example) Answer {
	want := ex.Fields
	a := Answer{Text: text, Weak: want.Score <= 2}
	for _, t := range domain.Topics() {
		a.OtherTopic = a.OtherTopic || t != ex.Topic && strings.Contains(text, t)
	}
	v, ok := parseVerdict(text)
	if !ok {
		return a
	}
	a.Valid, a.Verdict, a.Score, a.Predicted = true, v.Verdict == want.Verdict, v.Score == want.Score, v.Score
	for _, eq := range []bool{v.Score == want.Score, v.Grammar == want.Grammar, v.Coherence == want.Coherence, v.Vocabulary == want.Vocabulary,
		v.Verdict == want.Verdict, v.Strengths == want.Strengths, v.Weaknesses == want.Weaknesses, v.Feedback == want.Feedback} {
		if eq {
			a.Fields++
		}
	}
	return a
}

// counts are the answers that parse, have the right verdict, and the right score.
func (r *ModelResult) counts() (valid, verdict, score int) {
	for _, a := range r.Answers {
		if a.Valid {
			valid++
		}
		if a.Verdict {
			verdict++
		}
		if a.Score {
			score++
		}
	}
	return valid, verdict, score
}

// scoreGuess is the score a model answers most often for weak essays (expected score 1-2,
// Answer.Weak) or for the others, and for what share of them.
type scoreGuess struct {
	Score int
	Share float64
}

// guesses are the model's most frequent scores for weak essays and for the others.
func (r *ModelResult) guesses() (weak, other scoreGuess) {
	var counts [2][6]int
	var totals [2]int
	for _, a := range r.Answers {
		g := btoi(!a.Weak)
		totals[g]++
		if a.Predicted >= 1 && a.Predicted <= 5 {
			counts[g][a.Predicted]++
		}
	}
	var out [2]scoreGuess
	for g := range out {
		for sc := 1; sc <= 5; sc++ {
			if counts[g][sc] > counts[g][out[g].Score] { // counts[g][0] stays 0
				out[g].Score = sc
			}
		}
		if totals[g] > 0 {
			out[g].Share = float64(counts[g][out[g].Score]) / float64(totals[g])
		}
	}
	return out[0], out[1]
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// costModel prices one request of the average shape with package cost's roofline on p.
func (r *ModelResult) costModel(cfg *model.Config, p *cost.Profile, o Options) error {
	r.Params = int64(cost.FromModelConfig(cfg).Params().Total)
	e, err := estimate(cfg, p, o, r.PromptTokens, r.OutputTokens)
	if err != nil {
		return err
	}
	r.CostSeconds = e.Prefill.Seconds + e.Decode.Seconds
	r.CostPerReq = r.CostSeconds * o.PricePerHour / 3600
	r.LMHeadShare = e.LMHeadTimeShare
	return nil
}

// costAt is the cost model's price of one request of this shape.
func (r *ModelResult) costAt(cfg *model.Config, p *cost.Profile, o Options, prompt, output float64) (float64, error) {
	e, err := estimate(cfg, p, o, prompt, output)
	if err != nil {
		return 0, err
	}
	return (e.Prefill.Seconds + e.Decode.Seconds) * o.PricePerHour / 3600, nil
}

func estimate(cfg *model.Config, p *cost.Profile, o Options, prompt, output float64) (*cost.Estimate, error) {
	dt, err := cost.ParsePrecision("bf16")
	if err != nil {
		return nil, err
	}
	kv, err := cost.ParsePrecision("f32")
	if err != nil {
		return nil, err
	}
	shape := cost.FromModelConfig(cfg)
	return shape.Estimate(p, cost.Workload{Prompt: max(1, int(prompt+0.5)), Output: int(output + 0.5), Batch: 1, DType: dt, KV: kv, Threads: o.Threads})
}

// parseVerdict reads a completion as the domain's JSON verdict: a JSON object with every
// key of the schema and values of the right types.
func parseVerdict(s string) (domain.Verdict, bool) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return domain.Verdict{}, false
	}
	for _, k := range []string{"score", "grammar", "coherence", "vocabulary", "verdict", "strengths", "weaknesses", "feedback"} {
		if _, ok := raw[k]; !ok {
			return domain.Verdict{}, false
		}
	}
	var v domain.Verdict
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return domain.Verdict{}, false
	}
	return v, true
}

// Run is the whole demo: base model → analyze → specialize → adapted model → the same
// held-out prompts through the base and the adapted specialized model. work is a scratch
// folder; adaptedDir is the adapted checkpoint (its tokenizer must be the one this run's
// specialization produces).
func Run(ctx context.Context, baseDir, adaptedDir, work string, o Options) (*Result, error) {
	start := time.Now()
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format, args...)
		}
	}
	prof, why, err := resolveProfile(o.Profile, o.Threads)
	if err != nil {
		return nil, fmt.Errorf("cost profile: %w", err)
	}
	logf("cost model: profile %s: %s\n", prof.Name, why)
	res := &Result{Profile: prof.Name, ProfileWhy: why, PricePerHour: o.PricePerHour, ScoreCeiling: domain.BestScoreAccuracy}
	docs := SpecializeCorpus(1000)
	tokJSON, err := os.ReadFile(filepath.Join(baseDir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cfg, err := model.ReadConfig(baseDir)
	if err != nil {
		return nil, err
	}
	logf("analyze: %d domain texts under the base vocabulary (%d ids)\n", len(docs), cfg.VocabSize)
	if res.Analysis, err = specialize.Analyze(tokJSON, docs, SpecializeOptions.Options, cfg.HiddenSize, 2, nil); err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}
	specDir := filepath.Join(work, "specialized")
	logf("specialize: prune the tokens the domain never uses, add at most %d new tokens -> %s\n", SpecializeOptions.Add, specDir)
	ro := SpecializeOptions
	for _, ex := range domain.Generate(HeldOutSeed, 100) {
		ro.HeldOut = append(ro.HeldOut, specialize.Doc{Text: ex.Prompt, Side: specialize.Input}, specialize.Doc{Text: ex.Completion, Side: specialize.Output})
	}
	if res.Specialization, err = specialize.Run(baseDir, docs, specDir, ro); err != nil {
		return nil, fmt.Errorf("specialize: %w", err)
	}
	logf("specialize: %s\n", res.specializationSummary())
	specTok, err := os.ReadFile(filepath.Join(specDir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	adaptedTok, err := os.ReadFile(filepath.Join(adaptedDir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("adapted model: %w", err)
	}
	// The committed adapted model was specialized by scripts/make-demo-model.sh with these same
	// options; if package specialize has changed since, the vocabularies differ and the
	// adapted model (which carries its own tokenizer) is still measured, with a note.
	res.SameSpecialization = sameJSON(specTok, adaptedTok)
	if !res.SameSpecialization {
		logf("note: the adapted model's vocabulary differs from this run's specialization (package specialize changed since scripts/make-demo-model.sh ran); measuring the adapted model with its own tokenizer\n")
	}
	exs := domain.Generate(HeldOutSeed, o.Prompts)
	logf("evaluate: %d held-out prompts through each model (greedy, at most %d tokens)\n", len(exs), o.MaxTokens)
	base, err := Evaluate(ctx, "base", baseDir, exs, prof, o)
	if err != nil {
		return nil, err
	}
	adapted, err := Evaluate(ctx, "specialized+adapted", adaptedDir, exs, prof, o)
	if err != nil {
		return nil, err
	}
	res.Base, res.Adapted = *base, *adapted
	if base.OutputTokens > 0 {
		res.OutputReduction = 1 - adapted.OutputTokens/base.OutputTokens
	}
	res.Verdict = pair(base.Answers, adapted.Answers, func(a Answer) bool { return a.Verdict })
	res.Score = pair(base.Answers, adapted.Answers, func(a Answer) bool { return a.Score })
	sample := func(i int) Sample {
		return Sample{Index: i, Prompt: exs[i].Prompt, Expected: exs[i].Completion, Base: base.Answers[i].Text, Adapted: adapted.Answers[i].Text}
	}
	for i := range min(3, len(exs)) {
		res.Samples = append(res.Samples, sample(i))
	}
	if len(exs) > 0 {
		// The command puts to the base model, as `tokenwise generate --chat` renders it (the
		// model's chat template is train.ChatPrompt, the format it was trained on), a prompt
		// it answered sensibly (the right verdict and score, no other essay's topic), the one
		// whose answer has the most fields as expected; when there is none, the closest.
		bestI, best := 0, -1
		for i, a := range base.Answers {
			v := a.Fields
			if a.Verdict && a.Score && !a.OtherTopic {
				v += 100
			}
			if v > best {
				bestI, best = i, v
			}
		}
		cmdModel := o.CommandModel
		if cmdModel == "" {
			cmdModel = baseDir
		}
		res.GenerateSample, res.GenerateAnswer = sample(bestI), base.Answers[bestI].Text
		res.Generate = []string{"generate", "--model", cmdModel, "--chat", "--max-tokens", fmt.Sprint(o.MaxTokens), "--prompt", exs[bestI].Prompt}
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// resolveProfile is the cost profile Run prices with, and how it was chosen: the one asked
// for; with "" or "auto", the shipped CPU profile measured on a machine like this one, or
// when there is none a quick calibration of this machine at the demo's threads.
func resolveProfile(name string, threads int) (*cost.Profile, string, error) {
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
	c := p.Calibration[0]
	return p, fmt.Sprintf("a quick calibration of this machine at %d threads (read %.1f GB/s, FMA %.0f GFLOP/s, × efficiencies %.1f memory and %.1f compute as in epyc-zen3-2core), since %s",
		c.Threads, c.ReadGBs, c.FMAGFLOPS, p.MemoryEfficiency, p.ComputeEfficiency, why), nil
}

// pair compares two models' answers to the same prompts on one criterion.
func pair(base, adapted []Answer, right func(Answer) bool) Paired {
	var p Paired
	for i := range min(len(base), len(adapted)) {
		switch b, a := right(base[i]), right(adapted[i]); {
		case b && !a:
			p.BaseOnly++
		case a && !b:
			p.AdaptedOnly++
		}
	}
	p.P = signTest(p.BaseOnly, p.AdaptedOnly)
	return p
}

// signTest is the exact two-sided p-value of b against c successes under a fair coin
// (McNemar's exact test on the prompts where two models differ).
func signTest(b, c int) float64 {
	n, k := b+c, min(b, c)
	if n == 0 {
		return 1
	}
	// P(X <= k) for X ~ Binomial(n, 1/2), from the log of each term.
	var tail float64
	for i := 0; i <= k; i++ {
		lg, _ := math.Lgamma(float64(n + 1))
		l1, _ := math.Lgamma(float64(i + 1))
		l2, _ := math.Lgamma(float64(n - i + 1))
		tail += math.Exp(lg - l1 - l2 - float64(n)*math.Ln2)
	}
	return min(1, 2*tail)
}

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

// sameJSON compares two JSON documents by value (key order and spacing aside).
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
