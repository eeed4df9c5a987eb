package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/tokenizer"
	"github.com/tokenwise/tokenwise/train"
)

const trainTestConfig = `{"model_type":"llama","vocab_size":1,"hidden_size":32,"intermediate_size":48,"num_hidden_layers":3,
	"num_attention_heads":2,"num_key_value_heads":1,"head_dim":16,"max_position_embeddings":512,"rms_norm_eps":1e-5,
	"rope_theta":10000,"tie_word_embeddings":true}`

// TestTrainTokenizerTrainAdapt runs the three commands on a small domain corpus: the
// tokenizer round-trips the corpus, the trained checkpoint loads and generates, and adapt
// moves only the embeddings, first and last blocks by default.
func TestTrainTokenizerTrainAdapt(t *testing.T) {
	tmp := t.TempDir()
	f, err := os.Create(filepath.Join(tmp, "train.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	exs := domain.Generate(7, 40)
	if err := domain.WriteJSONL(f, exs); err != nil {
		t.Fatal(err)
	}
	f.Close()
	corpus := f.Name()

	tokDir := filepath.Join(tmp, "tok")
	out := mustRun(t, "", "train-tokenizer", "--corpus", corpus, "--vocab-size", "500", "--out", tokDir)
	if !strings.Contains(out, "500 ids") {
		t.Errorf("train-tokenizer: %q", out)
	}
	tok, err := tokenizer.Load(tokDir)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Decode(tok.Encode(exs[0].Completion, false), false); got != exs[0].Completion {
		t.Fatalf("round trip: %q", got)
	}

	cfg := writeFile(t, tmp, "cfg.json", trainTestConfig)
	base := filepath.Join(tmp, "base")
	out, stderr := mustRunErr(t, "train", "--config", cfg, "--tokenizer", tokDir, "--corpus", corpus, "--steps", "4",
		"--batch", "2", "--threads", "2", "--seq-len", "512", "--out", base)
	if !strings.Contains(stderr, "tokens/s") || !strings.Contains(out, "held-out loss") {
		t.Errorf("train output: %q\nstderr: %q", out, stderr)
	}
	for _, name := range []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(base, name)); err != nil {
			t.Errorf("checkpoint: %v", err)
		}
	}
	mustRun(t, "", "generate", "--model", base, "--prompt", "Essay:", "--max-tokens", "3")

	before, err := train.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	adapted := filepath.Join(tmp, "adapted")
	mustRunErr(t, "adapt", "--model", base, "--corpus", corpus, "--steps", "2", "--batch", "2", "--threads", "2",
		"--seq-len", "512", "--lr", "1e-2", "--out", adapted)
	after, err := train.Load(adapted)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range before.Specs {
		moved := !slices.Equal(before.W[s.Off:s.Off+s.N], after.W[s.Off:s.Off+s.N])
		want := !strings.Contains(s.Name, "layers.1.") && s.Name != "model.norm.weight"
		if moved != want {
			t.Errorf("adapt: %s moved = %v, want %v", s.Name, moved, want)
		}
	}
	// --resume: stopped after one of three steps and resumed, adapt writes the weights of an
	// unbroken run.
	adaptArgs := func(out string, extra ...string) []string {
		return append([]string{"adapt", "--model", base, "--corpus", corpus, "--steps", "3", "--batch", "2", "--threads", "2",
			"--seq-len", "512", "--lr", "1e-2", "--dtype", "f32", "--out", out}, extra...)
	}
	whole, broken := filepath.Join(tmp, "whole"), filepath.Join(tmp, "broken")
	mustRunErr(t, adaptArgs(whole)...)
	mustRunErr(t, adaptArgs(broken, "--stop-at", "1")...)
	_, stderr = mustRunErr(t, adaptArgs(broken, "--resume")...)
	if !strings.Contains(stderr, "resuming at step 1/3") {
		t.Errorf("adapt --resume: stderr %q", stderr)
	}
	w1, err := train.Load(whole)
	if err != nil {
		t.Fatal(err)
	}
	w2, err := train.Load(broken)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w1.W, w2.W) {
		t.Error("adapt --stop-at 1, then --resume: weights differ from an unbroken run's")
	}
	if _, _, err := run(t, "", "train", "--tokenizer", tokDir, "--corpus", corpus, "--out", base); err == nil {
		t.Error("train without --config or --model: no error")
	}
	if _, _, err := run(t, "", "train", "--model", base, "--corpus", corpus, "--seq-len", "64", "--out", adapted); err == nil || !strings.Contains(err.Error(), "no training sequence") {
		t.Errorf("train with every completion cut off by --seq-len: %v", err)
	}
	if _, _, err := run(t, "", "adapt", "--model", base, "--corpus", corpus, "--trainable", "layer.9", "--out", adapted); err == nil {
		t.Error("adapt --trainable layer.9 of a 3-layer model: no error")
	}
}
