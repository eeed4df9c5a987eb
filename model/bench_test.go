package model

import (
	"os"
	"runtime"
	"testing"
)

// Benchmarks on a real checkpoint folder or GGUF file named by TOKENWISE_BENCH_MODEL, e.g.
//
//	tokenwise synth --config configs/smollm2-135m.json --dtype bf16 --out /tmp/smol-bf16
//	TOKENWISE_BENCH_MODEL=/tmp/smol-bf16 go test ./model -run '^$' -bench . -benchtime 64x -cpu 1,2
//
// -cpu sets the worker threads. Decode reports tokens/s and effective GB/s (weight bytes read
// per step × steps/s); prefill reports prompt tokens/s and GFLOP/s of the weight products.
func benchModel(b *testing.B) *Model {
	path := os.Getenv("TOKENWISE_BENCH_MODEL")
	if path == "" {
		b.Skip("TOKENWISE_BENCH_MODEL not set")
	}
	m, err := Load(path, Options{Threads: runtime.GOMAXPROCS(0)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

func BenchmarkDecode(b *testing.B) {
	m := benchModel(b)
	s := m.NewSequence(0)
	prompt := make([]int, 16)
	if _, err := m.Prefill(s, prompt); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if s.Len() == s.MaxLen() {
			s.Reset()
		}
		if _, err := m.Decode(s, i%m.Config().VocabSize); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/sec, "tok/s")
	b.ReportMetric(float64(m.DecodeBytes())*float64(b.N)/sec/1e9, "GB/s")
}

func BenchmarkPrefill128(b *testing.B) {
	m := benchModel(b)
	prompt := make([]int, 128)
	for i := range prompt {
		prompt[i] = (i * 7919) % m.Config().VocabSize
	}
	s := m.NewSequence(len(prompt))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.Reset()
		if _, err := m.Prefill(s, prompt); err != nil {
			b.Fatal(err)
		}
	}
	sec := b.Elapsed().Seconds()
	tok := float64(b.N * len(prompt))
	b.ReportMetric(tok/sec, "tok/s")
	// The LM head runs once per prefill (last position only); the layers once per token.
	layerFLOPs := float64(m.DecodeFLOPs() - 2*int64(m.head.Rows)*int64(m.head.Cols))
	b.ReportMetric((layerFLOPs*tok+float64(2*m.head.Rows*m.head.Cols)*float64(b.N))/sec/1e9, "GFLOP/s")
}
