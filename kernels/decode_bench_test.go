package kernels

import (
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/tokenwise/tokenwise/internal/hugemem"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// BenchmarkDecodeF16Qwen3: the weight products of one decode step of Qwen3-0.6B at f16
// (28 layers of fused Q/K/V, output projection, fused gate/up and down, then the tied
// 151,936-row LM head: 1.19 GB) in the model's call order, against one matrix of the same
// bytes streamed in one call: how much streaming rate the step's ~140 medium calls lose.
// MB/s is weight bytes per second.
//
//	go test ./kernels -run '^$' -bench DecodeF16Qwen3 -benchtime 10x
func BenchmarkDecodeF16Qwen3(b *testing.B) {
	const hidden, q, kv, inter, layers, vocab = 1024, 2048, 1024, 3072, 28, 151936
	rng := rand.New(rand.NewPCG(3, 4))
	var arena []byte // BENCH_THP=1: the weights in huge-page memory, as model.Load holds them
	if os.Getenv("BENCH_THP") != "" {
		var err error
		if arena, err = hugemem.Alloc(1300 << 20); err != nil {
			b.Fatal(err)
		}
		defer hugemem.Free(arena)
	}
	mat := func(rows, cols int) Mat {
		var data []byte
		if arena != nil && len(arena) >= 2*rows*cols {
			data, arena = arena[:2*rows*cols:2*rows*cols], arena[2*rows*cols:]
		} else {
			data = make([]byte, 2*rows*cols)
		}
		for i := 0; i < len(data); i += 2 {
			h := tensor.F32ToF16(float32(rng.NormFloat64()))
			data[i], data[i+1] = byte(h), byte(h>>8)
		}
		m, err := NewMat(tensor.F16, rows, cols, data)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	type layer struct{ q, k, v, o, gate, up, down Mat }
	ls := make([]layer, layers)
	total := 0
	for i := range ls {
		ls[i] = layer{mat(q, hidden), mat(kv, hidden), mat(kv, hidden), mat(hidden, q), mat(inter, hidden), mat(inter, hidden), mat(hidden, inter)}
		total += 2 * hidden * (2*q + 2*kv + 3*inter)
	}
	head := mat(vocab, hidden)
	total += 2 * vocab * hidden
	p := NewPool(2)
	defer p.Close()
	s := NewScratch(p.Threads())
	x := make([]float32, inter)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	out := make([]float32, vocab)
	o1, o2, o3 := make([]float32, inter), make([]float32, inter), make([]float32, inter)
	step := func(b *testing.B) {
		b.SetBytes(int64(total))
		for b.Loop() {
			for i := range ls {
				l := &ls[i]
				MatMulMany(p, []Product{{W: &l.q, Out: o1[:q]}, {W: &l.k, Out: o2[:kv]}, {W: &l.v, Out: o3[:kv]}}, x[:hidden], 1, s)
				MatVec(p, o1[:hidden], &l.o, x[:q], s)
				MatMulMany(p, []Product{{W: &l.gate, Out: o1}, {W: &l.up, Out: o2}}, x[:hidden], 1, s)
				MatVec(p, o1[:hidden], &l.down, x[:inter], s)
			}
			MatVec(p, out, &head, x[:hidden], s)
		}
	}
	b.Run("step", step)
	// The same step with the batch-invariant mode on (the batched tiles' arithmetic) and
	// off (ggml_vec_dot_f16's), alternated in one process: what the mode costs decode.
	for _, m := range []struct {
		name string
		on   bool
	}{{"invariant", true}, {"ggml-order", false}, {"invariant", true}, {"ggml-order", false}} {
		b.Run("step-"+m.name, func(b *testing.B) {
			defer SetBatchInvariant(SetBatchInvariant(m.on))
			step(b)
		})
	}
	big := Mat{}
	b.Run("one-call", func(b *testing.B) {
		if big.Data == nil {
			big = mat(total/(2*hidden), hidden)
		}
		b.SetBytes(int64(len(big.Data)))
		out := make([]float32, big.Rows)
		for b.Loop() {
			MatVec(p, out, &big, x[:hidden], s)
		}
	})
}

// BenchmarkDecodeKQuantStream: one k-quant matrix of about 1.2 GB (random blocks with sane
// scales) times one token, two workers, in one call: the most a decode step's products can
// stream in that dtype here, to set beside `tokenwise calibrate`'s read probe and the
// model's decode bandwidth (bench's decode_gb_s). MB/s is weight bytes per second.
//
//	go test ./kernels -run '^$' -bench DecodeKQuantStream -benchtime 20x
func BenchmarkDecodeKQuantStream(b *testing.B) {
	for _, dt := range []tensor.DType{tensor.Q4_K, tensor.Q6_K} {
		for _, cols := range []int{4096, 1024} {
			b.Run(fmt.Sprintf("%v/cols=%d", dt, cols), func(b *testing.B) {
				bytesPerRow, _ := dt.BytesFor(cols)
				rows := (1200 << 20) / bytesPerRow
				data := make([]byte, rows*bytesPerRow)
				rng := rand.New(rand.NewPCG(5, 6))
				for i := 0; i+8 <= len(data); i += 8 {
					v := rng.Uint64()
					for k := range 8 {
						data[i+k] = byte(v >> (8 * k))
					}
				}
				bb, _ := dt.BytesFor(256)
				one := tensor.F32ToF16(1e-3)
				for o := 0; o < len(data); o += bb { // finite block scales
					switch dt {
					case tensor.Q6_K:
						data[o+bb-2], data[o+bb-1] = byte(one), byte(one>>8)
					default:
						data[o], data[o+1], data[o+2], data[o+3] = byte(one), byte(one>>8), byte(one), byte(one>>8)
					}
				}
				m, err := NewMat(dt, rows, cols, data)
				if err != nil {
					b.Fatal(err)
				}
				p := NewPool(2)
				defer p.Close()
				s := NewScratch(p.Threads())
				x := make([]float32, cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				out := make([]float32, rows)
				MatVec(p, out, &m, x, s)
				b.SetBytes(int64(len(data)))
				for b.Loop() {
					MatVec(p, out, &m, x, s)
				}
			})
		}
	}
}
