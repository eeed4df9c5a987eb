package train

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
)

// tinyConfig is a small shape of each architecture; GQA (4 heads, 2 KV heads) everywhere.
func tinyConfig(t *testing.T, arch string) *model.Config {
	t.Helper()
	cfg := &model.Config{
		Architecture: arch, VocabSize: 29, HiddenSize: 16, IntermediateSize: 24, NumLayers: 2,
		NumHeads: 4, NumKVHeads: 2, HeadDim: 4, MaxPositions: 64, RMSNormEps: 1e-6, RopeTheta: 10000,
		TieEmbeddings: true,
	}
	switch arch {
	case "qwen2":
		cfg.AttentionBias = true
	case "qwen3":
		cfg.HeadDim = 6 // set apart from hidden/heads, as Qwen3 does
		cfg.TieEmbeddings = false
	case "mistral":
		cfg.SlidingWindow = 3
		cfg.TieEmbeddings = false
	case "llama":
		cfg.RopeScaling = &model.RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// roughen replaces the small initial weights by larger random ones (and norm scales and
// biases away from 1 and 0), so that attention is far from uniform and every path of the
// gradient carries weight.
func roughen(n *Net, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	for _, s := range n.Specs {
		w := n.W[s.Off : s.Off+s.N]
		for i := range w {
			switch {
			case strings.HasSuffix(s.Name, ".bias"):
				w[i] = float32(0.2 * rng.NormFloat64())
			case len(s.Shape) == 1:
				w[i] = float32(1 + 0.3*rng.NormFloat64())
			default:
				w[i] = float32(rng.NormFloat64() / math.Sqrt(float64(s.Shape[1])) * 1.5)
			}
		}
	}
}

func randomIDs(rng *rand.Rand, n, vocab int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = rng.IntN(vocab)
	}
	return ids
}

// TestGradientCheck compares the analytic gradient of every tensor with central finite
// differences, in float64, for each architecture's block (GQA, RoPE with llama3 scaling,
// Qwen2 biases, Qwen3 q/k norms and untied head, Mistral's sliding window) and a loss mask.
func TestGradientCheck(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "mistral"} {
		t.Run(arch, func(t *testing.T) {
			cfg := tinyConfig(t, arch)
			net, err := New(cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			roughen(net, 2)
			w64 := make([]float64, len(net.W))
			for i, v := range net.W {
				w64[i] = float64(v)
			}
			c := &core[float64]{cfg: cfg, w: bind(cfg, net.Specs, w64), freqs: net.freqs}
			rng := rand.New(rand.NewPCG(3, 3))
			ids := randomIDs(rng, 9, cfg.VocabSize)
			mask := make([]bool, len(ids))
			for i := 4; i < len(ids); i++ { // a prompt of 4 tokens, then the completion
				mask[i] = true
			}
			g64 := make([]float64, len(w64))
			gw := bind(cfg, net.Specs, g64)
			var a acts[float64]
			loss, n, err := c.lossGrad(ids, mask, &gw, &a)
			if err != nil {
				t.Fatal(err)
			}
			if n != 5 {
				t.Fatalf("targets = %d, want 5", n)
			}
			lossAt := func() float64 {
				var b acts[float64]
				l, _, err := c.lossGrad(ids, mask, nil, &b)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			if l := lossAt(); math.Abs(l-loss) > 1e-12 {
				t.Fatalf("loss without gradient %v, with %v", l, loss)
			}
			const h = 1e-6
			checked := 0
			for _, s := range net.Specs {
				// Every element of small tensors, a sample of large ones.
				idx := make([]int, 0, 12)
				if s.N <= 12 {
					for i := range s.N {
						idx = append(idx, i)
					}
				} else {
					for range 12 {
						idx = append(idx, rng.IntN(s.N))
					}
				}
				if s.Name == "model.embed_tokens.weight" { // rows of tokens in the text
					d := cfg.HiddenSize
					idx = append(idx, ids[0]*d, ids[5]*d+3, ids[8]*d+d-1)
				}
				for _, i := range idx {
					p := s.Off + i
					orig := w64[p]
					w64[p] = orig + h
					lp := lossAt()
					w64[p] = orig - h
					lm := lossAt()
					w64[p] = orig
					num := (lp - lm) / (2 * h)
					ana := g64[p]
					if math.Abs(num-ana) > 1e-6+1e-5*math.Abs(num) {
						t.Errorf("%s[%d]: analytic %.9g, finite differences %.9g", s.Name, i, ana, num)
					}
					checked++
				}
			}
			// The check must not pass trivially: some gradients are far from zero.
			var big int
			for _, g := range g64 {
				if math.Abs(g) > 1e-3 {
					big++
				}
			}
			if big < len(g64)/10 {
				t.Fatalf("only %d of %d gradients above 1e-3", big, len(g64))
			}
			t.Logf("%s: %d weights checked, loss %.4f", arch, checked, loss)
		})
	}
}

// TestCheckpointLogitsMatchEngine saves a net, loads the folder with package model and
// compares the engine's prefill logits (last position) and decode logits with the trainer's
// forward pass.
func TestCheckpointLogitsMatchEngine(t *testing.T) {
	for _, arch := range []string{"llama", "qwen2", "qwen3", "mistral"} {
		t.Run(arch, func(t *testing.T) {
			cfg := tinyConfig(t, arch)
			cfg.BOS, cfg.EOS = []int{1}, []int{2}
			net, err := New(cfg, 5)
			if err != nil {
				t.Fatal(err)
			}
			roughen(net, 6)
			dir := t.TempDir()
			if err := net.Save(dir, tensor.F32, nil); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(dir, model.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if got := m.Config(); got.TieEmbeddings != cfg.TieEmbeddings || got.HeadDim != cfg.HeadDim || got.SlidingWindow != cfg.SlidingWindow {
				t.Fatalf("reloaded config %+v, saved %+v", got, cfg)
			}
			ids := randomIDs(rand.New(rand.NewPCG(7, 7)), 11, cfg.VocabSize)
			want, err := net.Logits(ids)
			if err != nil {
				t.Fatal(err)
			}
			seq := m.NewSequence(0)
			got, err := m.Prefill(seq, ids[:8])
			if err != nil {
				t.Fatal(err)
			}
			compareLogits(t, "prefill", got, want[7])
			for i := 8; i < len(ids); i++ {
				got, err := m.Decode(seq, ids[i])
				if err != nil {
					t.Fatal(err)
				}
				compareLogits(t, "decode", got, want[i])
			}
		})
	}
}

func compareLogits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	var scale float64
	for _, v := range want {
		scale = max(scale, math.Abs(float64(v)))
	}
	if scale < 0.1 {
		t.Fatalf("%s: logits too small to compare (max |logit| %g)", what, scale)
	}
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*scale {
			t.Fatalf("%s: logit %d: engine %g, trainer %g", what, i, got[i], want[i])
		}
	}
}

// patternData is a toy language with structure to learn: each sequence counts up from a
// random start modulo the vocabulary, with a repeated marker token every fourth position.
func patternData(n, length, vocab int, seed uint64) []Sequence {
	rng := rand.New(rand.NewPCG(seed, 9))
	out := make([]Sequence, n)
	for i := range out {
		ids := make([]int, length)
		x := rng.IntN(vocab - 1)
		for j := range ids {
			if j%4 == 3 {
				ids[j] = vocab - 1
				continue
			}
			ids[j] = x
			x = (x + 1) % (vocab - 1)
		}
		out[i] = Sequence{IDs: ids}
	}
	return out
}

// TestLossFalls trains a tiny llama on the toy language for a fixed run and checks that the
// loss falls well below its start and below the held-out start, and that a checkpoint
// written along the way loads.
func TestLossFalls(t *testing.T) {
	cfg := tinyConfig(t, "llama")
	cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim = 32, 64, 8
	net, err := New(cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	data := patternData(64, 24, cfg.VocabSize, 12)
	held := patternData(16, 24, cfg.VocabSize, 13)
	before, err := net.Loss(held, 2)
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	dir := t.TempDir()
	saved := 0
	stats, err := Run(net, data, Options{
		Steps: 120, Batch: 4, Accum: 2, LR: 1e-2, Threads: 2, Seed: 1, Log: &log, LogEvery: 40,
		CheckpointEvery: 60, Checkpoint: func(step int) error {
			saved++
			return net.Save(filepath.Join(dir, "ckpt"), tensor.BF16, nil)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	after, err := net.Loss(held, 2)
	if err != nil {
		t.Fatal(err)
	}
	first, last := stats[0].Loss, stats[len(stats)-1].Loss
	t.Logf("train loss %.3f -> %.3f, held-out %.3f -> %.3f\n%s", first, last, before, after, log.String())
	if math.Abs(first-math.Log(float64(cfg.VocabSize))) > 0.3 {
		t.Errorf("first loss %.3f, want near ln(vocab) = %.3f for a fresh net", first, math.Log(float64(cfg.VocabSize)))
	}
	if after > 0.5 || after > before/4 {
		t.Errorf("held-out loss %.3f -> %.3f: did not fall enough", before, after)
	}
	if saved != 2 {
		t.Errorf("%d checkpoints written, want 2", saved)
	}
	if !strings.Contains(log.String(), "tokens/s") || !strings.Contains(log.String(), "step 120/120") {
		t.Errorf("progress log lacks loss/tokens/s lines:\n%s", log.String())
	}
	if _, err := model.Load(filepath.Join(dir, "ckpt"), model.Options{Threads: 1}); err != nil {
		t.Fatalf("bf16 checkpoint: %v", err)
	}
}

// TestAccumulationAndThreads: one step's gradient is the same whether the sequences come as
// one micro-batch or several, on one worker or two; frozen tensors do not move.
func TestAccumulationAndThreads(t *testing.T) {
	cfg := tinyConfig(t, "qwen3")
	net, err := New(cfg, 21)
	if err != nil {
		t.Fatal(err)
	}
	roughen(net, 22)
	data := patternData(6, 10, cfg.VocabSize, 23)
	data[1].Mask = make([]bool, 10)
	data[1].Mask[7] = true
	grad := func(accum, threads int) ([]float32, float64) {
		tr, err := NewTrainer(net, Options{Steps: 1, Accum: accum, Threads: threads})
		if err != nil {
			t.Fatal(err)
		}
		loss, _, _, err := tr.gradient(data)
		if err != nil {
			t.Fatal(err)
		}
		return tr.grad, loss
	}
	g1, l1 := grad(1, 1)
	for _, c := range [][2]int{{3, 1}, {2, 2}, {1, 2}} {
		g, l := grad(c[0], c[1])
		if math.Abs(l-l1) > 1e-6 {
			t.Errorf("accum %d threads %d: loss %v, want %v", c[0], c[1], l, l1)
		}
		for i := range g {
			if math.Abs(float64(g[i]-g1[i])) > 1e-6+1e-4*math.Abs(float64(g1[i])) {
				t.Fatalf("accum %d threads %d: grad[%d] %v, want %v", c[0], c[1], i, g[i], g1[i])
			}
		}
	}
	before := append([]float32(nil), net.W...)
	tr, err := NewTrainer(net, Options{Steps: 1, Trainable: func(name string) bool { return strings.Contains(name, "layers.1.") }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Step(data); err != nil {
		t.Fatal(err)
	}
	for _, s := range net.Specs {
		moved := false
		for i := s.Off; i < s.Off+s.N; i++ {
			moved = moved || net.W[i] != before[i]
		}
		if want := strings.Contains(s.Name, "layers.1."); moved != want {
			t.Errorf("%s: moved = %v, want %v", s.Name, moved, want)
		}
	}
}

func TestSchedule(t *testing.T) {
	o := Options{Steps: 100, LR: 1, MinLR: 0.1, Warmup: 10}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		step int
		want float64
	}{{0, 0.1}, {9, 1}, {10, 1}, {99, 0.1}, {(10 + 99) / 2, 0.55}} {
		if got := o.Schedule(c.step); math.Abs(got-c.want) > 0.01 {
			t.Errorf("lr(%d) = %v, want %v", c.step, got, c.want)
		}
	}
}

// The trainer refuses a mixture of experts with an error that says so, rather than
// training the dense MLP it does not have.
func TestRefusesMoE(t *testing.T) {
	for _, js := range []string{
		`{"model_type":"qwen3_moe","vocab_size":64,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":4,
			"max_position_embeddings":64,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":16}`,
		`{"model_type":"mixtral","vocab_size":64,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":4,
			"max_position_embeddings":64,"num_local_experts":4,"num_experts_per_tok":2}`,
	} {
		cfg, err := model.ParseConfig([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := New(cfg, 1); err == nil || !strings.Contains(err.Error(), "mixture of experts") {
			t.Errorf("%s: New = %v, want an error saying it is a mixture of experts", cfg.Architecture, err)
		}
	}
}
