package demo

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// TestEmbeddedModels extracts both embedded models and checks they load and that the
// adapted one has a specialized vocabulary.
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
	for _, d := range []string{base, adapted} {
		m, err := model.Load(d, model.Options{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		m.Close()
		if _, err := tokenizer.Load(d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := BaseFS().Open("model.safetensors"); err != nil {
		t.Fatal(err)
	}
}

// TestRunSmall is the demo on two held-out prompts: the pipeline runs, the specialized
// tokenizer matches the committed adapted model's, and the adapted model answers in fewer
// tokens.
func TestRunSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("specializes and generates: seconds")
	}
	dir := t.TempDir()
	base, _ := ExtractModel(filepath.Join(dir, "base"))
	adapted, _ := ExtractAdapted(filepath.Join(dir, "adapted"))
	res, err := Run(context.Background(), base, adapted, dir, Options{Prompts: 2, MaxTokens: 160, Threads: 2, Profile: "epyc-zen3-2core", PricePerHour: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Adapted.VocabRows == res.Base.VocabRows || res.Specialization == nil {
		t.Errorf("vocabulary rows %d -> %d: not specialized", res.Base.VocabRows, res.Adapted.VocabRows)
	}
	if !(res.Adapted.OutputTokens < res.Base.OutputTokens) {
		t.Errorf("output tokens %.1f -> %.1f: not fewer", res.Base.OutputTokens, res.Adapted.OutputTokens)
	}
	if tab := res.Table(); !strings.Contains(tab, "verdict accuracy") {
		t.Errorf("table:\n%s", tab)
	}
	if h := res.HTML(); !strings.Contains(h, "<svg") || !strings.Contains(h, "specialized+adapted") {
		t.Error("HTML report lacks the chart")
	}
}
