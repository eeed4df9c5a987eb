package cost

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
)

// The cost model prices a mixture-of-experts decode step of batch B by the distinct experts
// its B tokens touch per layer, E·(1−(1−k/E)^B) (touchedExperts): it assumes uniform
// routing, every token picking k of E experts uniformly and independently of the others.
// This checks that against the router's real choices (Model.ObserveRouting) in batched
// decode steps of a synthesized Qwen3-MoE with 64 experts, 8 per token (Qwen3-30B-A3B's
// ratio of 1/16 at half its 128 experts): B independent sequences each decoding one token,
// 12 steps per batch size, two layers each.
//
// At B = 1 the count is exactly k. A random-weight router routes close to uniformly, so
// there the formula must hold within the sampling error (measured within 2.2% at every
// batch size here). For a trained router it is an upper bound: with marginal expert
// probabilities p_e (Σ p_e = k) and independent tokens the expected count Σ_e 1−(1−p_e)^B is
// concave in p, so largest when every p_e = k/E; routing that prefers some experts, or
// tokens that agree, touch fewer, and the cost model overestimates their bytes. The test logs
// the count the measured marginals predict next to the two.
func TestTouchedExpertsMatchRouting(t *testing.T) {
	js := []byte(`{"model_type":"qwen3_moe","vocab_size":512,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"max_position_embeddings":256,"rms_norm_eps":1e-6,
		"rope_theta":1000000,"tie_word_embeddings":false,"num_experts":64,"num_experts_per_tok":8,"moe_intermediate_size":16,
		"norm_topk_prob":true}`)
	cfg, err := model.ParseConfig(js)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ws, err := model.RandomWeights(cfg, 5, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ws, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	shape := FromModelConfig(cfg)

	const prompt, bs, trials = 8, 16, 12
	e, k := cfg.NumExperts, cfg.ExpertsPerTok
	rng := rand.New(rand.NewPCG(3, 4))
	for _, b := range []int{1, 2, 4, 8, 16, 32} {
		pc, err := m.NewPagedCache(b*(prompt/bs+1), bs)
		if err != nil {
			t.Fatal(err)
		}
		var distinct, n float64 // summed over trials × layers
		picks := make([]float64, e)
		var tokens float64
		for range trials {
			chunks := make([]model.Chunk, b)
			for i := range chunks {
				ids := make([]int, prompt)
				for j := range ids {
					ids[j] = rng.IntN(cfg.VocabSize)
				}
				chunks[i] = model.Chunk{Tokens: ids, Blocks: []int{i}, Logits: true}
			}
			if _, err := pc.Forward(chunks); err != nil {
				t.Fatal(err)
			}
			// One decode step of the b sequences: each decodes a random token.
			for i := range chunks {
				chunks[i] = model.Chunk{Tokens: []int{rng.IntN(cfg.VocabSize)}, Start: prompt, Blocks: []int{i}, Logits: true}
			}
			m.ObserveRouting(func(layer int, sel []int32) {
				seen := map[int32]bool{}
				for _, x := range sel {
					seen[x] = true
					picks[x]++
				}
				if len(sel) != b*k {
					t.Errorf("layer %d: %d choices for %d tokens × %d", layer, len(sel), b, k)
				}
				distinct += float64(len(seen))
				n++
				tokens += float64(b)
			})
			if _, err := pc.Forward(chunks); err != nil {
				t.Fatal(err)
			}
			m.ObserveRouting(nil)
		}
		pc.Release()
		got := distinct / n
		uniform := shape.touchedExperts(b)
		// The count the measured marginal probabilities predict for independent tokens.
		var marginal float64
		for _, c := range picks {
			p := c / tokens
			marginal += 1 - math.Pow(1-p, float64(b))
		}
		// The count is a sum of E indicators, so its variance is at most E/4 per draw; over n
		// draws (layers × steps) the mean's standard error is at most sqrt(E/4/n).
		se := math.Sqrt(float64(e) / 4 / n)
		t.Logf("batch %2d: %.2f distinct experts per layer measured, %.2f uniform routing (E·(1−(1−k/E)^B)), %.2f from the measured marginals; measured/uniform %.3f",
			b, got, uniform, marginal, got/uniform)
		if b == 1 && got != float64(k) {
			t.Errorf("batch 1: %.2f distinct experts, want exactly k = %d", got, k)
		}
		if math.Abs(got-uniform) > 3*se {
			t.Errorf("batch %d: %.2f distinct experts measured, uniform routing says %.2f (3 s.e. %.2f)", b, got, uniform, 3*se)
		}
	}
}
