package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
)

const synthTestConfig = `{"model_type":"qwen3","vocab_size":300,"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,
	"num_attention_heads":4,"num_key_value_heads":2,"head_dim":24,"max_position_embeddings":256,"rms_norm_eps":1e-6,
	"rope_theta":1000000,"tie_word_embeddings":false,"bos_token_id":271,"eos_token_id":[272,273],"some_unknown_field":"kept"}`

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSynth(t *testing.T) {
	tmp := t.TempDir()
	cfgPath := writeFile(t, tmp, "cfg.json", synthTestConfig)
	tok := filepath.Join("testdata", "tiny-tokenizer.json")
	out := filepath.Join(tmp, "out")
	_, stderr := mustRunErr(t, "synth", "--config", cfgPath, "--tokenizer", tok, "--dtype", "f16", "--seed", "5", "--out", out)
	if !strings.Contains(stderr, "qwen3") {
		t.Errorf("stderr %q", stderr)
	}

	var cfg map[string]any
	readJSON(t, filepath.Join(out, "config.json"), &cfg)
	if cfg["torch_dtype"] != "float16" || cfg["some_unknown_field"] != "kept" || cfg["head_dim"] != 24.0 {
		t.Errorf("config.json: %v", cfg)
	}
	var gen map[string]any
	readJSON(t, filepath.Join(out, "generation_config.json"), &gen)
	if gen["bos_token_id"] != 271.0 || len(gen["eos_token_id"].([]any)) != 2 {
		t.Errorf("generation_config.json: %v", gen)
	}
	want, _ := os.ReadFile(tok)
	if got, _ := os.ReadFile(filepath.Join(out, "tokenizer.json")); !bytes.Equal(got, want) {
		t.Error("tokenizer.json not copied")
	}

	m, err := model.Load(out, model.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if c := m.Config(); c.HeadDim != 24 || c.TieEmbeddings || len(c.EOS) != 2 {
		t.Errorf("loaded config %+v", *c)
	}
	s := m.NewSequence(0)
	if _, err := m.Prefill(s, []int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}

	// The weights are the model package's RandomWeights, bit for bit, whatever order the
	// writer asked for them in.
	pc, _ := model.ParseConfig([]byte(synthTestConfig))
	ws, err := model.RandomWeights(pc, 5, tensor.F16)
	if err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(tmp, "again")
	mustRunErr(t, "synth", "--config", cfgPath, "--dtype", "f16", "--seed", "5", "--out", again)
	a, _ := os.ReadFile(filepath.Join(out, "model.safetensors"))
	b, _ := os.ReadFile(filepath.Join(again, "model.safetensors"))
	if !bytes.Equal(a, b) {
		t.Error("same seed, different model.safetensors")
	}
	for _, w := range ws {
		if !bytes.Contains(a, w.Data) {
			t.Fatalf("tensor %s: bytes not in model.safetensors", w.Name)
		}
	}
	other := filepath.Join(tmp, "other")
	mustRunErr(t, "synth", "--config", cfgPath, "--dtype", "f16", "--seed", "6", "--out", other)
	if c, _ := os.ReadFile(filepath.Join(other, "model.safetensors")); bytes.Equal(a, c) {
		t.Error("different seeds, same weights")
	}
}

func TestSynthErrors(t *testing.T) {
	tmp := t.TempDir()
	small := writeFile(t, tmp, "small.json", strings.Replace(synthTestConfig, `"vocab_size":300`, `"vocab_size":100`, 1))
	bad := writeFile(t, tmp, "bad.json", strings.Replace(synthTestConfig, `"model_type":"qwen3"`, `"model_type":"gpt_neox"`, 1))
	good := writeFile(t, tmp, "good.json", synthTestConfig)
	tok := filepath.Join("testdata", "tiny-tokenizer.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", small, "--tokenizer", tok}, "do not fit the config's vocab_size 100"},
		{[]string{"--config", bad}, `model_type "gpt_neox"`},
		{[]string{"--config", good, "--dtype", "q8_0"}, `--dtype "q8_0"`},
		{[]string{"--config", filepath.Join(tmp, "none.json")}, "none.json"},
		{[]string{"--config", good, "--tokenizer", filepath.Join(tmp, "none")}, "--tokenizer"},
	} {
		args := append([]string{"synth", "--out", filepath.Join(tmp, "o")}, c.args...)
		_, _, err := run(t, "", args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error containing %q", c.args, err, c.want)
		}
	}
}

// TestShippedConfigs parses configs/*.json and checks the real models' parameter counts,
// which pins every shape field (published totals, embeddings counted once when tied).
func TestShippedConfigs(t *testing.T) {
	dir := filepath.Join(testref.RepoRoot(), "configs")
	want := map[string]int{
		"qwen3-0.6b.json":   596049920,
		"qwen3-4b.json":     4022468096,
		"llama-3.2-1b.json": 1235814400,
		"smollm2-135m.json": 134515008,
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) < 8 {
		t.Fatalf("configs/: %d files", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := model.ParseConfig(data)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		r, err := model.NewRandom(cfg, 0, tensor.BF16)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, ti := range r.Tensors() {
			n += ti.NumElements()
		}
		if w, ok := want[filepath.Base(f)]; ok && n != w {
			t.Errorf("%s: %d parameters, published %d", filepath.Base(f), n, w)
		}
		t.Logf("%s: %s, %d parameters", filepath.Base(f), cfg.Architecture, n)
	}
}

func mustRunErr(t *testing.T, args ...string) (string, string) {
	t.Helper()
	out, stderr, err := run(t, "", args...)
	if err != nil {
		t.Fatalf("tokenwise %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr)
	}
	return out, stderr
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
