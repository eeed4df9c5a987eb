package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

func newSampler(t *testing.T, p SamplerParams, vocab int) *Sampler {
	t.Helper()
	s, err := NewSampler(p, vocab)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func logits(probs ...float64) []float32 {
	out := make([]float32, len(probs))
	for i, p := range probs {
		out[i] = float32(math.Log(p))
	}
	return out
}

func TestGreedy(t *testing.T) {
	inf := float32(math.Inf(-1))
	cases := []struct {
		name   string
		logits []float32
		vocab  int
		ban    []int
		want   int
	}{
		{"argmax", []float32{0.1, 2, -1, 1.9}, 4, nil, 1},
		{"tie to lowest id", []float32{3, 1, 3, 3}, 4, nil, 0},
		{"padding rows ignored", []float32{0.1, 2, -1, 1.9, 100, 100}, 4, nil, 1},
		{"banned", []float32{0.1, 2, -1, 1.9}, 4, []int{1}, 3},
		{"negative and -Inf", []float32{inf, -5, -3, inf}, 4, nil, 2},
		{"near-tie", []float32{0.1, 2, -1, 2 - 1e-6}, 4, nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, temp := range []float32{0, 1e-30} { // below minTemperature is greedy too
				s := newSampler(t, SamplerParams{Temperature: temp}, c.vocab)
				if err := s.Ban(c.ban...); err != nil {
					t.Fatal(err)
				}
				before := slices.Clone(c.logits)
				ch, err := s.Sample(c.logits)
				if err != nil {
					t.Fatal(err)
				}
				if ch.ID != c.want {
					t.Errorf("temperature %g: got %d, want %d", temp, ch.ID, c.want)
				}
				if !slices.Equal(before, c.logits) {
					t.Error("Sample modified the caller's logits")
				}
			}
		})
	}
}

func TestSamplerErrors(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(-1))
	s := newSampler(t, SamplerParams{}, 3)
	if _, err := s.Sample([]float32{1, 2}); err == nil {
		t.Error("short logits: no error")
	}
	if _, err := s.Sample([]float32{1, nan, 2}); err == nil {
		t.Error("NaN logit: no error")
	}
	if _, err := s.Sample([]float32{inf, inf, inf}); err == nil {
		t.Error("all -Inf: no error")
	}
	if err := s.Ban(3); err == nil {
		t.Error("ban outside vocab: no error")
	}
	s.Ban(0, 1, 2)
	if _, err := s.Sample([]float32{1, 2, 3}); err == nil {
		t.Error("all banned: no error")
	}
	for _, p := range []SamplerParams{
		{Temperature: -1}, {TopK: -1}, {TopP: 1.5}, {MinP: -0.1}, {RepeatPenalty: -1},
		{PresencePenalty: 3}, {FrequencyPenalty: float32(math.NaN())}, {TopLogprobs: 21}, {RepeatLastN: -2},
	} {
		if _, err := NewSampler(p, 10); err == nil {
			t.Errorf("NewSampler(%+v): no error", p)
		}
	}
	if _, err := NewSampler(SamplerParams{}, 0); err == nil {
		t.Error("vocab 0: no error")
	}
}

// TestPenalties checks the penalized logits exactly.
func TestPenalties(t *testing.T) {
	cases := []struct {
		name   string
		p      SamplerParams
		prompt []int
		gen    []int
		in     []float32
		want   []float32
	}{
		{"repetition divides positive, multiplies negative, once per token",
			SamplerParams{RepeatPenalty: 2}, []int{0, 1, 1}, []int{0},
			[]float32{3, -1.5, 2, -1}, []float32{1.5, -3, 2, -1}},
		{"repetition window (llama.cpp last-n)",
			SamplerParams{RepeatPenalty: 2, RepeatLastN: 2}, []int{0, 1}, []int{2},
			[]float32{4, 4, 4, 4}, []float32{4, 2, 2, 4}},
		{"presence and frequency see generated tokens only",
			SamplerParams{PresencePenalty: 0.5, FrequencyPenalty: 0.25}, []int{3, 3}, []int{0, 1, 0, 0},
			[]float32{1, 1, 1, 1}, []float32{1 - 0.5 - 3*0.25, 1 - 0.5 - 0.25, 1, 1}},
		{"negative presence rewards",
			SamplerParams{PresencePenalty: -1}, nil, []int{2},
			[]float32{0, 0, 0, 0}, []float32{0, 0, 1, 0}},
		{"all combined",
			SamplerParams{RepeatPenalty: 1.25, PresencePenalty: 1, FrequencyPenalty: 1}, []int{1}, []int{2, 2},
			[]float32{1, 5, 5, -5}, []float32{1, 4, 5/1.25 - 1 - 2, -5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newSampler(t, c.p, len(c.in))
			s.SetPrompt(c.prompt)
			for _, id := range c.gen {
				s.Accept(id)
			}
			w := slices.Clone(c.in)
			s.applyPenalties(w)
			if !slices.Equal(w, c.want) {
				t.Errorf("got %v, want %v", w, c.want)
			}
		})
	}
}

// TestRepeatPenaltyChangesGreedy checks the penalty reaches Sample's choice.
func TestRepeatPenaltyChangesGreedy(t *testing.T) {
	s := newSampler(t, SamplerParams{RepeatPenalty: 2}, 3)
	s.SetPrompt([]int{0})
	ch, err := s.Sample([]float32{3, 1, 2.5}) // token 0 becomes 1.5
	if err != nil || ch.ID != 2 {
		t.Fatalf("got %d, %v; want 2", ch.ID, err)
	}
	s.Accept(2) // now 2 becomes 1.25 and 0 stays 1.5
	if ch, _ := s.Sample([]float32{3, 1, 2.5}); ch.ID != 0 {
		t.Fatalf("got %d; want 0", ch.ID)
	}
}

// sampleFreq draws n tokens with fresh history and returns the frequencies.
func sampleFreq(t *testing.T, p SamplerParams, lg []float32, n int) []float64 {
	t.Helper()
	s := newSampler(t, p, len(lg))
	counts := make([]float64, len(lg))
	for range n {
		ch, err := s.Sample(lg)
		if err != nil {
			t.Fatal(err)
		}
		counts[ch.ID]++
	}
	for i := range counts {
		counts[i] /= float64(n)
	}
	return counts
}

// TestSamplingDistributions draws 40,000 tokens per case with a fixed seed
// and requires every frequency within 5 standard deviations of the exact
// probability (zero where the token must be cut off).
func TestSamplingDistributions(t *testing.T) {
	base := logits(0.5, 0.3, 0.15, 0.05)
	sq := func(ps ...float64) []float64 { // p^2 normalized: temperature 0.5
		var z float64
		out := make([]float64, len(ps))
		for i, p := range ps {
			out[i] = p * p
			z += out[i]
		}
		for i := range out {
			out[i] /= z
		}
		return out
	}
	cases := []struct {
		name string
		p    SamplerParams
		want []float64
	}{
		{"temperature 1", SamplerParams{Temperature: 1, Seed: 1}, []float64{0.5, 0.3, 0.15, 0.05}},
		{"temperature 0.5", SamplerParams{Temperature: 0.5, Seed: 2}, sq(0.5, 0.3, 0.15, 0.05)},
		{"top-k 2", SamplerParams{Temperature: 1, TopK: 2, Seed: 3}, []float64{0.5 / 0.8, 0.3 / 0.8, 0, 0}},
		{"top-p 0.75", SamplerParams{Temperature: 1, TopP: 0.75, Seed: 4}, []float64{0.5 / 0.8, 0.3 / 0.8, 0, 0}},
		{"top-p 0.85", SamplerParams{Temperature: 1, TopP: 0.85, Seed: 5}, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}},
		{"min-p 0.25", SamplerParams{Temperature: 1, MinP: 0.25, Seed: 6}, []float64{0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0}},
		{"min-p 0.5", SamplerParams{Temperature: 1, MinP: 0.5, Seed: 7}, []float64{0.5 / 0.8, 0.3 / 0.8, 0, 0}},
		{"top-k 3 then top-p 0.6", SamplerParams{Temperature: 1, TopK: 3, TopP: 0.6, Seed: 8},
			// after top-k: 0.5/0.95, 0.3/0.95 (cum 0.526 < 0.6 so the second stays), 0.15/0.95 cut
			[]float64{0.5 / 0.8, 0.3 / 0.8, 0, 0}},
	}
	const n = 40000
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := sampleFreq(t, c.p, base, n)
			for i, p := range c.want {
				sd := math.Sqrt(p * (1 - p) / n)
				if math.Abs(got[i]-p) > 5*sd || (p == 0 && got[i] != 0) {
					t.Errorf("token %d: frequency %.4f, want %.4f (±%.4f)", i, got[i], p, 5*sd)
				}
			}
		})
	}
}

func TestSeedReproducible(t *testing.T) {
	r := rand.New(rand.NewPCG(42, 0))
	lg := make([]float32, 1000)
	for i := range lg {
		lg[i] = float32(r.NormFloat64())
	}
	run := func(seed uint64) []int {
		s := newSampler(t, SamplerParams{Temperature: 1, TopP: 0.95, Seed: seed}, len(lg))
		var ids []int
		for range 50 {
			ch, err := s.Sample(lg)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, ch.ID)
		}
		return ids
	}
	a, b, c := run(7), run(7), run(8)
	// Reset reproduces a fresh sampler, history included.
	s := newSampler(t, SamplerParams{Temperature: 1, TopP: 0.95, Seed: 99, RepeatPenalty: 1.3}, len(lg))
	s.SetPrompt([]int{1, 2, 3})
	for range 20 {
		ch, _ := s.Sample(lg)
		s.Accept(ch.ID)
	}
	if err := s.Reset(SamplerParams{Temperature: 1, TopP: 0.95, Seed: 7}); err != nil {
		t.Fatal(err)
	}
	var reset []int
	for range 50 {
		ch, _ := s.Sample(lg)
		reset = append(reset, ch.ID)
	}
	if !slices.Equal(reset, a) {
		t.Error("Reset sampler differs from a new one")
	}
	if err := s.Reset(SamplerParams{TopP: 7}); err == nil {
		t.Error("Reset with bad params: no error")
	}
	if !slices.Equal(a, b) {
		t.Error("same seed, different tokens")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds, same 50 tokens")
	}
}

// refTruncate is a plain transcription of HF's warpers (softmax in float64,
// full sorts): temperature, top-k, top-p (remove where the ascending cumsum
// is <= 1-P, keep at least one), min-p. It returns the kept ids, sorted.
func refTruncate(w []float32, p SamplerParams) []int32 {
	type tp struct {
		id int32
		p  float64
	}
	var all []tp
	for i, v := range w {
		if !math.IsInf(float64(v), -1) {
			all = append(all, tp{int32(i), float64(v) / float64(p.Temperature)})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].p > all[j].p })
	if p.TopK > 0 && p.TopK < len(all) {
		all = all[:p.TopK]
	}
	softmax := func(xs []tp) []float64 {
		out := make([]float64, len(xs))
		var z float64
		for i, x := range xs {
			out[i] = math.Exp(x.p - xs[0].p)
			z += out[i]
		}
		for i := range out {
			out[i] /= z
		}
		return out
	}
	if p.TopP > 0 && p.TopP < 1 {
		probs := softmax(all)
		var cum float64
		keep := len(all)
		for i := len(all) - 1; i >= 1; i-- { // ascending
			cum += probs[i]
			if cum <= 1-float64(p.TopP) {
				keep = i
			}
		}
		all = all[:keep]
	}
	if p.MinP > 0 {
		probs := softmax(all)
		keep := all[:0]
		for i, x := range all {
			if probs[i] >= float64(p.MinP)*probs[0] {
				keep = append(keep, x)
			}
		}
		all = keep
	}
	ids := make([]int32, len(all))
	for i, x := range all {
		ids[i] = x.id
	}
	slices.Sort(ids)
	return ids
}

// TestTruncateMatchesReference compares the fast truncation (prefilter, no
// full sort) with refTruncate over random logits and parameters.
func TestTruncateMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		n := 1 + r.IntN(3000)
		w := make([]float32, n)
		scale := 0.5 + 4*r.Float64()
		for i := range w {
			w[i] = float32(r.NormFloat64() * scale)
			if r.IntN(50) == 0 {
				w[i] = float32(math.Inf(-1))
			}
		}
		w[r.IntN(n)] = 3 // at least one finite
		p := SamplerParams{Temperature: float32(0.2 + 1.5*r.Float64())}
		switch r.IntN(3) {
		case 0:
			p.TopK = 1 + r.IntN(200) // heap scan
		case 1:
			p.TopK = 1 + r.IntN(n) // quickselect when > heapTopKMax
		}
		if r.IntN(3) != 0 {
			p.TopP = float32(0.05 + 0.94*r.Float64())
		}
		if r.IntN(2) == 0 {
			p.MinP = float32(0.3 * r.Float64())
		}
		s := newSampler(t, p, n)
		copy(s.work, w)
		_, max := argmax(s.work)
		got := slices.Clone(s.truncate(s.work, max))
		slices.Sort(got)
		want := refTruncate(w, p)
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d (n=%d %+v): kept %d ids, reference keeps %d", trial, n, p, len(got), len(want))
		}
	}
}

func TestExp32(t *testing.T) {
	worst := 0.0
	for i := 0; i <= 870000; i++ {
		x := -float32(i) * 1e-4
		got, want := float64(exp32(x)), math.Exp(float64(x))
		if rel := math.Abs(got-want) / want; rel > worst {
			worst = rel
		}
	}
	if worst > 3e-7 {
		t.Errorf("exp32 worst relative error %.3g on [-87, 0]", worst)
	}
	if exp32(0) != 1 || exp32(float32(math.Inf(-1))) != 0 || exp32(-100) != 0 {
		t.Error("exp32 edge values wrong")
	}
}

func TestLogprobs(t *testing.T) {
	lg := []float32{1, 3, -2, 3, 0.5, 9, 9} // ids 5,6 are padding beyond vocab 5
	s := newSampler(t, SamplerParams{TopLogprobs: 3, RepeatPenalty: 3}, 5)
	s.SetPrompt([]int{1}) // penalties change the pick, not the logprobs
	ch, err := s.Sample(lg)
	if err != nil {
		t.Fatal(err)
	}
	var z float64
	for _, v := range lg[:5] {
		z += math.Exp(float64(v))
	}
	lp := func(id int) float32 { return float32(float64(lg[id]) - math.Log(z)) }
	if ch.ID != 3 {
		t.Fatalf("picked %d, want 3 (1 is penalized)", ch.ID)
	}
	if math.Abs(float64(ch.Logprob-lp(3))) > 1e-6 {
		t.Errorf("logprob %v, want %v", ch.Logprob, lp(3))
	}
	wantTop := []int{1, 3, 0}
	if len(ch.TopLogprobs) != 3 {
		t.Fatalf("%d top logprobs, want 3", len(ch.TopLogprobs))
	}
	for i, tl := range ch.TopLogprobs {
		if tl.ID != wantTop[i] || math.Abs(float64(tl.Logprob-lp(wantTop[i]))) > 1e-6 {
			t.Errorf("top[%d] = %+v, want id %d logprob %v", i, tl, wantTop[i], lp(wantTop[i]))
		}
	}
	// Without Logprobs nothing is computed.
	s2 := newSampler(t, SamplerParams{}, 5)
	if ch, _ := s2.Sample(lg); ch.Logprob != 0 || ch.TopLogprobs != nil {
		t.Errorf("logprobs reported without asking: %+v", ch)
	}
}

// TestSampleDoesNotAllocate guards the reuse of buffers on the per-step path.
func TestSampleDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	lg := make([]float32, 50000)
	for i := range lg {
		lg[i] = float32(r.NormFloat64() * 3)
	}
	s := newSampler(t, SamplerParams{Temperature: 0.8, TopK: 0, TopP: 0.9, MinP: 0.01,
		RepeatPenalty: 1.1, PresencePenalty: 0.2, FrequencyPenalty: 0.1, TopLogprobs: 5, Seed: 1}, len(lg))
	s.SetPrompt([]int{1, 2, 3, 4})
	for i := range 100 {
		s.Accept(i)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := s.Sample(lg); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Sample allocates %.0f times per call", allocs)
	}
}

func BenchmarkSample(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	lg := make([]float32, 151936)
	for i := range lg {
		lg[i] = float32(r.NormFloat64() * 3)
	}
	for _, c := range []struct {
		name string
		p    SamplerParams
	}{
		{"greedy", SamplerParams{}},
		{"temp", SamplerParams{Temperature: 0.8}},
		{"top-k40", SamplerParams{Temperature: 0.8, TopK: 40}},
		{"top-p0.9", SamplerParams{Temperature: 0.8, TopP: 0.9}},
		{"logprobs", SamplerParams{TopLogprobs: 5}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, _ := NewSampler(c.p, len(lg))
			for b.Loop() {
				s.Sample(lg)
			}
		})
	}
}
