package train

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/model"
)

// smolConfig is SmolLM2-135M's shape (configs/smollm2-135m.json): 30 layers, hidden 576,
// 9 heads / 3 KV heads of 64, intermediate 1536, vocabulary 49152, tied embeddings.
func smolConfig(b testing.TB) *model.Config {
	b.Helper()
	cfg, err := model.ReadConfig("../configs/smollm2-135m.json")
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// adaptiVocab is the set `tokenwise adapt` trains by default ("embed,head,first,last"):
// the (tied) embeddings and the first and last blocks.
func adaptiVocab(layers int) func(string) bool {
	last := fmt.Sprintf("model.layers.%d.", layers-1)
	return func(name string) bool {
		return strings.Contains(name, "model.embed_tokens.") || strings.Contains(name, "lm_head.") ||
			strings.Contains(name, "model.layers.0.") || strings.Contains(name, last)
	}
}

// BenchmarkTrainStep times optimizer steps on a SmolLM2-135M-shaped net: a batch of two
// 256-token sequences per step, on all CPUs, with every tensor trainable, with the
// AdaptiVocab set, and with the last block alone (the backward pass stops there). It
// reports training tokens/s (tokens through forward and backward).
//
//	go test ./train -run '^$' -bench TrainStep -benchtime 3x
func BenchmarkTrainStep(b *testing.B) {
	cfg := smolConfig(b)
	const seqLen, batch = 256, 2
	for _, c := range []struct {
		name      string
		trainable func(string) bool
	}{{"all", nil}, {"adaptivocab", adaptiVocab(cfg.NumLayers)},
		{"last", func(n string) bool { return strings.Contains(n, fmt.Sprintf("layers.%d.", cfg.NumLayers-1)) }}} {
		b.Run(c.name, func(b *testing.B) {
			net, err := New(cfg, 1)
			if err != nil {
				b.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 2))
			seqs := make([]Sequence, batch)
			for i := range seqs {
				seqs[i] = Sequence{IDs: randomIDs(rng, seqLen, cfg.VocabSize)}
			}
			tr, err := NewTrainer(net, Options{Steps: 1000, Batch: batch, Trainable: c.trainable, Threads: runtime.NumCPU()})
			if err != nil {
				b.Fatal(err)
			}
			// One step first: the moments, gradient and activations are touched (paged in)
			// once, outside the timing.
			if _, err := tr.Step(seqs); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := tr.Step(seqs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*batch*seqLen)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// BenchmarkLinear compares the two ways of a forward linear layer over a 256-token
// sequence at SmolLM2-135M's MLP shapes on two threads: kernels.MatMul (dot-product tiles)
// and fastPass.linear (transposes around GemmNN's broadcast tile), which the pass uses.
//
//	go test ./train -run '^$' -bench Linear -count 3
func BenchmarkLinear(b *testing.B) {
	const n = 256
	rng := rand.New(rand.NewPCG(7, 8))
	for _, sh := range [][2]int{{1536, 576}, {576, 1536}} {
		rows, cols := sh[0], sh[1]
		w, x, out := make([]float32, rows*cols), make([]float32, n*cols), make([]float32, n*rows)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		pool := kernels.NewPool(2)
		f := &fastPass{pool: pool, s: kernels.NewScratch(2)}
		m := kernels.F32Mat(rows, cols, w)
		for _, way := range []string{"matmul", "gemm"} {
			b.Run(fmt.Sprintf("%dx%d/%s", rows, cols, way), func(b *testing.B) {
				for range b.N {
					if way == "gemm" {
						f.linear(out, x, w, nil, n, rows, cols, false)
					} else {
						kernels.MatMul(pool, out, &m, x, n, f.s)
					}
				}
				b.ReportMetric(2*n*float64(rows*cols)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
		pool.Close()
	}
}
