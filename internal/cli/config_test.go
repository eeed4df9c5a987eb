package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/tokenwise/tokenwise/cost"
	"github.com/tokenwise/tokenwise/model"
)

// TestConfigReadersAgree reads every config in configs/, and each again without
// tie_word_embeddings, through model, cost and analyze's configShape: they must agree on the
// shape, on the architecture's flags and on the tie default.
func TestConfigReadersAgree(t *testing.T) {
	paths, err := filepath.Glob(repoPath("configs", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("configs/*.json: %v, %d files", err, len(paths))
	}
	noTie := regexp.MustCompile(`\s*"tie_word_embeddings":\s*(true|false),?`)
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bare := noTie.ReplaceAll(raw, nil)
		if !noTie.Match(raw) || noTie.Match(bare) {
			t.Fatalf("%s: want exactly one tie_word_embeddings", p)
		}
		for _, js := range [][]byte{raw, bare} {
			mc, err := model.ParseConfig(js)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			s, err := cost.ParseConfigJSON(js)
			if err != nil {
				t.Fatalf("%s: cost: %v", p, err)
			}
			if want := cost.FromModelConfig(mc); s.Vocab != want.Vocab || s.Hidden != want.Hidden || s.Intermediate != want.Intermediate ||
				s.Layers != want.Layers || s.Heads != want.Heads || s.KVHeads != want.KVHeads || s.HeadDim != want.HeadDim ||
				s.TiedEmbeddings != want.TiedEmbeddings || s.AttentionBias != want.AttentionBias || s.QKNorm != want.QKNorm {
				t.Errorf("%s: cost reads %+v, model %+v", p, *s, *want)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
				t.Fatal(err)
			}
			if hidden, _ := configShape(filepath.Join(dir, "tokenizer.json")); hidden != mc.HiddenSize {
				t.Errorf("%s: analyze reads hidden_size %d, model %d", p, hidden, mc.HiddenSize)
			}
		}
	}
}
