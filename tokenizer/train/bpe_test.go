package train

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// corpus is domain text plus general text with digits, other scripts, emoji, whitespace
// runs and a special token, so that every branch of the pre-tokenizer occurs.
func corpus() []string {
	var texts []string
	for _, ex := range domain.Generate(1, 200) {
		texts = append(texts, ex.Prompt, ex.Completion)
	}
	texts = append(texts,
		"In 2024, 1,234 people paid $56.78 each — naïve café déjà vu.\n\n\tTabs   and    spaces\r\n",
		"Всеобщая декларация прав человека. 世界人权宣言。 🎉🎉 I'm sure they'll've done it<|endoftext|>next doc",
	)
	return texts
}

func TestTrainDeterministicAndCompressing(t *testing.T) {
	texts := corpus()
	r1, err := Train(texts, Options{VocabSize: 800})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := Train(texts, Options{VocabSize: 800})
	if err != nil {
		t.Fatal(err)
	}
	j1, err := r1.TokenizerJSON()
	if err != nil {
		t.Fatal(err)
	}
	j2, _ := r2.TokenizerJSON()
	if !bytes.Equal(j1, j2) {
		t.Fatal("two trainings on the same corpus gave different tokenizer.json")
	}
	if got := len(r1.Vocab) + len(r1.Specials); got != 800 {
		t.Fatalf("vocabulary of %d ids, want 800", got)
	}
	tok, err := tokenizer.FromJSON(j1)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 800 {
		t.Fatalf("tokenizer VocabSize %d, want 800", tok.VocabSize())
	}
	var nBytes, nToks int
	for _, s := range texts {
		ids := tok.Encode(s, false)
		if got := tok.Decode(ids, false); got != s {
			t.Fatalf("round trip: %q -> %q", s, got)
		}
		nBytes += len(s)
		nToks += len(ids)
	}
	// The domain text repeats a small vocabulary: 800 ids must do much better than bytes.
	if bpt := float64(nBytes) / float64(nToks); bpt < 3 {
		t.Fatalf("%.2f bytes per token on the training corpus, want >= 3", bpt)
	}
	if id, ok := tok.TokenID("<|endoftext|>"); !ok || id != 797 || !tok.IsSpecial(id) {
		t.Fatalf("<|endoftext|>: id %d, %v", id, ok)
	}
	// Frequent words of the domain become single tokens.
	for _, w := range []string{" essay", "verdict"} {
		if ids := tok.Encode(w, false); len(ids) != 1 {
			t.Errorf("%q: %d tokens %v, want 1", w, len(ids), ids)
		}
	}
}

func TestTrainErrors(t *testing.T) {
	if _, err := Train([]string{"x"}, Options{VocabSize: 100}); err == nil {
		t.Fatal("vocab size below the byte alphabet: no error")
	}
	// A tiny corpus runs out of pairs before the target size: fewer ids, still valid.
	r, err := Train([]string{"ab ab ab"}, Options{VocabSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Vocab) >= 1000-3 || len(r.Merges) == 0 {
		t.Fatalf("%d tokens, %d merges", len(r.Vocab), len(r.Merges))
	}
}

// TestHFTokenizersReproduce loads the trained tokenizer.json in HF tokenizers (npm, the Rust
// library) and checks it gives tokenwise's ids and decodings on the corpus and on held-out text.
func TestHFTokenizersReproduce(t *testing.T) {
	testref.Path(t, "node_modules", "tokenizers")
	if _, err := exec.LookPath("node"); err != nil {
		testref.Missing(t, "node: %v", err)
	}
	texts := corpus()
	r, err := Train(texts, Options{VocabSize: 1200})
	if err != nil {
		t.Fatal(err)
	}
	data, err := r.TokenizerJSON()
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range domain.Generate(99, 20) { // held out
		texts = append(texts, ex.Prompt, ex.Completion)
	}
	texts = append(texts, "Unseen: Ωmega 12345 <|im_start|>user\nhi<|im_end|>\n", "  leading spaces\n\n\n")
	dir := t.TempDir()
	tp := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(tp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	for _, s := range texts {
		b, _ := json.Marshal(s)
		in.Write(b)
		in.WriteByte('\n')
	}
	cmd := exec.Command("node", filepath.Join(testref.RepoRoot(), "tests", "parity", "hf_encode.js"), tp, "-", "-")
	cmd.Env = append(os.Environ(), "TOKENWISE_REFS="+testref.Dir(), "RAYON_NUM_THREADS=2")
	cmd.Stdin = &in
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hf_encode.js: %v: %s", err, stderr.String())
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	i := 0
	for sc.Scan() {
		var res struct {
			IDs []int   `json:"ids"`
			Dec *string `json:"dec"`
		}
		if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		if i >= len(texts) {
			t.Fatal("more results than texts")
		}
		want := tok.Encode(texts[i], false)
		if !slices.Equal(res.IDs, want) {
			t.Fatalf("text %d %.60q: HF ids %v, tokenwise %v", i, texts[i], res.IDs, want)
		}
		if res.Dec != nil && *res.Dec != texts[i] {
			t.Fatalf("text %d: HF decodes to %q", i, *res.Dec)
		}
		i++
	}
	if i != len(texts) {
		t.Fatalf("%d results for %d texts", i, len(texts))
	}
}
