package specialize

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tokenizer"
)

func TestReadCorpus(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := write("a.txt", "plain text\nsecond line\n")
	jl := write("b.jsonl", `{"prompt": "p1", "completion": "c1"}`+"\n\n"+`{"text": "t1"}`+"\n")
	docs, err := ReadCorpus(plain, jl)
	if err != nil {
		t.Fatal(err)
	}
	// Records number on across files; a JSONL line's prompt and completion are one.
	want := []Doc{{"plain text\nsecond line\n", Text, 1}, {"p1", Input, 2}, {"c1", Output, 2}, {"t1", Text, 3}}
	if len(docs) != len(want) {
		t.Fatalf("%d docs: %+v", len(docs), docs)
	}
	for i := range want {
		if docs[i] != want[i] {
			t.Fatalf("doc %d: %+v, want %+v", i, docs[i], want[i])
		}
	}
	for _, c := range []struct{ name, body, want string }{
		{"bad.jsonl", "{\"text\": \"ok\"}\n{\"text\": 3}\n", "bad.jsonl:2"},
		{"other.jsonl", "{\"input\": \"x\"}\n", "other.jsonl:1"},
		{"empty.jsonl", "", "no texts"},
	} {
		if _, err := ReadCorpus(write(c.name, c.body)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming %q", c.name, err, c.want)
		}
	}
	if _, err := ReadCorpus(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file read without error")
	}
}

// TestReplayMatchesTokenizer: the BPE replay that chooses merges and computes the route
// closure gives exactly the tokenizer's pieces (which match HF's) on real pre-tokens.
func TestReplayMatchesTokenizer(t *testing.T) {
	data, err := os.ReadFile(testref.Tokenizer(t, "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	old, err := tokenizer.FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := parseTokFile(data)
	if err != nil {
		t.Fatal(err)
	}
	rk := newRanks(tf.merges)
	n := 0
	for _, s := range append(udhrTexts(t, 30, 800), domainDocs(1, 5)[0].Text) {
		for _, pc := range old.Pieces(s) {
			if pc.Added {
				continue
			}
			got := rk.replay(chars(byteLevelString(pc.Text)), nil)
			if len(got) != len(pc.IDs) {
				t.Fatalf("piece %q: replay %q, tokenizer %v", pc.Text, got, pc.IDs)
			}
			for i, g := range got {
				if id := tf.vocab[g]; id != pc.IDs[i] {
					t.Fatalf("piece %q token %d: replay %q (%d), tokenizer %d", pc.Text, i, g, id, pc.IDs[i])
				}
			}
			n++
		}
	}
	if n < 1000 {
		t.Fatalf("only %d pieces compared", n)
	}
}

func TestOverlaps(t *testing.T) {
	for _, c := range []struct {
		x, y string
		want bool
	}{
		{`": "`, `" and`, true}, // `"` ends one and starts the other
		{"abc", "cde", true},
		{"abc", "abc", false}, // equal strings: containment, not a partial overlap
		{"aa", "aa", true},    // "aaa" holds two overlapping copies
		{"abc", "xyz", false},
		{"abc", "bc", false}, // containment is fine
	} {
		if got := overlaps(c.x, c.y) || (c.x != c.y && overlaps(c.y, c.x)); got != c.want {
			t.Errorf("overlap(%q, %q) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
}

// The report counts only the sides its texts have: held-out completions alone print no
// "input 0 -> 0 (n/a)".
func TestReportTextSides(t *testing.T) {
	r := &Report{VocabBefore: 10, VocabAfter: 8, Kept: 8,
		Corpus:  Evaluation{Before: Counts{Input: 100, Output: 50}, After: Counts{Input: 90, Output: 20}},
		HeldOut: &Evaluation{Before: Counts{Output: 40}, After: Counts{Output: 16}}}
	txt := r.Text()
	for _, want := range []string{"corpus tokens: input 100 -> 90 (-10.0%), output 50 -> 20 (-60.0%); texts longer", "held-out tokens: output 40 -> 16 (-60.0%); texts longer"} {
		if !strings.Contains(txt, want) {
			t.Errorf("report lacks %q:\n%s", want, txt)
		}
	}
	if strings.Contains(txt, "n/a") || strings.Contains(txt, "text 0") {
		t.Errorf("report counts a side with no texts:\n%s", txt)
	}
}
