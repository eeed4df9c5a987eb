package model

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/tensor"
)

// toGGUF writes a Hugging Face checkpoint as llama.cpp's convert_hf_to_gguf.py would for
// these architectures (metadata keys, tensor names, Q/K row permutation for llama, rope_freqs
// for llama3 scaling), so that loading it exercises the GGUF path.
func toGGUF(t *testing.T, cfg *Config, ws []tensor.Info, path string, extra ...gguf.KV) {
	t.Helper()
	arch := cfg.Arch().GGUF
	p := arch + "."
	meta := []gguf.KV{
		{Key: "general.architecture", Value: gguf.String(arch)},
		{Key: p + "vocab_size", Value: gguf.Uint32(uint32(cfg.VocabSize))},
		{Key: p + "context_length", Value: gguf.Uint32(uint32(cfg.MaxPositions))},
		{Key: p + "embedding_length", Value: gguf.Uint32(uint32(cfg.HiddenSize))},
		{Key: p + "block_count", Value: gguf.Uint32(uint32(cfg.NumLayers))},
		{Key: p + "feed_forward_length", Value: gguf.Uint32(uint32(cfg.IntermediateSize))},
		{Key: p + "attention.head_count", Value: gguf.Uint32(uint32(cfg.NumHeads))},
		{Key: p + "attention.head_count_kv", Value: gguf.Uint32(uint32(cfg.NumKVHeads))},
		{Key: p + "attention.key_length", Value: gguf.Uint32(uint32(cfg.HeadDim))},
		{Key: p + "attention.value_length", Value: gguf.Uint32(uint32(cfg.HeadDim))},
		{Key: p + "rope.dimension_count", Value: gguf.Uint32(uint32(cfg.HeadDim))},
		{Key: p + "attention.layer_norm_rms_epsilon", Value: gguf.Float32(float32(cfg.RMSNormEps))},
		{Key: p + "rope.freq_base", Value: gguf.Float32(float32(cfg.RopeTheta))},
	}
	if cfg.MoE() {
		meta = append(meta, gguf.KV{Key: p + "expert_count", Value: gguf.Uint32(uint32(cfg.NumExperts))},
			gguf.KV{Key: p + "expert_used_count", Value: gguf.Uint32(uint32(cfg.ExpertsPerTok))})
		if arch == "qwen3moe" {
			meta = append(meta, gguf.KV{Key: p + "expert_feed_forward_length", Value: gguf.Uint32(uint32(cfg.ExpertSize))})
		}
		ws = stackExperts(t, cfg, ws)
	}
	meta = append(meta, extra...)
	var out []tensor.Info
	if rs := cfg.RopeScaling; rs != nil {
		switch rs.Type {
		case "linear":
			meta = append(meta, gguf.KV{Key: p + "rope.scaling.type", Value: gguf.String("linear")},
				gguf.KV{Key: p + "rope.scaling.factor", Value: gguf.Float32(float32(rs.Factor))})
		case "llama3":
			ff := make([]float32, cfg.HeadDim/2)
			for i := range ff {
				freq := 1 / math.Pow(cfg.RopeTheta, float64(2*i)/float64(cfg.HeadDim))
				wl := 2 * math.Pi / freq
				low := float64(rs.OriginalMaxPositions) / rs.LowFreqFactor
				high := float64(rs.OriginalMaxPositions) / rs.HighFreqFactor
				switch {
				case wl < high:
					ff[i] = 1
				case wl > low:
					ff[i] = float32(rs.Factor)
				default:
					s := (float64(rs.OriginalMaxPositions)/wl - rs.LowFreqFactor) / (rs.HighFreqFactor - rs.LowFreqFactor)
					ff[i] = float32(1 / ((1-s)/rs.Factor + s))
				}
			}
			out = append(out, tensor.Info{Name: "rope_freqs.weight", DType: tensor.F32, Shape: []int{len(ff)}, Data: tensor.Bytes(ff)})
		}
	}
	for _, w := range ws {
		name := w.Name
		if strings.HasPrefix(name, "blk.") { // stacked experts
		} else if strings.HasPrefix(name, "model.layers.") {
			var i int
			var rest string
			fmt.Sscanf(strings.TrimPrefix(name, "model.layers."), "%d", &i)
			rest = strings.SplitN(strings.TrimPrefix(name, "model.layers."), ".", 2)[1]
			name = ggufNames.layer(i, rest)
			if arch == "llama" && (strings.Contains(rest, "q_proj") || strings.Contains(rest, "k_proj")) {
				heads := cfg.NumHeads
				if strings.Contains(rest, "k_proj") {
					heads = cfg.NumKVHeads
				}
				w.Data = permuteRows(w, heads)
			}
		} else {
			name = ggufNames.global(strings.TrimSuffix(name, ".weight"))
		}
		if len(w.Shape) == 1 && w.DType != tensor.F32 {
			// The converter keeps norms and biases in f32 (llama.cpp adds them to f32 activations).
			f := make([]float32, w.Shape[0])
			if err := tensor.Dequantize(w.DType, w.Data, f); err != nil {
				t.Fatal(err)
			}
			w.DType, w.Data = tensor.F32, tensor.Bytes(f)
		}
		w.Name = name
		out = append(out, w)
	}
	if err := gguf.Write(path, meta, out, 32); err != nil {
		t.Fatal(err)
	}
}

// permuteRows reorders each head's rows as convert_hf_to_gguf.py's LlamaModel.permute:
// row i of a head goes to 2i, row i+d/2 to 2i+1.
func permuteRows(w tensor.Info, heads int) []byte {
	rows := w.Shape[0]
	rowBytes := len(w.Data) / rows
	hd := rows / heads
	out := make([]byte, len(w.Data))
	for h := range heads {
		for i := range hd / 2 {
			for j := range 2 {
				src := h*hd + j*hd/2 + i
				dst := h*hd + 2*i + j
				copy(out[dst*rowBytes:(dst+1)*rowBytes], w.Data[src*rowBytes:(src+1)*rowBytes])
			}
		}
	}
	return out
}

// stackExperts replaces each layer's per-expert Hugging Face tensors by llama.cpp's stacked
// [experts, rows, cols] ones (blk.N.ffn_{gate,up,down}_exps.weight), as convert_hf_to_gguf.py
// does: expert e's matrix is block e.
func stackExperts(t *testing.T, cfg *Config, ws []tensor.Info) []tensor.Info {
	t.Helper()
	byName := map[string]tensor.Info{}
	for _, w := range ws {
		byName[w.Name] = w
	}
	expert := map[string]bool{}
	var out []tensor.Info
	for i := range cfg.NumLayers {
		for j, stacked := range []string{"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"} {
			var st tensor.Info
			for e := range cfg.NumExperts {
				_, g, u, d, _ := cfg.Arch().ExpertTensorNames(i, e)
				w, ok := byName[[]string{g, u, d}[j]]
				if !ok {
					t.Fatalf("no expert tensor %s", []string{g, u, d}[j])
				}
				expert[w.Name] = true
				st.DType, st.Shape = w.DType, []int{cfg.NumExperts, w.Shape[0], w.Shape[1]}
				st.Data = append(st.Data, w.Data...)
			}
			st.Name = fmt.Sprintf("blk.%d.%s.weight", i, stacked)
			out = append(out, st)
		}
	}
	for _, w := range ws {
		if !expert[w.Name] {
			out = append(out, w)
		}
	}
	return out
}

// TestGGUFMatchesHF: the same weights written the way llama.cpp's converter writes them load
// from GGUF and give the same logits as from Hugging Face names: names, metadata, the Q/K
// permutation with interleaved RoPE, and rope_freqs. The weights are float32: the permuted
// rows make the two models sum q·k in different orders, which differ in the last bit of a
// score, and with f16 weights (whose activations are rounded to f16, as ggml does) such a
// bit occasionally crosses an f16 rounding boundary and moves a logit by ~2⁻¹¹ relative,
// which says nothing about the loader (it happened once in 16 steps when the prefill tile's
// rounding changed).
func TestGGUFMatchesHF(t *testing.T) {
	for name := range testConfigs {
		if name == "mistral-window" {
			continue // llama.cpp drops the sliding window for Mistral; tested on HF only
		}
		if c, _ := ParseConfig([]byte(testConfigs[name])); c.MoE() && !c.NormTopKProb {
			continue // llama.cpp's qwen3moe graph always renormalizes the experts' weights
		}
		t.Run(name, func(t *testing.T) {
			hf, _, ws := testModel(t, name, tensor.F32, 2)
			path := filepath.Join(t.TempDir(), "m.gguf")
			toGGUF(t, hf.cfg, ws, path)
			g, err := Load(path, Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			gc := g.Config()
			if gc.Architecture != hf.cfg.Architecture && !(hf.cfg.Architecture == "mistral" && gc.Architecture == "llama") {
				t.Errorf("architecture %q", gc.Architecture)
			}
			if gc.NumExperts != hf.cfg.NumExperts || gc.ExpertsPerTok != hf.cfg.ExpertsPerTok || gc.ExpertSize != hf.cfg.ExpertSize || gc.NormTopKProb != hf.cfg.NormTopKProb {
				t.Errorf("architecture %q", gc.Architecture)
			}
			if gc.TieEmbeddings != hf.cfg.TieEmbeddings || gc.HeadDim != hf.cfg.HeadDim || gc.NumKVHeads != hf.cfg.NumKVHeads || gc.AttentionBias != hf.cfg.AttentionBias {
				t.Errorf("config from GGUF %+v\nfrom HF %+v", *gc, *hf.cfg)
			}
			sh, sg := hf.NewSequence(0), g.NewSequence(0)
			lh, err := hf.Prefill(sh, testPrompt)
			if err != nil {
				t.Fatal(err)
			}
			lg, err := g.Prefill(sg, testPrompt)
			if err != nil {
				t.Fatal(err)
			}
			for step := range 16 {
				for i := range lh {
					if d := math.Abs(float64(lh[i] - lg[i])); d > 1e-4*(1+math.Abs(float64(lh[i]))) {
						t.Fatalf("step %d logit %d: HF %g, GGUF %g", step, i, lh[i], lg[i])
					}
				}
				id := argmax(lh)
				lh, _ = hf.Decode(sh, id)
				lg, _ = g.Decode(sg, id)
			}
		})
	}
}

// TestLoadMmapOrResident: a checkpoint read into memory (the default) and one mapped from
// the page cache (Options.Mmap) give the same logits bit for bit, from an HF folder and
// from a GGUF file.
func TestLoadMmapOrResident(t *testing.T) {
	name := "llama-gqa-tied"
	cfg, err := ParseConfig([]byte(testConfigs[name]))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := RandomWeights(cfg, 7, tensor.BF16)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(testConfigs[name]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ws, nil); err != nil {
		t.Fatal(err)
	}
	gg := filepath.Join(t.TempDir(), "m.gguf")
	toGGUF(t, cfg, ws, gg)
	for _, path := range []string{dir, gg} {
		var logits [2][]float32
		for i, mmap := range []bool{false, true} {
			m, err := Load(path, Options{Threads: 2, Mmap: mmap})
			if err != nil {
				t.Fatalf("%s (mmap %v): %v", path, mmap, err)
			}
			l, err := m.Prefill(m.NewSequence(0), testPrompt)
			if err != nil {
				t.Fatal(err)
			}
			logits[i] = slices.Clone(l)
			m.Close()
		}
		for i := range logits[0] {
			if math.Float32bits(logits[0][i]) != math.Float32bits(logits[1][i]) {
				t.Fatalf("%s: logit %d = %v read into memory, %v mapped", path, i, logits[0][i], logits[1][i])
			}
		}
	}
}
