package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// TestEmbeddedModels extracts both embedded models and checks they load and that the
// adapted one has a specialized vocabulary: fewer ids and LM-head rows than the base, and
// added tokens the base does not have.
func TestEmbeddedModels(t *testing.T) {
	dir := t.TempDir()
	base, err := ExtractModel(filepath.Join(dir, "base"))
	if err != nil {
		t.Fatal(err)
	}
	adapted, err := ExtractAdapted(filepath.Join(dir, "adapted"))
	if err != nil {
		t.Fatal(err)
	}
	var vocab, rows [2]int
	for i, d := range []string{base, adapted} {
		m, err := model.Load(d, model.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = m.Config().VocabSize
		m.Close()
		tok, err := tokenizer.Load(d)
		if err != nil {
			t.Fatal(err)
		}
		vocab[i] = tok.VocabSize()
	}
	if !(vocab[1] < vocab[0] && rows[1] < rows[0]) {
		t.Errorf("vocabulary %d -> %d ids, LM-head rows %d -> %d: the adapted model is not specialized", vocab[0], vocab[1], rows[0], rows[1])
	}
	added, merges := newTokens(t, base, adapted)
	if added == 0 || vocab[1] < added+merges {
		t.Errorf("adapted tokenizer: %d new added tokens and %d new merges in %d ids", added, merges, vocab[1])
	}
	if _, err := BaseFS().Open("model.safetensors"); err != nil {
		t.Fatal(err)
	}
}

// newTokens counts what the adapted tokenizer.json has and the base one lacks: added tokens
// (by content) and BPE merges.
func newTokens(t *testing.T, baseDir, adaptedDir string) (added, merges int) {
	t.Helper()
	type tokJSON struct {
		Added []struct {
			Content string `json:"content"`
		} `json:"added_tokens"`
		Model struct {
			Merges []json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	read := func(dir string) tokJSON {
		data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
		if err != nil {
			t.Fatal(err)
		}
		var tj tokJSON
		if err := json.Unmarshal(data, &tj); err != nil {
			t.Fatal(err)
		}
		return tj
	}
	b, a := read(baseDir), read(adaptedDir)
	had := map[string]bool{}
	for _, x := range b.Added {
		had[x.Content] = true
	}
	for _, m := range b.Model.Merges {
		had["merge "+string(m)] = true
	}
	for _, x := range a.Added {
		if !had[x.Content] {
			added++
		}
	}
	for _, m := range a.Model.Merges {
		if !had["merge "+string(m)] {
			merges++
		}
	}
	return added, merges
}

// TestRunSmall is the demo on three held-out prompts: the specialization this run makes is
// the committed adapted model's, with the new-token counts the report and the table give;
// the accuracies printed are those of the answers, graded again here; the samples show the
// prompt, the expected answer and each model's; the adapted model answers in fewer tokens;
// under the domain schema the answers are the same and the base model's take fewer steps.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("specializes and generates: seconds")
	}
	dir := t.TempDir()
	base, _ := ExtractModel(filepath.Join(dir, "base"))
	adapted, _ := ExtractAdapted(filepath.Join(dir, "adapted"))
	const n = 3
	res, err := Run(context.Background(), base, adapted, dir, Options{Prompts: n, MaxTokens: 160, Threads: 2, PricePerHour: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	tab := res.Table()
	flat := strings.Join(strings.Fields(tab), " ")

	// Specialization: the committed adapted model is what this run's specialization wrote,
	// and the counts in the report, the table and the tokenizer agree.
	sp := res.Specialization
	if sp == nil || !res.SameSpecialization {
		t.Fatalf("specialization %v, same as the adapted model's: %v", sp, res.SameSpecialization)
	}
	atok, err := tokenizer.Load(adapted)
	if err != nil {
		t.Fatal(err)
	}
	added, merges := newTokens(t, base, adapted)
	if !(sp.VocabAfter < sp.VocabBefore) || sp.VocabAfter != sp.Kept+sp.NewAdded+sp.NewMerges || atok.VocabSize() != sp.VocabAfter ||
		added != sp.NewAdded || merges != sp.NewMerges || res.Adapted.VocabRows >= res.Base.VocabRows {
		t.Errorf("report: %d -> %d ids, %d kept, %d added, %d merges; adapted tokenizer %d ids, %d added, %d merges; LM-head rows %d -> %d",
			sp.VocabBefore, sp.VocabAfter, sp.Kept, sp.NewAdded, sp.NewMerges, atok.VocabSize(), added, merges, res.Base.VocabRows, res.Adapted.VocabRows)
	}
	if want := fmt.Sprintf("specialization: %d -> %d ids: %d kept, %d new tokens (at most %d): %d added tokens across word boundaries, %d merges inside words",
		sp.VocabBefore, sp.VocabAfter, sp.Kept, sp.NewAdded+sp.NewMerges, SpecializeOptions.Add, sp.NewAdded, sp.NewMerges); !strings.Contains(tab, want) {
		t.Errorf("table lacks %q:\n%s", want, tab)
	}
	if h := sp.HeldOut; h == nil || h.Before.Input == 0 || h.Before.Output == 0 || !strings.Contains(tab, fmt.Sprintf("input tokens %d -> %d", h.Before.Input, h.After.Input)) {
		t.Errorf("held-out: %+v; want input and output counted and printed", h)
	}

	// Accuracy: grade the answers again and find those numbers in the table.
	exs := domain.Generate(HeldOutSeed, n)
	for _, m := range []*ModelResult{&res.Base, &res.Adapted} {
		if len(m.Answers) != n {
			t.Fatalf("%s: %d answers", m.Name, len(m.Answers))
		}
		var valid, verdict, score int
		for i, a := range m.Answers {
			v, ok := parseVerdict(a.Text)
			if ok {
				valid++
				verdict += btoi(v.Verdict == exs[i].Fields.Verdict)
				score += btoi(v.Score == exs[i].Fields.Score)
			}
		}
		if m.ValidJSON != float64(valid)/n || m.VerdictAcc != float64(verdict)/n || m.ScoreAcc != float64(score)/n {
			t.Errorf("%s: valid %g, verdict %g, score %g; graded again: %d, %d, %d of %d", m.Name, m.ValidJSON, m.VerdictAcc, m.ScoreAcc, valid, verdict, score, n)
		}
	}
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
	for _, row := range []struct {
		name string
		b, a float64
	}{{"valid JSON verdicts", res.Base.ValidJSON, res.Adapted.ValidJSON}, {"verdict accuracy", res.Base.VerdictAcc, res.Adapted.VerdictAcc}, {"score accuracy", res.Base.ScoreAcc, res.Adapted.ScoreAcc}} {
		if want := row.name + " " + pct(row.b) + " " + pct(row.a); !strings.Contains(flat, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
	if !strings.Contains(flat, fmt.Sprintf("score accuracy: %s [", pct(res.Base.ScoreAcc))) || !strings.Contains(flat, "A perfect grader expects 40%") {
		t.Errorf("table does not explain the score accuracy:\n%s", tab)
	}

	// Samples: input, expected answer and both outputs.
	if len(res.Samples) != n {
		t.Fatalf("%d samples", len(res.Samples))
	}
	for i, sm := range res.Samples {
		if sm.Prompt != exs[i].Prompt || sm.Expected != exs[i].Completion || sm.Base != res.Base.Answers[i].Text || sm.Adapted != res.Adapted.Answers[i].Text {
			t.Errorf("sample %d: %+v", i, sm)
		}
	}
	if !strings.Contains(tab, "  expected:  "+exs[0].Completion) || !strings.Contains(tab, "  base:      "+res.Base.Answers[0].Text) || !strings.Contains(tab, "Topic: ") {
		t.Errorf("table's sample lacks the input, expected answer or output:\n%s", tab)
	}

	// The cost profile is named with the reason it was chosen, and the generate command
	// asks the base model one of the prompts in its chat format.
	if res.ProfileWhy == "" || !strings.Contains(tab, "cost model: profile "+res.Profile+" at $0.10 per device-hour, batch 1, bf16 weights: "+res.ProfileWhy) {
		t.Errorf("profile %q (%q) not explained:\n%s", res.Profile, res.ProfileWhy, tab)
	}
	g := res.Generate
	if len(g) < 4 || g[0] != "generate" || !slices.Contains(g, "--chat") || g[len(g)-1] != res.GenerateSample.Prompt || res.GenerateAnswer != res.Base.Answers[res.GenerateSample.Index].Text ||
		!strings.Contains(tab, "tokenwise generate --model ") {
		t.Errorf("generate command %q for sample %d", g, res.GenerateSample.Index)
	}

	// Structured output: the schema's grammar changes no greedy answer of either model (both
	// already write Schema's documents), every answer is valid, and on the base vocabulary
	// jump-forward saves decode steps.
	for _, m := range []*ModelResult{&res.Base, &res.Adapted} {
		sr := m.Schema
		if sr.SameText != 1 || sr.ValidJSON != m.ValidJSON || sr.DecodeSteps > m.DecodeSteps || sr.JumpedShare > sr.ForcedShare {
			t.Errorf("%s with the schema: %+v; without: %.1f steps, valid %g", m.Name, sr, m.DecodeSteps, m.ValidJSON)
		}
	}
	if b := res.Base.Schema; !(b.DecodeSteps < res.Base.DecodeSteps) || b.JumpedShare == 0 {
		t.Errorf("base with the schema: %.1f decode steps (%.1f without), %.1f%% jumped", b.DecodeSteps, res.Base.DecodeSteps, 100*b.JumpedShare)
	}

	if !(res.Adapted.OutputTokens < res.Base.OutputTokens) {
		t.Errorf("output tokens %.1f -> %.1f: not fewer", res.Base.OutputTokens, res.Adapted.OutputTokens)
	}
	if h := res.HTML(); !strings.Contains(h, "<svg") || !strings.Contains(h, "specialized+adapted") || !strings.Contains(h, "<p>expected:</p>") {
		t.Error("HTML report lacks the chart or the samples' expected answers")
	}
}
