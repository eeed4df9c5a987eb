package specialize

import (
	"slices"
	"testing"

	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tokenizer"
)

type llamaResult struct {
	Prompts []struct {
		IDs []int `json:"ids"`
	} `json:"prompts"`
	Tokens    [][]int `json:"tokens"`
	VocabSize int     `json:"vocabSize"`
}

// runLlamaCpp runs tests/llamacpp/run.mjs (node-llama-cpp): n greedy tokens after each prompt
// and llama.cpp's tokenization of texts.
func runLlamaCpp(t *testing.T, path string, prompts [][]int, n int, texts []string) llamaResult {
	t.Helper()
	var ps []map[string]any
	for _, p := range prompts {
		ps = append(ps, map[string]any{"ids": p, "n": n, "topk": 1})
	}
	var res llamaResult
	testref.LlamaCpp(t, map[string]any{"model": path, "threads": 1, "prompts": ps, "texts": texts,
		"parseSpecial": true, "kvCacheType": "F32"}, &res)
	if len(res.Prompts) != len(prompts) {
		t.Fatalf("llama.cpp answered %d prompts of %d", len(res.Prompts), len(prompts))
	}
	return res
}

// TestGGUFRunsInLlamaCpp: the specialized checkpoint's GGUF (pruned, merges and added tokens
// added, vocab padded) loads in llama.cpp, which generates the same greedy tokens as
// tokenwise does from the HF folder, and tokenizes domain texts to the same ids (added tokens
// never overlap, so its longest-first matching agrees with HF's leftmost-longest).
func TestGGUFRunsInLlamaCpp(t *testing.T) {
	src := synthQwen3(t, false)
	prompts := shortPrompts(3)
	for _, add := range []int{0, 64} {
		out := t.TempDir()
		docs := append(domainDocs(1, 40), Doc{Text: prompts[0], Side: Input})
		r, err := Run(src, docs, out, RunOptions{Options: Options{Prune: true, Add: add}, GGUF: true})
		if err != nil {
			t.Fatal(err)
		}
		const n = 10
		ours := greedy(t, out, prompts, n)
		tok, err := tokenizer.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		texts := []string{prompts[0], docs[1].Text}
		res := runLlamaCpp(t, r.GGUF, ours.prompts, n, texts)
		if res.VocabSize != r.Model.RowsAfter {
			t.Errorf("add=%d: llama.cpp vocabulary %d, want %d rows", add, res.VocabSize, r.Model.RowsAfter)
		}
		for i := range prompts {
			if !slices.Equal(res.Prompts[i].IDs, ours.outputs[i]) {
				t.Fatalf("add=%d prompt %d: llama.cpp greedy %v, tokenwise %v", add, i, res.Prompts[i].IDs, ours.outputs[i])
			}
		}
		for i, s := range texts {
			want := tok.Encode(s, false)
			if !slices.Equal(res.Tokens[i], want) {
				t.Fatalf("add=%d: llama.cpp tokenizes text %d as %v, tokenwise/HF %v", add, i, res.Tokens[i], want)
			}
		}
	}
}
