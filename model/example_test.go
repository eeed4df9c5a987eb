package model_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
)

// One prompt through prefill, then greedy decoding, on a small random Qwen3 checkpoint.
func Example() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	config := `{"model_type":"qwen3","vocab_size":1000,"hidden_size":256,"intermediate_size":512,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,"max_position_embeddings":512,"rms_norm_eps":1e-6,
		"rope_theta":1000000,"tie_word_embeddings":false}`
	cfg, _ := model.ParseConfig([]byte(config))
	weights, _ := model.RandomWeights(cfg, 1, tensor.BF16)
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(config), 0o644)
	safetensors.Write(filepath.Join(dir, "model.safetensors"), weights, nil)

	m, err := model.Load(dir, model.Options{Threads: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	seq := m.NewSequence(0)
	logits, err := m.Prefill(seq, []int{17, 4, 256, 999}) // the whole prompt in one pass
	if err != nil {
		log.Fatal(err)
	}
	var out []int
	for range 8 {
		next := largest(logits)
		out = append(out, next)
		if logits, err = m.Decode(seq, next); err != nil { // one token per step
			log.Fatal(err)
		}
	}
	fmt.Println(seq.Len(), "tokens; generated", out)
	// Output: 12 tokens; generated [806 727 681 242 121 833 232 759]
}

// largest returns the id of the largest logit.
func largest(logits []float32) int {
	best := 0
	for i, x := range logits {
		if x > logits[best] {
			best = i
		}
	}
	return best
}
