package train

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/model"
)

// refGradient is the mean-loss gradient of seqs by the reference pass (core, pass.go) in
// float64, the pass TestGradientCheck holds to finite differences.
func refGradient(t *testing.T, net *Net, seqs []Sequence) ([]float64, float64) {
	t.Helper()
	w64 := make([]float64, len(net.W))
	for i, v := range net.W {
		w64[i] = float64(v)
	}
	c := &core[float64]{cfg: net.Cfg, w: bind(net.Cfg, net.Specs, w64), freqs: net.freqs}
	g := make([]float64, len(w64))
	gw := bind(net.Cfg, net.Specs, g)
	var a acts[float64]
	var loss float64
	n := 0
	for _, s := range seqs {
		l, k, err := c.lossGrad(s.IDs, s.Mask, &gw, &a)
		if err != nil {
			t.Fatal(err)
		}
		loss += l
		n += k
	}
	for i := range g {
		g[i] /= float64(n)
	}
	return g, loss / float64(n)
}

// TestFastMatchesReference holds the kernel pass (fast.go) to the reference pass: loss and
// every trainable tensor's gradient, for each architecture's tiny block and for a wider
// shape whose products run in the assembly tiles (head_dim 64, sequences past one
// 64-query attention stripe), with all tensors trainable and with frozen sets (frozen
// tensors must get exactly zero).
//
// Tolerance: the reference is float64; the kernel pass rounds every product and sum to
// float32 (2⁻²⁴ ≈ 6e-8 relative per operation) in another order (blocked, fused
// multiply-adds). A k-term dot product's rounding error is bounded by k·2⁻²⁴ of its
// absolute sum (and is typically √k times that); the deepest chain here is a few products
// of k ≤ 300 through two blocks' norms and softmaxes, about 1e-5 relative in the worst
// case. So each tensor's gradient must agree within 5e-5 of the tensor's largest
// gradient, ~15 times the worst seen (3.3e-6; the test logs it), and the loss within 1e-5
// relative. A wrong derivative is off by O(1) of the gradient.
func TestFastMatchesReference(t *testing.T) {
	type tc struct {
		name      string
		cfg       func(t *testing.T) *model.Config
		seqLen    int
		trainable func(string) bool
	}
	wide := func(t *testing.T) *model.Config {
		cfg := tinyConfig(t, "llama")
		cfg.RopeScaling = nil
		cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim = 96, 160, 3, 1, 64
		cfg.VocabSize, cfg.MaxPositions = 131, 256
		return cfg
	}
	var cases []tc
	for _, arch := range []string{"llama", "qwen2", "qwen3", "mistral"} {
		cases = append(cases, tc{arch, func(t *testing.T) *model.Config { return tinyConfig(t, arch) }, 13, nil})
	}
	cases = append(cases,
		tc{"wide", wide, 150, nil},
		tc{"wide/adaptivocab", wide, 150, adaptiVocab(2)},
		tc{"qwen3/layer1", func(t *testing.T) *model.Config { return tinyConfig(t, "qwen3") }, 13,
			func(n string) bool { return strings.Contains(n, "layers.1.") }},
		tc{"qwen3/head+norm", func(t *testing.T) *model.Config { return tinyConfig(t, "qwen3") }, 13,
			func(n string) bool { return n == "lm_head.weight" || n == "model.norm.weight" }},
		tc{"mistral/blocks", func(t *testing.T) *model.Config { return tinyConfig(t, "mistral") }, 13,
			func(n string) bool { return strings.Contains(n, "layers.") }},
	)
	// Several LM-head chunks per sequence (150 tokens: 48 + 48 + 48 + 5).
	defer func(c int) { headChunk = c }(headChunk)
	headChunk = 48
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg(t)
			net, err := New(cfg, 31)
			if err != nil {
				t.Fatal(err)
			}
			roughen(net, 32)
			rng := rand.New(rand.NewPCG(33, 34))
			seqs := []Sequence{{IDs: randomIDs(rng, c.seqLen, cfg.VocabSize)}, {IDs: randomIDs(rng, c.seqLen-4, cfg.VocabSize)}}
			seqs[1].Mask = make([]bool, len(seqs[1].IDs))
			for i := len(seqs[1].Mask) / 3; i < len(seqs[1].Mask); i++ {
				seqs[1].Mask[i] = true
			}
			ref, refLoss := refGradient(t, net, seqs)
			tr, err := NewTrainer(net, Options{Steps: 1, Threads: 2, Trainable: c.trainable})
			if err != nil {
				t.Fatal(err)
			}
			loss, _, _, err := tr.gradient(seqs)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(loss-refLoss) > 1e-5*math.Abs(refLoss) {
				t.Errorf("loss %.9g, reference %.9g", loss, refLoss)
			}
			worst := 0.0
			for i, s := range net.Specs {
				g, r := tr.grad[s.Off:s.Off+s.N], ref[s.Off:s.Off+s.N]
				if tr.frozen[i] {
					for j, v := range g {
						if v != 0 {
							t.Fatalf("%s (frozen): gradient[%d] = %g, want 0", s.Name, j, v)
						}
					}
					continue
				}
				var scale float64
				for _, v := range r {
					scale = max(scale, math.Abs(v))
				}
				if scale < 1e-6 {
					t.Fatalf("%s: reference gradient all but zero (max %g): nothing to compare", s.Name, scale)
				}
				for j := range g {
					d := math.Abs(float64(g[j])-r[j]) / scale
					worst = max(worst, d)
					if d > 5e-5 {
						t.Fatalf("%s[%d]: gradient %.7g, reference %.7g (max |g| %.3g)", s.Name, j, g[j], r[j], scale)
					}
				}
			}
			t.Logf("loss %.6f (reference %.6f), worst gradient difference %.2e of the tensor's max", loss, refLoss, worst)
		})
	}
}

// TestFastFiniteDifferences checks the kernel pass's gradient against central differences
// of its own loss, in float32 on the wide shape (the assembly tiles): a step of 1e-2 in a
// weight moves the loss by ~1e-3 of itself, well above float32's rounding of the loss
// (~1e-6 relative), and the curvature term is O(h²).
func TestFastFiniteDifferences(t *testing.T) {
	cfg := tinyConfig(t, "llama")
	cfg.RopeScaling = nil
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim = 64, 96, 2, 1, 32
	cfg.VocabSize, cfg.MaxPositions = 67, 128
	net, err := New(cfg, 41)
	if err != nil {
		t.Fatal(err)
	}
	roughen(net, 42)
	rng := rand.New(rand.NewPCG(43, 44))
	seqs := []Sequence{{IDs: randomIDs(rng, 80, cfg.VocabSize)}}
	tr, err := NewTrainer(net, Options{Steps: 1, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := tr.gradient(seqs); err != nil {
		t.Fatal(err)
	}
	lossAt := func() float64 {
		l, _, err := tr.pass.lossGrad(seqs[0].IDs, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		return l / float64(len(seqs[0].IDs)-1)
	}
	const h = 1e-2
	checked := 0
	for _, s := range net.Specs {
		for range 3 {
			i := s.Off + rng.IntN(s.N)
			if s.Name == "model.embed_tokens.weight" {
				i = s.Off + seqs[0].IDs[rng.IntN(80)]*cfg.HiddenSize + rng.IntN(cfg.HiddenSize)
			}
			orig := net.W[i]
			net.W[i] = orig + h
			lp := lossAt()
			net.W[i] = orig - h
			lm := lossAt()
			net.W[i] = orig
			num, ana := (lp-lm)/(2*h), float64(tr.grad[i])
			if math.Abs(num-ana) > 2e-4+0.03*math.Abs(num) {
				t.Errorf("%s[%d]: gradient %.6g, finite differences %.6g", s.Name, i-s.Off, ana, num)
			}
			checked++
		}
	}
	t.Logf("%d weights checked", checked)
}

// TestFastThreadsBitIdentical: the gradient has the same bits on one worker and three.
func TestFastThreadsBitIdentical(t *testing.T) {
	cfg := tinyConfig(t, "qwen3")
	cfg.HiddenSize, cfg.HeadDim, cfg.IntermediateSize = 64, 32, 80
	net, err := New(cfg, 51)
	if err != nil {
		t.Fatal(err)
	}
	roughen(net, 52)
	seqs := patternData(3, 40, cfg.VocabSize, 53)
	var first []float32
	for _, th := range []int{1, 3} {
		tr, err := NewTrainer(net, Options{Steps: 1, Threads: th})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := tr.gradient(seqs); err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = append([]float32(nil), tr.grad...)
			continue
		}
		for i := range first {
			if tr.grad[i] != first[i] {
				t.Fatalf("threads %d: grad[%d] = %v, one thread %v", th, i, tr.grad[i], first[i])
			}
		}
	}
}
