package model

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// route picks the k most probable experts in descending order, with the softmax over all
// experts as weights, renormalized to sum 1 when norm; non-finite logits still give k
// distinct experts (weight 0) rather than an index of -1.
func TestRoute(t *testing.T) {
	logits := []float32{0.5, 2, -1, 2.5, 1}
	var z float64
	for _, v := range logits {
		z += math.Exp(float64(v))
	}
	p := func(e int) float64 { return math.Exp(float64(logits[e])) / z }
	for _, norm := range []bool{false, true} {
		m := &moe{k: 3, norm: norm}
		s := &moeScratch{logits: slices.Clone(logits), sel: make([]int32, 3), w: make([]float32, 3)}
		m.route(s, 1, len(logits))
		if !slices.Equal(s.sel, []int32{3, 1, 4}) {
			t.Fatalf("norm %v: experts %v, want [3 1 4]", norm, s.sel)
		}
		sum := p(3) + p(1) + p(4)
		for j, e := range s.sel {
			want := p(int(e))
			if norm {
				want /= sum
			}
			if math.Abs(float64(s.w[j])-want) > 1e-6 {
				t.Errorf("norm %v: weight of expert %d = %g, want %g", norm, e, s.w[j], want)
			}
		}
	}
	nan := float32(math.NaN())
	m := &moe{k: 2, norm: true}
	s := &moeScratch{logits: []float32{nan, nan, nan, nan}, sel: make([]int32, 2), w: make([]float32, 2)}
	m.route(s, 1, 4)
	if !slices.Equal(s.sel, []int32{0, 1}) || s.w[0] != 0 || s.w[1] != 0 {
		t.Errorf("NaN logits: experts %v weights %v, want [0 1] with weight 0", s.sel, s.w)
	}
}

// BenchmarkMoEExperts times one mixture-of-experts layer's experts over a pass of 64 tokens
// (64 experts of 1024×256, 8 per token, bf16, one thread): grouped, each expert that any
// token picked multiplying all its tokens in one product (what forward does), against per
// token, each token's 8 experts read for it alone (forward on one token at a time). Both
// do the same arithmetic; grouping reads each expert's weights once per pass. Measured on
// this project's AMD EPYC (2 cores shared, load ~25), -count 3 interleaved: grouped 63.7,
// 64.7, 67.1 ms; per token 98.7, 107.8, 124.7 ms (1.5-1.9×; 8 tokens per expert on average).
//
//	go test ./model -run '^$' -bench MoEExperts -count 3
func BenchmarkMoEExperts(b *testing.B) {
	const n = 64
	l, r, in, d := moeBenchLayer(b, 1, n)
	b.Run("grouped", func(b *testing.B) {
		for b.Loop() {
			r.n = n
			l.moe.forward(r, 0, in)
		}
	})
	b.Run("per-token", func(b *testing.B) {
		for b.Loop() {
			r.n = 1
			for t := range n {
				l.moe.forward(r, 0, in[t*d:(t+1)*d])
			}
		}
	})
}

// BenchmarkMoEBatchedDecode times one mixture-of-experts layer's experts for a batched decode
// step of 8 sequences (64 experts of 1024×256, 8 per token, bf16, two threads: 64 slots over
// ~42 experts): the workers taking whole experts (solo, what forward does with ≤ soloSlots
// tokens per expert) against each expert's products split across the workers (split), and a
// decode step of one token. Measured on this project's AMD EPYC (2 cores shared with a
// load average of ~25, so noisy), -count 3: solo 23.7, 35.8, 25.5 ms; split 26.1, 42.6,
// 56.8 ms; one token 2.2, 2.1, 5.9 ms.
//
//	go test ./model -run '^$' -bench MoEBatchedDecode -count 3
func BenchmarkMoEBatchedDecode(b *testing.B) {
	const n = 8
	l, r, in, d := moeBenchLayer(b, 2, n)
	prev := soloSlots
	defer func() { soloSlots = prev }()
	for _, c := range []struct {
		name string
		solo int
		n    int
	}{{"solo", prev, n}, {"split", 0, n}, {"one-token", prev, 1}} {
		b.Run(c.name, func(b *testing.B) {
			soloSlots = c.solo
			for b.Loop() {
				r.n = c.n
				l.moe.forward(r, 0, in[:c.n*d])
			}
		})
	}
}

// A checkpoint in transformers 5's fused expert layout (mlp.experts.gate_up_proj and
// mlp.experts.down_proj; Mixtral's block_sparse_moe renamed mlp) gives the logits of the
// same weights as per-expert tensors, bit for bit.
func TestFusedExpertLayout(t *testing.T) {
	for _, name := range []string{"qwen3moe-experts", "mixtral-experts"} {
		m, _, ws := testModel(t, name, tensor.BF16, 2)
		cfg := m.cfg
		byName := map[string]tensor.Info{}
		for _, w := range ws {
			byName[w.Name] = w
		}
		fused := memSource{}
		for _, w := range ws {
			fused[w.Name] = w
		}
		for i := range cfg.NumLayers {
			p := fmt.Sprintf("model.layers.%d.", i)
			gu := tensor.Info{Name: p + "mlp.experts.gate_up_proj", DType: tensor.BF16, Shape: []int{cfg.NumExperts, 2 * cfg.ExpertSize, cfg.HiddenSize}}
			dn := tensor.Info{Name: p + "mlp.experts.down_proj", DType: tensor.BF16, Shape: []int{cfg.NumExperts, cfg.HiddenSize, cfg.ExpertSize}}
			for e := range cfg.NumExperts {
				router, g, u, d, _ := cfg.Arch().ExpertTensorNames(i, e)
				gu.Data = append(append(gu.Data, byName[g].Data...), byName[u].Data...)
				dn.Data = append(dn.Data, byName[d].Data...)
				delete(fused, g)
				delete(fused, u)
				delete(fused, d)
				if e == 0 {
					r := byName[router]
					delete(fused, router)
					r.Name = p + "mlp.gate.weight"
					fused[r.Name] = r
				}
			}
			fused[gu.Name], fused[dn.Name] = gu, dn
		}
		f, err := build(cfg, fused, hfNames, false, Options{Threads: 2})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, err := m.Prefill(m.NewSequence(0), testPrompt)
		if err != nil {
			t.Fatal(err)
		}
		want = slices.Clone(want)
		got, err := f.Prefill(f.NewSequence(0), testPrompt)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: logit %d = %v fused, %v per expert", name, i, got[i], want[i])
			}
		}
		f.Close()
	}
}

// moeBenchLayer builds the benchmarks' mixture-of-experts layer (64 experts of 1024×256, 8
// per token, bf16) on threads, with a run and n tokens of input for it; d is the hidden size.
func moeBenchLayer(b *testing.B, threads, n int) (l *moeBlock, r *run, in []float32, d int) {
	js := `{"model_type":"qwen3_moe","vocab_size":64,"hidden_size":1024,"intermediate_size":64,"num_hidden_layers":1,
		"num_attention_heads":8,"num_key_value_heads":8,"max_position_embeddings":128,"num_experts":64,"num_experts_per_tok":8,
		"moe_intermediate_size":256,"norm_topk_prob":true}`
	cfg, err := ParseConfig([]byte(js))
	if err != nil {
		b.Fatal(err)
	}
	ws, err := RandomWeights(cfg, 1, tensor.BF16)
	if err != nil {
		b.Fatal(err)
	}
	m, err := build(cfg, newMemSource(ws), hfNames, false, Options{Threads: threads})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	d = cfg.HiddenSize
	in = make([]float32, n*d)
	for i := range in {
		in[i] = float32(math.Sin(float64(i)))
	}
	r = &run{m: m}
	r.mlpOut = make([]float32, n*d)
	return m.layers[0].(*moeBlock), r, in, d
}
