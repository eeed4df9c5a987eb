package model

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/kernels"

	"github.com/tokenwise/tokenwise/tensor"
)

// memSource serves tensors from memory, so the forward pass is tested apart from the file
// readers.
type memSource map[string]tensor.Info

func (m memSource) Tensor(name string) (tensor.Info, bool) { t, ok := m[name]; return t, ok }

func newMemSource(ts []tensor.Info) memSource {
	m := memSource{}
	for _, t := range ts {
		m[t.Name] = t
	}
	return m
}

// Small shapes that exercise each architecture's features: odd vocabularies, GQA, MQA and
// MHA, tied and untied heads, both RoPE scalings, a sliding window shorter than the test
// sequences, q/k/v biases, and Qwen3's head_dim ≠ hidden/heads.
var testConfigs = map[string]string{
	"llama-gqa-tied": `{"model_type":"llama","vocab_size":101,"hidden_size":48,"intermediate_size":80,"num_hidden_layers":2,
		"num_attention_heads":6,"num_key_value_heads":2,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":10000,
		"tie_word_embeddings":true,"bos_token_id":1,"eos_token_id":2}`,
	"llama3-scaled-untied": `{"model_type":"llama","vocab_size":97,"hidden_size":32,"intermediate_size":72,"num_hidden_layers":3,
		"num_attention_heads":4,"num_key_value_heads":4,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":500000,
		"rope_scaling":{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":16},
		"tie_word_embeddings":false,"eos_token_id":[2,3]}`,
	"llama-linear": `{"model_type":"llama","vocab_size":64,"hidden_size":32,"intermediate_size":48,"num_hidden_layers":2,
		"num_attention_heads":2,"num_key_value_heads":1,"max_position_embeddings":96,"rms_norm_eps":1e-6,"rope_theta":10000,
		"rope_scaling":{"type":"linear","factor":2.5},"tie_word_embeddings":false}`,
	"mistral-window": `{"model_type":"mistral","vocab_size":90,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":1000000,
		"sliding_window":6,"tie_word_embeddings":false}`,
	"qwen2-bias-mqa": `{"model_type":"qwen2","vocab_size":103,"hidden_size":40,"intermediate_size":56,"num_hidden_layers":2,
		"num_attention_heads":5,"num_key_value_heads":1,"max_position_embeddings":128,"rms_norm_eps":1e-6,"rope_theta":1000000,
		"sliding_window":32768,"use_sliding_window":false,"tie_word_embeddings":true}`,
	"qwen3-headdim": `{"model_type":"qwen3","vocab_size":99,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"head_dim":12,"max_position_embeddings":128,"rms_norm_eps":1e-6,
		"rope_theta":1000000,"tie_word_embeddings":true,"attention_bias":false}`,
	// Mixtures of experts: more experts than a short pass's tokens pick, so some experts get
	// several tokens, some one, some none; Qwen3-MoE with and without norm_topk_prob (its
	// config class's default is False), Mixtral (which always renormalizes) with a tied head.
	"qwen3moe-experts": `{"model_type":"qwen3_moe","vocab_size":95,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"head_dim":12,"max_position_embeddings":128,"rms_norm_eps":1e-6,
		"rope_theta":1000000,"tie_word_embeddings":false,"num_experts":12,"num_experts_per_tok":3,"moe_intermediate_size":24,
		"norm_topk_prob":true}`,
	"qwen3moe-unnormed": `{"model_type":"qwen3_moe","vocab_size":64,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"head_dim":8,"max_position_embeddings":128,"rms_norm_eps":1e-6,
		"rope_theta":1000000,"tie_word_embeddings":true,"num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":16}`,
	"mixtral-experts": `{"model_type":"mixtral","vocab_size":93,"hidden_size":32,"intermediate_size":40,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":128,"rms_norm_eps":1e-5,"rope_theta":1000000,
		"tie_word_embeddings":true,"num_local_experts":6,"num_experts_per_tok":2}`,
}

func testModel(t *testing.T, name string, dt tensor.DType, threads int) (*Model, *refModel, []tensor.Info) {
	t.Helper()
	return testModelOpts(t, name, dt, Options{Threads: threads})
}

// testModelOpts is testModel with any Options.
func testModelOpts(t *testing.T, name string, dt tensor.DType, opts Options) (*Model, *refModel, []tensor.Info) {
	t.Helper()
	cfg, err := ParseConfig([]byte(testConfigs[name]))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	ws, err := RandomWeights(cfg, 42, dt)
	if err != nil {
		t.Fatal(err)
	}
	m, err := build(cfg, newMemSource(ws), hfNames, false, opts)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	t.Cleanup(func() { m.Close() })
	ref, err := newRef(cfg, ws)
	if err != nil {
		t.Fatal(err)
	}
	return m, ref, ws
}

func argmax[T float32 | float64](v []T) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// logitTol: the fast path computes in float32 (relative precision 6·10⁻⁸) through a few
// layers of sums over at most a few hundred terms; its logits stay within ~10⁻⁵ of the
// float64 reference relative to their scale (measured: ≤ 8·10⁻⁷ on these shapes). A wrong
// index, position or scale moves them by O(1).
const logitTol = 1e-5

var maxSeen float64

// activationTol: with f16/bf16 weights both sides round each product's input to that format,
// and an activation that lands on the other side of a rounding boundary in float32 than in
// float64 moves by one unit in the last place: logits then differ by up to about that unit
// relative to their scale (measured: 1.6·10⁻⁴ for f16, 1.1·10⁻³ for bf16).
var activationTol = map[tensor.DType]float64{tensor.F32: logitTol, tensor.F16: 0x1p-11, tensor.BF16: 0x1p-8}

func closeLogits(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	scale := 1.0
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	var worst float64
	for i := range want {
		worst = max(worst, math.Abs(float64(got[i])-want[i]))
	}
	if testing.Verbose() && worst/scale > maxSeen {
		maxSeen = worst / scale
		t.Logf("%s: worst relative logit error so far %.2g", what, maxSeen)
	}
	if worst > tol*scale {
		t.Fatalf("%s: logits differ by up to %g (scale %g, tolerance %g)", what, worst, scale, tol*scale)
	}
}

var testPrompt = []int{5, 17, 3, 42, 8, 11, 29, 30, 1}

// followReference prefills prompt into a new sequence of m, then decodes steps greedy tokens:
// after the prefill and every step the logits must be within tol of the float64 reference
// fed the same tokens, and both must pick the same next token. what prefixes the failures.
func followReference(t *testing.T, m *Model, ref *refModel, prompt []int, steps int, tol float64, what string) *Sequence {
	t.Helper()
	s := m.NewSequence(0)
	logits, err := m.Prefill(s, prompt)
	if err != nil {
		t.Fatal(err)
	}
	var want []float64
	for _, id := range prompt {
		want = ref.step(id)
	}
	closeLogits(t, what+"prefill", logits, want, tol)
	for step := range steps {
		tok, refTok := argmax(logits), argmax(want)
		if tok != refTok {
			t.Fatalf("%sstep %d: greedy token %d, reference %d", what, step, tok, refTok)
		}
		if logits, err = m.Decode(s, tok); err != nil {
			t.Fatal(err)
		}
		want = ref.step(tok)
		closeLogits(t, fmt.Sprintf("%sdecode step %d", what, step), logits, want, tol)
	}
	return s
}

// TestForwardMatchesReference: prefill, then 32 greedy decode steps, against the float64
// reference fed the same tokens one by one.
func TestForwardMatchesReference(t *testing.T) {
	for name := range testConfigs {
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
			for _, threads := range []int{1, 3} {
				if dt != tensor.F32 && threads != 1 {
					continue
				}
				t.Run(fmt.Sprintf("%s/%v/threads=%d", name, dt, threads), func(t *testing.T) {
					m, ref, _ := testModel(t, name, dt, threads)
					s := followReference(t, m, ref, testPrompt, 32, activationTol[dt], "")
					if s.Len() != len(testPrompt)+32 {
						t.Fatalf("Len %d", s.Len())
					}
				})
			}
		}
	}
}

// kvF16Tol: an f16 KV cache rounds q, every key and value, and the attention accumulator
// after each position to half precision (relative 2⁻¹¹ each, kernels.FlashF16), as
// llama.cpp's default cache does; through these few layers the logits then stay within a
// few such units of the float64 reference, relative to their scale (measured: 3.6·10⁻⁴
// on these shapes). 2⁻⁹ allows five times that and still catches a wrong position or head, which
// moves logits by O(1).
const kvF16Tol = 0x1p-9

// TestF16KVMatchesReference: with an f16 KV cache, prefill and 32 greedy decode steps stay
// within kvF16Tol of the float64 reference (which keeps keys and values exact) and give
// its greedy tokens.
func TestF16KVMatchesReference(t *testing.T) {
	for name := range testConfigs {
		for _, threads := range []int{1, 3} {
			t.Run(fmt.Sprintf("%s/threads=%d", name, threads), func(t *testing.T) {
				m, ref, _ := testModelOpts(t, name, tensor.F32, Options{Threads: threads, KVCache: tensor.F16})
				if got, want := m.KVBytesPerToken(), KVBytesPerToken(m.Config())/2; got != want {
					t.Fatalf("KVBytesPerToken %d with an f16 cache, want %d", got, want)
				}
				followReference(t, m, ref, testPrompt, 32, kvF16Tol, "f16 KV ")
			})
		}
	}
}

// TestF16KVTiledMatchesReference: a prefill of kernels.AttnTile or more tokens, which runs
// the tiled attention (float32 queries and accumulator) on heads whose size allows it, and
// the decode steps after it stay within kvF16Tol of the float64 reference.
func TestF16KVTiledMatchesReference(t *testing.T) {
	tiled := 0
	for name := range testConfigs {
		t.Run(name, func(t *testing.T) {
			m, ref, _ := testModelOpts(t, name, tensor.F32, Options{Threads: 2, KVCache: tensor.F16})
			prompt := longPrompt(kernels.AttnTile + 3)
			if kernels.TiledAttnOK(m.Config().HeadDim) {
				tiled++
			}
			followReference(t, m, ref, prompt, 8, kvF16Tol, "tiled f16 KV ")
		})
	}
	if tiled == 0 {
		t.Fatal("no test shape has a head size the tiled attention serves")
	}
}

// TestPrefillEqualsDecode: one batched prefill (also split in two) gives the same logits and
// greedy continuation as feeding the prompt token by token with Decode.
func TestPrefillEqualsDecode(t *testing.T) {
	for name := range testConfigs {
		t.Run(name, func(t *testing.T) {
			m, _, _ := testModel(t, name, tensor.F32, 2)
			greedy := func(s *Sequence, logits []float32) ([]int, []float32) {
				var ids []int
				for range 32 {
					id := argmax(logits)
					ids = append(ids, id)
					var err error
					if logits, err = m.Decode(s, id); err != nil {
						t.Fatal(err)
					}
				}
				return ids, logits
			}
			a := m.NewSequence(0)
			la, err := m.Prefill(a, testPrompt)
			if err != nil {
				t.Fatal(err)
			}
			b := m.NewSequence(0)
			var lb []float32
			for _, id := range testPrompt {
				if lb, err = m.Decode(b, id); err != nil {
					t.Fatal(err)
				}
			}
			c := m.NewSequence(0)
			if _, err := m.Prefill(c, testPrompt[:4]); err != nil {
				t.Fatal(err)
			}
			lc, err := m.Prefill(c, testPrompt[4:])
			if err != nil {
				t.Fatal(err)
			}
			// The same prompt in passes of at most 4 tokens.
			m.chunk = 4
			d := m.NewSequence(0)
			ld, err := m.Prefill(d, testPrompt)
			m.chunk = prefillChunk
			if err != nil {
				t.Fatal(err)
			}
			for i := range la {
				if d := math.Abs(float64(la[i] - ld[i])); d > 1e-4*(1+math.Abs(float64(la[i]))) {
					t.Fatalf("logit %d: prefill %g, prefill in chunks of 4 %g", i, la[i], ld[i])
				}
				if d := math.Abs(float64(la[i] - lb[i])); d > 1e-4*(1+math.Abs(float64(la[i]))) {
					t.Fatalf("logit %d: prefill %g, decode %g", i, la[i], lb[i])
				}
				if d := math.Abs(float64(la[i] - lc[i])); d > 1e-4*(1+math.Abs(float64(la[i]))) {
					t.Fatalf("logit %d: prefill %g, split prefill %g", i, la[i], lc[i])
				}
			}
			ga, _ := greedy(a, la)
			gb, _ := greedy(b, lb)
			gc, _ := greedy(c, lc)
			if fmt.Sprint(ga) != fmt.Sprint(gb) || fmt.Sprint(ga) != fmt.Sprint(gc) {
				t.Fatalf("greedy after prefill %v\nafter decode %v\nafter split prefill %v", ga, gb, gc)
			}
			// Reset reuses the cache from the start.
			a.Reset()
			lr, err := m.Prefill(a, testPrompt)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(lr) != fmt.Sprint(la) {
				t.Fatal("logits after Reset differ")
			}
		})
	}
}

// TestRandomWeightsGap measures how far greedy decisions are from ties: the gap between the
// top two logits, against how much the logits move when the same weights are rounded to f16
// (what a parity test against another engine on an f16 export must survive).
func TestRandomWeightsGap(t *testing.T) {
	for _, tied := range []bool{true, false} {
		name := fmt.Sprintf("hidden 256, tied=%v", tied)
		cfg, err := ParseConfig([]byte(fmt.Sprintf(`{"model_type":"llama","vocab_size":3001,"hidden_size":256,"intermediate_size":512,
			"num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":256,"rms_norm_eps":1e-5,
			"rope_theta":100000,"tie_word_embeddings":%v}`, tied)))
		if err != nil {
			t.Fatal(err)
		}
		models := map[tensor.DType]*Model{}
		for _, dt := range []tensor.DType{tensor.F32, tensor.F16} {
			ws, err := RandomWeights(cfg, 3, dt)
			if err != nil {
				t.Fatal(err)
			}
			if models[dt], err = build(cfg, newMemSource(ws), hfNames, false, Options{Threads: 2}); err != nil {
				t.Fatal(err)
			}
			defer models[dt].Close()
		}
		m32, m16 := models[tensor.F32], models[tensor.F16]
		s32, s16 := m32.NewSequence(0), m16.NewSequence(0)
		l32, _ := m32.Prefill(s32, testPrompt)
		l16, _ := m16.Prefill(s16, testPrompt)
		var gaps []float64
		var drift float64
		repeats, prev := 0, testPrompt[len(testPrompt)-1]
		for range 64 {
			top := argmax(l32)
			if top == prev {
				repeats++
			}
			prev = top
			second := -1
			for i, v := range l32 {
				if i != top && (second < 0 || v > l32[second]) {
					second = i
				}
			}
			gaps = append(gaps, float64(l32[top]-l32[second]))
			for i := range l32 {
				drift = max(drift, math.Abs(float64(l32[i]-l16[i])))
			}
			l32, _ = m32.Decode(s32, top)
			l16, _ = m16.Decode(s16, top)
		}
		minGap, sum := math.Inf(1), 0.0
		for _, g := range gaps {
			minGap = min(minGap, g)
			sum += g
		}
		t.Logf("%s: top-1 minus top-2 logit over 64 steps: mean %.3f, min %.3f; f16 weights move logits by at most %.4f",
			name, sum/float64(len(gaps)), minGap, drift)
		if repeats > 0 {
			t.Errorf("%s: greedy decoding repeated the previous token at %d of 64 steps", name, repeats)
		}
		if minGap < 10*drift {
			t.Errorf("%s: smallest top-1/top-2 gap %.4f is within 10× the f16 drift %.4f: greedy parity would be fragile", name, minGap, drift)
		}
	}
}

type errCase struct {
	name string
	edit func(memSource)
	want string
}

func TestLoadErrors(t *testing.T) {
	cfg, err := ParseConfig([]byte(testConfigs["qwen2-bias-mqa"]))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := RandomWeights(cfg, 1, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	cases := []errCase{
		{"missing", func(m memSource) { delete(m, "model.layers.1.mlp.up_proj.weight") }, `"model.layers.1.mlp.up_proj.weight": missing`},
		{"missing bias", func(m memSource) { delete(m, "model.layers.0.self_attn.k_proj.bias") }, `"model.layers.0.self_attn.k_proj.bias": missing`},
		{"dtype", func(m memSource) {
			t := m["model.layers.0.mlp.down_proj.weight"]
			t.DType = tensor.I32
			m[t.Name] = t
		}, "not supported"},
	}
	for _, c := range cases {
		src := newMemSource(ws)
		c.edit(src)
		_, err := build(cfg, src, hfNames, false, Options{Threads: 1})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	// A transposed k_proj: the error names both shapes.
	src := newMemSource(ws)
	k := src["model.layers.0.self_attn.k_proj.weight"]
	k.Shape = []int{k.Shape[1], k.Shape[0]}
	src[k.Name] = k
	if _, err := build(cfg, src, hfNames, false, Options{Threads: 1}); err == nil || !strings.Contains(err.Error(), "config wants [8 40]") {
		t.Errorf("k_proj transposed: %v", err)
	}
}

func TestRunErrors(t *testing.T) {
	m, _, _ := testModel(t, "llama-gqa-tied", tensor.F32, 1)
	s := m.NewSequence(10)
	if _, err := m.Prefill(s, make([]int, 11)); err == nil || !strings.Contains(err.Error(), "exceed the context") {
		t.Errorf("prompt longer than the sequence: %v", err)
	}
	if _, err := m.Prefill(s, nil); err == nil {
		t.Error("empty prompt accepted")
	}
	if _, err := m.Prefill(s, []int{1, 101}); err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
		t.Errorf("token out of range: %v", err)
	}
	if s.Len() != 0 {
		t.Errorf("failed calls changed the sequence: Len %d", s.Len())
	}
	if _, err := m.Prefill(s, make([]int, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Decode(s, 1); err == nil || !strings.Contains(err.Error(), "exceed the context") {
		t.Errorf("decode past the end: %v", err)
	}
	long := m.NewSequence(1 << 20) // capped at max_position_embeddings
	if long.MaxLen() != m.Config().MaxPositions {
		t.Errorf("MaxLen %d, want %d", long.MaxLen(), m.Config().MaxPositions)
	}
}

func TestParseConfigErrors(t *testing.T) {
	base := testConfigs["llama-gqa-tied"]
	for _, c := range []struct{ edit, want string }{
		{`"model_type":"llama"`, `"model_type":"gemma"`},
		{`"rope_theta":10000`, `"rope_theta":10000,"rope_scaling":{"type":"yarn","factor":4}`},
		{`"rope_theta":10000`, `"rope_theta":10000,"hidden_act":"gelu"`},
		{`"num_key_value_heads":2`, `"num_key_value_heads":4`},
		{`"num_hidden_layers":2`, `"num_hidden_layers":0`},
	} {
		js := strings.Replace(base, c.edit, c.want, 1)
		if _, err := ParseConfig([]byte(js)); err == nil {
			t.Errorf("%s: accepted", c.want)
		} else {
			t.Logf("%s: %v", c.want, err)
		}
	}
}

// TestBalancedCoversAndSplitsEvenly: balanced maps units one to one onto tokens × heads, and
// the two halves of the unit range (what two workers get) carry causal attention work
// within one token's worth (all heads) of each other; in plain order the later half would
// carry three times the earlier's.
func TestBalancedCoversAndSplitsEvenly(t *testing.T) {
	for _, n := range []int{1, 2, 5, 128, 513} {
		const heads = 3
		seen := make([]bool, n*heads)
		work := [2]int{}
		for i := range n * heads {
			tk, h := balanced(i, n, heads)
			if tk < 0 || tk >= n || h < 0 || h >= heads || seen[tk*heads+h] {
				t.Fatalf("n %d: unit %d -> token %d head %d (out of range or repeated)", n, i, tk, h)
			}
			seen[tk*heads+h] = true
			work[min(1, 2*i/(n*heads))] += tk + 1 // positions attended
		}
		if d := work[0] - work[1]; d < -heads*n || d > heads*n {
			t.Errorf("n %d: halves attend %d and %d positions", n, work[0], work[1])
		}
	}
}

// TestWarm: Warm runs a token through the model (quantized weights, on shapes the AMX
// arithmetic repacks where the CPU has it) and leaves nothing behind: a sequence's logits
// afterwards are the bits a model that was never warmed gives.
func TestWarm(t *testing.T) {
	for name := range isaConfigs {
		t.Run(name, func(t *testing.T) {
			warm, _ := isaModel(t, name, tensor.Q4_1, tensor.F32)
			cold, _ := isaModel(t, name, tensor.Q4_1, tensor.F32)
			if err := warm.Warm(); err != nil {
				t.Fatal(err)
			}
			a, b := warm.NewSequence(0), cold.NewSequence(0)
			la, err := warm.Prefill(a, testPrompt)
			if err != nil {
				t.Fatal(err)
			}
			lb, err := cold.Prefill(b, testPrompt)
			if err != nil {
				t.Fatal(err)
			}
			for i := range la {
				if math.Float32bits(la[i]) != math.Float32bits(lb[i]) {
					t.Fatalf("logit %d after Warm %g, without %g", i, la[i], lb[i])
				}
			}
		})
	}
}

// TestSharedAttentionPrompt: a prompt over the f32 cache, attended in units of consecutive
// queries that read each cache row once (sharedUnits, longer than sharedTokens), gives the
// bits of attending it head by head (sharedAttn off), at the last position and after
// further decode steps, for every test architecture; and the shared path is the one a
// prompt takes.
func TestSharedAttentionPrompt(t *testing.T) {
	prompt := make([]int, 37)
	for i := range prompt {
		prompt[i] = testPrompt[i%len(testPrompt)] + i%5
	}
	for name := range testConfigs {
		t.Run(name, func(t *testing.T) {
			m, _, _ := testModel(t, name, tensor.F32, 2)
			run := func(shared bool) ([]float32, bool) {
				defer func(v bool) { sharedAttn = v }(sharedAttn)
				sharedAttn = shared
				s := m.NewSequence(0)
				l, err := m.Prefill(s, prompt)
				if err != nil {
					t.Fatal(err)
				}
				long := m.run.shared != nil && m.run.sharedLong
				out := slices.Clone(l)
				for range 3 {
					if l, err = m.Decode(s, argmax(l)); err != nil {
						t.Fatal(err)
					}
					out = append(out, l...)
				}
				return out, long
			}
			want, _ := run(false)
			got, long := run(true)
			if m.cfg.SlidingWindow == 0 && !long {
				t.Fatal("the prompt was not attended in shared units")
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("logit %d: shared %g, head by head %g", i, got[i], want[i])
				}
			}
		})
	}
}
