package engine

import (
	"math/rand/v2"
	"testing"
)

// Greedy decoding without penalties never allocates the sampling buffers; a sampler
// Reset to sampling params allocates them then and draws what a fresh one draws.
func TestSamplerBuffersOnDemand(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	lg := make([]float32, 1000)
	for i := range lg {
		lg[i] = float32(r.NormFloat64() * 2)
	}
	s := newSampler(t, SamplerParams{}, len(lg))
	s.SetPrompt([]int{1, 2, 3})
	for range 3 {
		ch, err := s.Sample(lg)
		if err != nil {
			t.Fatal(err)
		}
		s.Accept(ch.ID)
	}
	if s.prob != nil || s.cand != nil || s.stamp != nil {
		t.Fatalf("greedy sampler allocated buffers: prob %d, cand %d, stamp %d", len(s.prob), cap(s.cand), len(s.stamp))
	}
	p := SamplerParams{Temperature: 0.9, TopP: 0.95, RepeatPenalty: 1.2, PresencePenalty: 0.3, Seed: 11}
	if err := s.Reset(p); err != nil {
		t.Fatal(err)
	}
	fresh := newSampler(t, p, len(lg))
	for _, x := range []*Sampler{s, fresh} {
		x.SetPrompt([]int{4, 5, 6})
	}
	for step := range 20 {
		a, err := s.Sample(lg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := fresh.Sample(lg)
		if err != nil {
			t.Fatal(err)
		}
		if a.ID != b.ID {
			t.Fatalf("step %d: reset sampler drew %d, fresh sampler %d", step, a.ID, b.ID)
		}
		s.Accept(a.ID)
		fresh.Accept(b.ID)
	}
	if len(s.prob) != len(lg) || cap(s.cand) != len(lg) || len(s.stamp) != len(lg) {
		t.Fatalf("sampling buffers after sampling: prob %d, cand %d, stamp %d; want %d each", len(s.prob), cap(s.cand), len(s.stamp), len(lg))
	}
}
