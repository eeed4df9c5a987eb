package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/engine/spec"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tokenizer"
)

func domainCorpus(t *testing.T, seed uint64, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "corpus.jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := domain.WriteJSONL(f, domain.Generate(seed, n)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

func TestAnalyzeJSONAndHTML(t *testing.T) {
	tok := testref.Tokenizer(t, "qwen3")
	corpus := domainCorpus(t, 1, 40)
	html := filepath.Join(t.TempDir(), "a.html")
	out, _, err := runCLI(t, "analyze", "--tokenizer", tok, "--corpus", corpus, "--json", "--html", html, "--add", "32")
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Sides map[string]struct {
			Texts, Tokens int
		} `json:"sides"`
		UsedIDs    int                     `json:"used_ids"`
		VocabSize  int                     `json:"vocab_size"`
		JSONKeys   []struct{ Text string } `json:"json_keys"`
		Projection struct {
			VocabAfter int `json:"vocab_after"`
			Corpus     struct {
				Before, After struct{ Output, Longer int }
			} `json:"corpus"`
		} `json:"projection"`
	}
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("%v: %.300s", err, out)
	}
	if a.Sides["input"].Texts != 40 || a.Sides["output"].Texts != 40 || a.VocabSize != 151669 || a.UsedIDs == 0 {
		t.Fatalf("analysis: %+v", a)
	}
	if a.Projection.VocabAfter >= a.VocabSize/10 || a.Projection.Corpus.After.Output >= a.Projection.Corpus.Before.Output || a.Projection.Corpus.After.Longer != 0 {
		t.Fatalf("projection: %+v", a.Projection)
	}
	found := false
	for _, k := range a.JSONKeys {
		found = found || k.Text == `"weaknesses":`
	}
	if !found {
		t.Fatalf("JSON keys: %+v", a.JSONKeys)
	}
	page, err := os.ReadFile(html)
	if err != nil || !strings.Contains(string(page), "tokens after") {
		t.Fatalf("html: %v %.200s", err, page)
	}
}

// Under the demo model's tokenizer, trained on this domain, every word of the corpus is one
// token: analyze says so instead of printing an empty "most fragmented words" list.
func TestAnalyzeNoFragmentedWords(t *testing.T) {
	corpus := domainCorpus(t, 1, 40)
	out, _, err := runCLI(t, "analyze", "--tokenizer", repoPath("demo", "model"), "--corpus", corpus, "--add", "16")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out, "most fragmented words (") || !strings.Contains(out, "most fragmented words: none; each of the corpus's ") {
		t.Errorf("analyze:\n%s", out)
	}
	js, _, err := runCLI(t, "analyze", "--tokenizer", repoPath("demo", "model"), "--corpus", corpus, "--add", "16", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var a struct {
		Fragmented    []any `json:"most_fragmented_words"`
		DistinctWords int   `json:"distinct_words"`
	}
	if err := json.Unmarshal([]byte(js), &a); err != nil || a.Fragmented == nil || len(a.Fragmented) != 0 || a.DistinctWords == 0 {
		t.Errorf("--json: %v: fragmented %v, %d distinct words; want [] and a count", err, a.Fragmented, a.DistinctWords)
	}
	if !strings.Contains(out, fmt.Sprintf("each of the corpus's %d distinct words is one token", a.DistinctWords)) {
		t.Errorf("text and JSON disagree on the distinct words (%d):\n%s", a.DistinctWords, out)
	}
}

func TestSpecializeCommand(t *testing.T) {
	src := synthFolder(t) // Llama-3 tokenizer, random weights, tied embeddings
	corpus := domainCorpus(t, 1, 30)
	held := domainCorpus(t, 2, 10)
	out := filepath.Join(t.TempDir(), "spec")
	stdout, stderr, err := runCLI(t, "specialize", "--model", src, "--corpus", corpus, "--held-out", held,
		"--prune", "--add", "64", "--init", "fvt", "--out", out, "--json")
	if err != nil {
		t.Fatal(err)
	}
	// Merged tokens are untrained until adapt: specialize says so, with the command.
	if !strings.Contains(stderr, "degenerate") || !strings.Contains(stderr, "tokenwise adapt --model "+out+" --corpus "+corpus) {
		t.Errorf("no adapt notice on stderr:\n%s", stderr)
	}
	var r struct {
		VocabBefore int `json:"vocab_before"`
		VocabAfter  int `json:"vocab_after"`
		HeldOut     struct {
			Before, After struct{ Output, Longer int }
			RoundTrip     int `json:"round_trip_failures"`
		} `json:"held_out"`
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("%v: %.300s", err, stdout)
	}
	if r.VocabAfter >= r.VocabBefore || r.HeldOut.After.Output >= r.HeldOut.Before.Output || r.HeldOut.RoundTrip != 0 {
		t.Fatalf("report: %+v", r)
	}
	for _, f := range []string{"model.safetensors", "tokenizer.json", "tokenizer_config.json", "config.json", "vocab_map.json", "report.json", "report.txt", "draft_index.bin"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Fatalf("output: %v", err)
		}
	}
	if _, err := tokenizer.Load(out); err != nil {
		t.Fatal(err)
	}
	// The specialized folder generates through the chat template like any other model.
	gen, _, err := runCLI(t, "generate", "--model", out, "--prompt", "Grade this essay.", "--chat", "--max-tokens", "4", "--json")
	if err != nil {
		t.Fatalf("generate on the specialized model: %v", err)
	}
	var g genOut
	if err := json.Unmarshal([]byte(gen), &g); err != nil || len(g.IDs) == 0 {
		t.Fatalf("generate: %v %.200s", err, gen)
	}
	for _, id := range g.IDs {
		if id >= r.VocabAfter {
			t.Fatalf("generate sampled id %d, a padding row (vocabulary %d)", id, r.VocabAfter)
		}
	}
	// The draft index beside it drafts from the domain's answers; the output is unchanged.
	idx, err := spec.ReadIndexFile(filepath.Join(out, spec.DraftIndexFile))
	if err != nil || idx.Len() == 0 {
		t.Fatalf("draft index: %v (%d contexts)", err, idx.Len())
	}
	plain, _, err := runCLI(t, "generate", "--model", out, "--prompt", "Grade this essay.", "--chat", "--max-tokens", "24", "--json")
	if err != nil {
		t.Fatal(err)
	}
	drafted, _, err := runCLI(t, "generate", "--model", out, "--prompt", "Grade this essay.", "--chat", "--max-tokens", "24", "--json", "--speculate", "domain,prompt")
	if err != nil {
		t.Fatalf("--speculate domain: %v", err)
	}
	var a, b genOut
	if json.Unmarshal([]byte(plain), &a) != nil || json.Unmarshal([]byte(drafted), &b) != nil || fmt.Sprint(a.IDs) != fmt.Sprint(b.IDs) {
		t.Errorf("--speculate changed the output:\n%v\n%v", a.IDs, b.IDs)
	}
}

func TestSpecializeErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte("{\"prompt\": 3}\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"specialize", "--corpus", bad, "--out", "x"}, "--model"},
		{[]string{"specialize", "--model", ".", "--corpus", bad, "--out", "x"}, "nothing to do"},
		{[]string{"specialize", "--model", ".", "--corpus", bad, "--out", "x", "--prune"}, "bad.jsonl:1"},
		{[]string{"analyze", "--tokenizer", "nope.json", "--corpus", bad}, "nope.json"},
		{[]string{"specialize", "--model", ".", "--corpus", bad, "--out", "x", "--add", "8", "--min-support", "2"}, "fraction in [0, 1]"},
	} {
		_, _, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one naming %q", c.args, err, c.want)
		}
	}
}
