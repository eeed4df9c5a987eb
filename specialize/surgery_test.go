package specialize

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// synthQwen3 writes a random-weight Qwen3 checkpoint with the real Qwen3 tokenizer.
func synthQwen3(t *testing.T, tied bool) string {
	t.Helper()
	return synthQwen3Arch(t, tied, false)
}

// synthQwen3Arch is synthQwen3, or with moe a Qwen3-MoE of 8 experts, 2 per token.
func synthQwen3Arch(t *testing.T, tied, moe bool) string {
	t.Helper()
	src := filepath.Dir(testref.Tokenizer(t, "qwen3"))
	dir := t.TempDir()
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tie := "false"
	if tied {
		tie = "true"
	}
	arch := `"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3"`
	if moe {
		arch = `"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe","num_experts":8,"num_experts_per_tok":2,
			"moe_intermediate_size":16,"norm_topk_prob":true`
	}
	cfgJSON := `{` + arch + `,"vocab_size":151936,"hidden_size":32,"intermediate_size":64,
		"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":8,"max_position_embeddings":512,
		"rms_norm_eps":1e-6,"rope_theta":1000000,"tie_word_embeddings":` + tie + `,"bos_token_id":151643,"eos_token_id":151645}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfgJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	gen := `{"bos_token_id":151643,"eos_token_id":[151645,151643],"pad_token_id":151643}`
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(gen), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := model.ParseConfig([]byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := model.RandomWeights(cfg, 7, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ws, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

type greedyRun struct {
	prompts [][]int
	outputs [][]int
}

// greedy runs each prompt text through the model folder at dir, greedily.
func greedy(t *testing.T, dir string, prompts []string, n int) greedyRun {
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
	var r greedyRun
	for _, p := range prompts {
		ids := tok.Encode(p, false)
		res, err := engine.Generate(context.Background(), m, tok, ids, engine.Options{MaxTokens: n, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		r.prompts = append(r.prompts, ids)
		r.outputs = append(r.outputs, res.IDs)
	}
	return r
}

func shortPrompts(n int) []string {
	var out []string
	for _, ex := range domain.Generate(5, n) {
		p := ex.Prompt[len(ex.Prompt)-200:]
		out = append(out, p)
	}
	return out
}

// TestPrunedSynthModelGreedyIdentical: with pruning only, a model's greedy generation equals
// the original's under the id map, token for token, on domain prompts. The corpus holds the
// prompts and the original's outputs (what the model writes in this domain). Qwen3 tied and
// untied, and a Qwen3-MoE (its expert tensors copied as they are).
func TestPrunedSynthModelGreedyIdentical(t *testing.T) {
	for _, c := range []struct{ tied, moe bool }{{true, false}, {false, false}, {false, true}} {
		tied := c.tied
		src := synthQwen3Arch(t, tied, c.moe)
		prompts := shortPrompts(3)
		const n = 12
		before := greedy(t, src, prompts, n)
		var docs []Doc
		var keep []int
		for i, p := range prompts {
			docs = append(docs, Doc{Text: p, Side: Input})
			keep = append(keep, before.outputs[i]...)
		}
		docs = append(docs, domainDocs(1, 20)...)
		out := t.TempDir()
		r, err := Run(src, docs, out, RunOptions{Options: Options{Prune: true, KeepIDs: keep}})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("tied=%v moe=%v\n%s", tied, c.moe, r.Text())
		if r.Model.RowsAfter%64 != 0 || r.Model.RowsAfter >= r.Model.RowsBefore {
			t.Fatalf("rows %d -> %d", r.Model.RowsBefore, r.Model.RowsAfter)
		}
		after := greedy(t, out, prompts, n)
		vm := readVocabMap(t, out)
		checkSpecialIDs(t, out, vm)
		for i := range prompts {
			if len(after.prompts[i]) != len(before.prompts[i]) {
				t.Fatalf("prompt %d: %d tokens, was %d", i, len(after.prompts[i]), len(before.prompts[i]))
			}
			for k, id := range after.prompts[i] {
				if vm[id] != before.prompts[i][k] {
					t.Fatalf("prompt %d token %d: new %d -> old %d, want %d", i, k, id, vm[id], before.prompts[i][k])
				}
			}
			if len(after.outputs[i]) != len(before.outputs[i]) {
				t.Fatalf("output %d: %d tokens, want %d", i, len(after.outputs[i]), len(before.outputs[i]))
			}
			for k, id := range after.outputs[i] {
				if vm[id] != before.outputs[i][k] {
					t.Fatalf("tied=%v output %d step %d: new id %d (old %d), original generated %d", tied, i, k, id, vm[id], before.outputs[i][k])
				}
			}
		}
	}
}

func readVocabMap(t *testing.T, dir string) []int {
	t.Helper()
	m, err := readJSONObject(filepath.Join(dir, "vocab_map.json"))
	if err != nil {
		t.Fatal(err)
	}
	list, _ := m["new_to_old"].([]any)
	out := make([]int, len(list))
	for i, v := range list {
		n, _ := v.(interface{ Int64() (int64, error) })
		x, _ := n.Int64()
		out[i] = int(x)
	}
	return out
}

// checkSpecialIDs: bos/eos/pad ids in the configs and the added_tokens_decoder keys name the
// same tokens as before under the id map.
func checkSpecialIDs(t *testing.T, dir string, vm []int) {
	t.Helper()
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	id := func(v any) int {
		n, _ := v.(interface{ Int64() (int64, error) })
		x, _ := n.Int64()
		return int(x)
	}
	cfg, err := readJSONObject(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if vm[id(cfg["bos_token_id"])] != 151643 || vm[id(cfg["eos_token_id"])] != 151645 {
		t.Fatalf("config.json: bos %v eos %v do not map to 151643/151645", cfg["bos_token_id"], cfg["eos_token_id"])
	}
	gen, err := readJSONObject(filepath.Join(dir, "generation_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	eos, _ := gen["eos_token_id"].([]any)
	if len(eos) != 2 || vm[id(eos[0])] != 151645 || vm[id(eos[1])] != 151643 || vm[id(gen["pad_token_id"])] != 151643 {
		t.Fatalf("generation_config.json: %v", gen)
	}
	tc, err := readJSONObject(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec, _ := tc["added_tokens_decoder"].(map[string]any)
	if len(dec) != 26 {
		t.Fatalf("tokenizer_config.json: %d added_tokens_decoder entries, want 26", len(dec))
	}
	for k, v := range dec {
		content, _ := v.(map[string]any)["content"].(string)
		n, err := strconv.Atoi(k)
		if err != nil {
			t.Fatal(err)
		}
		if s, _ := tok.Token(n); s != content {
			t.Fatalf("tokenizer_config.json: added_tokens_decoder[%s] is %q, the tokenizer says %q", k, content, s)
		}
	}
}
