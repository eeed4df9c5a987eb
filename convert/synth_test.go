package convert

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
)

// TestSynthGGUF: a random k-quant GGUF of a Qwen3-MoE and a Llama shape has the tensors
// (names, order, dtypes, shapes) and metadata that exporting a float synth of the same
// config in the same file type gives, each quantized tensor's weights centered on 0 with the spread of
// the float synth's export (within 1% + 10/sqrt(weights)), F32 tensors the float synth's values, and the same
// seed gives the same bytes.
func TestSynthGGUF(t *testing.T) {
	tokJSON, tokCfg := tinyTokenizer(t, "qwen2")
	for _, c := range []struct{ name, cfg, dtype string }{
		{"qwen3moe", `{"model_type":"qwen3_moe","vocab_size":512,"hidden_size":256,"intermediate_size":512,"moe_intermediate_size":256,
		"num_experts":16,"num_experts_per_tok":4,"norm_topk_prob":true,"num_hidden_layers":8,"num_attention_heads":4,"num_key_value_heads":2,
		"head_dim":64,"max_position_embeddings":512,"rms_norm_eps":1e-6,"rope_theta":1000000,"tie_word_embeddings":false}`, "q4_k_m"},
		{"llama-tied", `{"model_type":"llama","vocab_size":512,"hidden_size":256,"intermediate_size":768,"num_hidden_layers":4,
		"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":512,"rms_norm_eps":1e-5,"rope_theta":10000,"tie_word_embeddings":true,
		"rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":256}}`, "q6_k"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			synth := filepath.Join(dir, "synth.gguf")
			if err := SynthGGUF([]byte(c.cfg), tokJSON, tokCfg, synth, c.dtype, 5); err != nil {
				t.Fatal(err)
			}
			again := filepath.Join(dir, "again.gguf")
			if err := SynthGGUF([]byte(c.cfg), tokJSON, tokCfg, again, c.dtype, 5); err != nil {
				t.Fatal(err)
			}
			a, _ := os.ReadFile(synth)
			b, _ := os.ReadFile(again)
			if !bytes.Equal(a, b) {
				t.Error("the same seed gave different files")
			}

			// The float synth of the same config, exported in the same file type.
			cfg, err := model.ParseConfig([]byte(c.cfg))
			if err != nil {
				t.Fatal(err)
			}
			ws, err := model.RandomWeights(cfg, 5, tensor.F32)
			if err != nil {
				t.Fatal(err)
			}
			hf := filepath.Join(dir, "hf")
			os.MkdirAll(hf, 0o755)
			for name, data := range map[string][]byte{"config.json": []byte(c.cfg), "tokenizer.json": tokJSON, "tokenizer_config.json": tokCfg} {
				if err := os.WriteFile(filepath.Join(hf, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := safetensors.Write(filepath.Join(hf, "model.safetensors"), ws, nil); err != nil {
				t.Fatal(err)
			}
			exported := filepath.Join(dir, "export.gguf")
			if err := HFToGGUF(hf, exported, Options{DType: c.dtype, Name: "synth-" + c.dtype}); err != nil {
				t.Fatal(err)
			}
			fs, err := gguf.Open(synth)
			if err != nil {
				t.Fatal(err)
			}
			defer fs.Close()
			fe, err := gguf.Open(exported)
			if err != nil {
				t.Fatal(err)
			}
			defer fe.Close()
			if len(fs.Meta) != len(fe.Meta) {
				t.Errorf("%d metadata entries, the export has %d", len(fs.Meta), len(fe.Meta))
			}
			for i := range min(len(fs.Meta), len(fe.Meta)) {
				if fs.Meta[i].Key != fe.Meta[i].Key || fmt.Sprint(fs.Meta[i].Value) != fmt.Sprint(fe.Meta[i].Value) {
					t.Errorf("metadata %d: %s = %v, the export's %s = %v", i, fs.Meta[i].Key, fs.Meta[i].Value, fe.Meta[i].Key, fe.Meta[i].Value)
					break
				}
			}
			ts, te := fs.Tensors(), fe.Tensors()
			if len(ts) != len(te) {
				t.Fatalf("%d tensors, the export has %d", len(ts), len(te))
			}
			quantized := 0
			for i := range ts {
				s, e := ts[i], te[i]
				if s.Name != e.Name || s.DType != e.DType || fmt.Sprint(s.Shape) != fmt.Sprint(e.Shape) {
					t.Errorf("tensor %d: %s %v%v, the export's %s %v%v", i, s.Name, s.DType, s.Shape, e.Name, e.DType, e.Shape)
					continue
				}
				if s.DType == tensor.F32 {
					if !bytes.Equal(s.Data, e.Data) {
						t.Errorf("%s: F32 values differ from the float synth's", s.Name)
					}
					continue
				}
				quantized++
				got, mean := spread(t, s)
				want, _ := spread(t, e)
				// Both bounds: 1% for what is systematic (the f16 block scale, the float
				// synth's own rounding to the k-quant) and the sampling error of random
				// sub-block scales and mins, about 7.5/sqrt(n) at worst here (measured: 2.9%
				// on 65k weights, 0.7% on 1M). A wrong block or min scale is off by far more.
				bound := 0.01 + 10/math.Sqrt(float64(s.NumElements()))
				if math.Abs(mean) > bound*got {
					t.Errorf("%s (%v): weights centered at %.5f, spread %.5f", s.Name, s.DType, mean, got)
				}
				if math.Abs(got/want-1) > bound {
					t.Errorf("%s (%v): weights spread %.5f, the float synth's %.5f (bound %.1f%%)", s.Name, s.DType, got, want, 100*bound)
				}
			}
			if quantized == 0 {
				t.Error("no quantized tensors")
			}
		})
	}
	if err := SynthGGUF([]byte(`{"model_type":"llama","vocab_size":512,"hidden_size":256,"intermediate_size":768,"num_hidden_layers":1,
		"num_attention_heads":4,"num_key_value_heads":2}`), tokJSON, tokCfg, filepath.Join(t.TempDir(), "x.gguf"), "q8_0", 1); err == nil {
		t.Error("SynthGGUF accepted q8_0")
	}
}

// spread is the standard deviation and the mean of a tensor's dequantized weights.
func spread(t *testing.T, ti tensor.Info) (std, mean float64) {
	t.Helper()
	f := make([]float32, ti.NumElements())
	if err := tensor.Dequantize(ti.DType, ti.Data, f); err != nil {
		t.Fatal(err)
	}
	var sum, sq float64
	for _, v := range f {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	n := float64(len(f))
	return math.Sqrt(sq/n - (sum/n)*(sum/n)), sum / n
}
