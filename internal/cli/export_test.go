package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
)

// exportFixture writes a tiny Qwen2 HF checkpoint with a byte-level tokenizer (every byte,
// no merges, GPT-2 pre-tokenizer).
func exportFixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "hf")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// GPT-2's byte-to-unicode alphabet.
	vocab := map[string]int{}
	n := 0
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			vocab[string(rune(b))] = b
		} else {
			vocab[string(rune(256+n))] = b
			n++
		}
	}
	tok := map[string]any{
		"version":       "1.0",
		"added_tokens":  []any{map[string]any{"id": 256, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}},
		"normalizer":    nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}, "byte_fallback": false, "ignore_merges": false},
	}
	cfg := map[string]any{"model_type": "qwen2", "vocab_size": 260, "hidden_size": 32, "intermediate_size": 64,
		"num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 128,
		"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": true, "eos_token_id": 256}
	tj, _ := json.Marshal(tok)
	cj, _ := json.Marshal(cfg)
	for name, data := range map[string][]byte{"tokenizer.json": tj, "config.json": cj,
		"tokenizer_config.json": []byte(`{"eos_token": "<|end|>"}`)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := model.ParseConfig(cj)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := model.RandomWeights(c, 1, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ws, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runExportCLI(args ...string) (stdout, stderr string, err error) {
	root := newRoot()
	var o, e bytes.Buffer
	root.SetOut(&o)
	root.SetErr(&e)
	root.SetArgs(args)
	err = root.Execute()
	return o.String(), e.String(), err
}

func TestExportCommand(t *testing.T) {
	dir := exportFixture(t)
	tmp := t.TempDir()
	gg := filepath.Join(tmp, "m.gguf")
	out, _, err := runExportCLI("export", "--model", dir, "--format", "gguf", "--dtype", "f16", "--out", gg, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || res["out"] != gg {
		t.Fatalf("--json output %q (%v)", out, err)
	}
	f, err := gguf.Open(gg)
	if err != nil {
		t.Fatal(err)
	}
	if q, ok := f.Tensor("blk.0.attn_q.weight"); !ok || q.DType != tensor.F16 {
		t.Errorf("attn_q: %v %v, want f16", ok, q.DType)
	}
	if pre, _ := f.GetString("tokenizer.ggml.pre"); pre != "gpt-2" {
		t.Errorf("tokenizer.ggml.pre %q", pre)
	}
	f.Close()

	back := filepath.Join(tmp, "back")
	if _, _, err := runExportCLI("export", "--model", gg, "--format", "hf", "--out", back); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		if _, err := os.Stat(filepath.Join(back, name)); err != nil {
			t.Errorf("exported folder: %v", err)
		}
	}
	if c, err := model.ReadConfig(back); err != nil || c.Architecture != "qwen2" || !c.TieEmbeddings {
		t.Errorf("exported config: %+v, %v", c, err)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "--model", dir, "--format", "onnx", "--out", gg}, "--format"},
		{[]string{"export", "--model", gg, "--format", "gguf", "--out", gg + "2"}, "HF folder"},
		{[]string{"export", "--model", dir, "--format", "hf", "--out", back}, ".gguf file"},
		{[]string{"export", "--model", filepath.Join(tmp, "missing"), "--format", "gguf", "--out", gg}, "missing"},
		{[]string{"export", "--model", dir, "--format", "gguf", "--dtype", "q3_k", "--out", gg}, "q3_k"},
		{[]string{"export", "--model", dir, "--format", "gguf"}, "--out"},
	} {
		if _, _, err := runExportCLI(bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: error %v, want one mentioning %q", bad.args, err, bad.want)
		}
	}
}
