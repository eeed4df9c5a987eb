package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/cost"
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
	published := map[string][2]float64{"qwen3-30b-a3b.json": {30.5, 3.3}, "mixtral-8x7b.json": {46.7, 12.9}}
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
		// A mixture of experts: the active parameters are all but the experts a token does
		// not pick (all experts have one size, so experts k.. of every layer stand for them).
		active := n
		for _, ti := range r.Tensors() {
			var layer, e int
			var rest string
			if k, _ := fmt.Sscanf(ti.Name, "model.layers.%d.mlp.experts.%d.%s", &layer, &e, &rest); k < 2 {
				fmt.Sscanf(ti.Name, "model.layers.%d.block_sparse_moe.experts.%d.%s", &layer, &e, &rest)
			}
			if strings.Contains(ti.Name, ".experts.") && e >= cfg.ExpertsPerTok {
				active -= ti.NumElements()
			}
		}
		if w, ok := published[filepath.Base(f)]; ok {
			// Published as billions to one decimal: Qwen3-30B-A3B "30.5B in total and 3.3B
			// activated" (and "29.9B non-embedding": both the embedding table and the head
			// count), Mixtral-8x7B "46.7B, 12.9B active". Qwen's figures are cut, not rounded
			// (3.353B activated reads 3.3B), Mistral's rounded (12.880B reads 12.9B): a count
			// must give the published digit one way or the other.
			for j, c := range []int{n, active} {
				x := float64(c) / 1e9
				if math.Round(x*10)/10 != w[j] && math.Floor(x*10)/10 != w[j] {
					t.Errorf("%s: %.3fB parameters (%s), published %.1fB", filepath.Base(f), x, []string{"total", "active"}[j], w[j])
				}
			}
			ms := cost.FromModelConfig(cfg).Params()
			if ms.Total != int64(n) || ms.Active+ms.Embedding != int64(active) {
				t.Errorf("%s: the cost model counts %d total, %d active + %d embedding; synth %d, %d", filepath.Base(f), ms.Total, ms.Active, ms.Embedding, n, active)
			}
		}
		t.Logf("%s: %s, %d parameters, %d active", filepath.Base(f), cfg.Architecture, n, active)
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
