package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tokenwise/tokenwise/cost"
	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/specialize"
	"github.com/tokenwise/tokenwise/tokenizer"
	"github.com/tokenwise/tokenwise/train"
)

// Seeds of the domain splits: the base model and the adaptation were trained on TrainSeed;
// the demo measures on HeldOutSeed, which neither saw.
const (
	TrainSeed   = 1
	HeldOutSeed = 2
)

// SpecializeOptions is the specialization the demo runs and the committed adapted model was
// trained after (scripts/make-demo-model.sh): prune, then add up to 128 merged tokens.
var SpecializeOptions = specialize.RunOptions{Options: specialize.Options{Prune: true, Add: 128}, Init: "exp"}

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
	Prompts      int     // held-out prompts evaluated through each model
	MaxTokens    int     // generation cap per prompt
	Threads      int     // kernel threads
	Profile      string  // cost profile (package cost)
	PricePerHour float64 // of the profile's device, for cost per request
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
	Samples      []string
}

// Result is a whole demo run.
type Result struct {
	Base, Adapted  ModelResult
	Specialization *specialize.Report
	Analysis       *specialize.Analysis
	Profile        string
	PricePerHour   float64
	AdaptedFrom    string // "committed artifact" or how it was made
	// SameSpecialization says the adapted model's tokenizer is the one this run's
	// specialization wrote.
	SameSpecialization bool
	OutputReduction    float64
	Elapsed            time.Duration
}

// Evaluate runs the held-out prompts through the model in dir with greedy decoding and
// scores the JSON verdicts.
func Evaluate(ctx context.Context, name, dir string, exs []domain.Example, o Options) (*ModelResult, error) {
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
	var promptToks, outToks, steps, valid, verdict, score int
	var prefill, decode float64
	for i, ex := range exs {
		ids := tok.Encode(train.ChatPrompt(ex.Prompt), false)
		res, err := engine.Generate(ctx, m, tok, ids, engine.Options{MaxTokens: o.MaxTokens})
		if err != nil {
			return nil, fmt.Errorf("%s: prompt %d: %w", name, i, err)
		}
		promptToks += len(ids)
		outToks += res.Usage.CompletionTokens
		steps += res.Timing.DecodeSteps
		prefill += res.Timing.PrefillMs
		decode += res.Timing.DecodeMs
		v, ok := parseVerdict(res.Text)
		if ok {
			valid++
			if v.Verdict == ex.Fields.Verdict {
				verdict++
			}
			if v.Score == ex.Fields.Score {
				score++
			}
		}
		if i < 3 {
			r.Samples = append(r.Samples, res.Text)
		}
		if o.Log != nil && (i+1)%10 == 0 {
			fmt.Fprintf(o.Log, "  %s: %d/%d prompts\n", name, i+1, len(exs))
		}
	}
	n := float64(len(exs))
	r.PromptTokens, r.OutputTokens, r.DecodeSteps = float64(promptToks)/n, float64(outToks)/n, float64(steps)/n
	r.PrefillMs, r.DecodeMs = prefill/n, decode/n
	r.ValidJSON, r.VerdictAcc, r.ScoreAcc = float64(valid)/n, float64(verdict)/n, float64(score)/n
	if err := r.costModel(m.Config(), o); err != nil {
		return nil, fmt.Errorf("%s: cost model: %w", name, err)
	}
	return r, nil
}

// costModel prices one request of the average shape with package cost's roofline.
func (r *ModelResult) costModel(cfg *model.Config, o Options) error {
	p, err := cost.LoadProfile(o.Profile)
	if err != nil {
		return err
	}
	dt, err := cost.ParsePrecision("bf16")
	if err != nil {
		return err
	}
	kv, err := cost.ParsePrecision("f32")
	if err != nil {
		return err
	}
	shape := cost.FromModelConfig(cfg)
	r.Params = int64(shape.Params().Total)
	e, err := shape.Estimate(p, cost.Workload{Prompt: max(1, int(r.PromptTokens+0.5)), Output: int(r.OutputTokens + 0.5), Batch: 1, DType: dt, KV: kv, Threads: 2})
	if err != nil {
		return err
	}
	r.CostSeconds = e.Prefill.Seconds + e.Decode.Seconds
	r.CostPerReq = r.CostSeconds * o.PricePerHour / 3600
	r.LMHeadShare = e.LMHeadTimeShare
	return nil
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
	res := &Result{Profile: o.Profile, PricePerHour: o.PricePerHour}
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
	logf("specialize: prune + add up to %d merged tokens -> %s\n", SpecializeOptions.Add, specDir)
	ro := SpecializeOptions
	for _, ex := range domain.Generate(HeldOutSeed, 100) {
		ro.HeldOut = append(ro.HeldOut, specialize.Doc{Text: ex.Completion, Side: specialize.Output})
	}
	if res.Specialization, err = specialize.Run(baseDir, docs, specDir, ro); err != nil {
		return nil, fmt.Errorf("specialize: %w", err)
	}
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
	base, err := Evaluate(ctx, "base", baseDir, exs, o)
	if err != nil {
		return nil, err
	}
	adapted, err := Evaluate(ctx, "specialized+adapted", adaptedDir, exs, o)
	if err != nil {
		return nil, err
	}
	res.Base, res.Adapted = *base, *adapted
	if base.OutputTokens > 0 {
		res.OutputReduction = 1 - adapted.OutputTokens/base.OutputTokens
	}
	res.Elapsed = time.Since(start)
	return res, nil
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
