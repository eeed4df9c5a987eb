package specialize

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/tokenwise/tokenwise/convert"
	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// chatGreedy renders each user message with the folder's chat template and generates n
// tokens greedily; it returns prompt ids and outputs.
func chatGreedy(t *testing.T, dir string, msgs []string, n int) greedyRun {
	t.Helper()
	m, err := model.Load(dir, model.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := engine.TokenizerTemplate(tok)
	if err != nil {
		t.Fatal(err)
	}
	var r greedyRun
	for _, msg := range msgs {
		ids, _, err := tmpl.ChatPrompt(tok, []engine.Message{{Role: "user", Content: msg}}, engine.ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		res, err := engine.Generate(context.Background(), m, tok, ids, engine.Options{MaxTokens: n})
		if err != nil {
			t.Fatal(err)
		}
		r.prompts = append(r.prompts, ids)
		r.outputs = append(r.outputs, res.IDs)
	}
	return r
}

// TestSmolLM2PruneKeepsGreedyOutputs: the real SmolLM2-135M-Instruct (Q4_1 GGUF, converted to
// an f16 HF folder: the Q4_1 values rounded once, the same weights before and after) pruned to
// the domain keeps its greedy outputs on domain prompts token for token, through the chat
// template.
func TestSmolLM2PruneKeepsGreedyOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("loads a 135M-parameter model")
	}
	gg := testref.Path(t, "smollm2", "smollm2-135m-instruct-q4_1.gguf")
	src := t.TempDir()
	// f16 halves what the test writes and reads; before and after share the same values.
	if err := convert.GGUFToHF(gg, src, convert.Options{DType: "f16"}); err != nil {
		t.Fatal(err)
	}
	// Two short prompts keep this test within CI time (a 135M f32 forward pass on two cores);
	// TOKENWISE_SMOLLM2_PROMPTS=N runs more.
	nPrompts := 2
	if v, err := strconv.Atoi(os.Getenv("TOKENWISE_SMOLLM2_PROMPTS")); err == nil && v > 0 {
		nPrompts = v
	}
	var msgs []string
	for _, ex := range domain.Generate(11, nPrompts) {
		msgs = append(msgs, "Grade this essay with a JSON verdict.\n\n"+ex.Prompt[len(ex.Prompt)-160:])
	}
	const n = 12
	before := chatGreedy(t, src, msgs, n)
	// The corpus: the domain (train split) plus what the model itself writes for these
	// prompts; KeepIDs also keeps the exact ids it generated.
	docs := domainDocs(1, 50)
	var keep []int
	for i, msg := range msgs {
		docs = append(docs, Doc{Text: msg, Side: Input})
		keep = append(keep, before.outputs[i]...)
		keep = append(keep, before.prompts[i]...)
	}
	out := t.TempDir()
	r, err := Run(src, docs, out, RunOptions{Options: Options{Prune: true, KeepIDs: keep}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SmolLM2-135M-Instruct pruned to the domain:\n%s", r.Text())
	after := chatGreedy(t, out, msgs, n)
	vm := readVocabMap(t, out)
	for i := range msgs {
		var mp, mo []int
		for _, id := range after.prompts[i] {
			mp = append(mp, vm[id])
		}
		for _, id := range after.outputs[i] {
			mo = append(mo, vm[id])
		}
		if !slices.Equal(mp, before.prompts[i]) {
			t.Fatalf("prompt %d: mapped %v, original %v", i, mp, before.prompts[i])
		}
		if !slices.Equal(mo, before.outputs[i]) {
			t.Fatalf("prompt %d: pruned model generates (mapped) %v, original %v", i, mo, before.outputs[i])
		}
	}
	tok, _ := tokenizer.Load(out)
	t.Logf("greedy output 0: %q", tok.Decode(after.outputs[0], false))
	_ = os.Remove(filepath.Join(out, "model.safetensors"))
}
