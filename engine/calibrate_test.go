package engine

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/engine/sched"
	"github.com/tokenwise/tokenwise/engine/spec"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// smallEngine is an engine of 4 sequences over a cache of 40 blocks of 16 tokens, closed
// when the test ends.
func smallEngine(t *testing.T, m *model.Model, tok *tokenizer.Tokenizer, maxLen int) *Engine {
	t.Helper()
	e, err := NewEngine(EngineConfig{Model: m, Tokenizer: tok, NumBlocks: 40, BlockSize: 16,
		Sched: sched.Config{MaxSeqs: 4, MaxBatchedTokens: 256, MaxWaiting: 4, MaxModelLen: maxLen}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// TestCalibrate: Calibrate measures decode steps of every length 1..8 and then growing by
// half up to the bound, writes them into the model's step-cost table, leaves the engine idle
// with its blocks free and its acceptance rate untouched (its drafts are arbitrary), and a
// request run afterwards on that engine gives Generate's tokens. It refuses an engine with
// work queued.
func TestCalibrate(t *testing.T) {
	m, tok := synthFrom(t, "llama3", archSynth["llama"], `{"bos_token_id":128000,"eos_token_id":[128001,128009]}`)
	t.Cleanup(func() { m.Close() }) // after the engines (cleanups run last first)
	e := smallEngine(t, m, tok, 256)
	prompt := tok.Encode("The cat sat on the mat; the cat sat on the", true)
	if err := e.Add(Request{ID: 1, Prompt: prompt, MaxTokens: 8}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Calibrate(20, time.Minute); err == nil {
		t.Fatal("Calibrate ran on an engine with a request queued")
	}
	e.Cancel(1)
	free := e.Scheduler().KV().NumFree()

	got, err := e.Calibrate(20, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var lengths []int
	for _, c := range got {
		lengths = append(lengths, c.Tokens)
		if !(c.Ms > 0) {
			t.Errorf("%d tokens: %g ms", c.Tokens, c.Ms)
		}
		if ms, ok := e.costs.cost(1, c.Tokens); !ok || ms != c.Ms || !e.costs.rows[1].seen[c.Tokens] {
			t.Errorf("%d tokens: the table has %g ms (measured: %v), Calibrate returned %g", c.Tokens, ms, e.costs.rows[1].seen[c.Tokens], c.Ms)
		}
	}
	if want := []int{1, 2, 3, 4, 5, 6, 7, 8, 12, 18, 20}; !slices.Equal(lengths, want) {
		t.Errorf("measured lengths %v, want %v", lengths, want)
	}
	if !e.Idle() || len(e.seqs) != 0 || e.Scheduler().KV().NumFree() != free {
		t.Errorf("after Calibrate: idle %v, %d sequences, %d blocks free (before: %d)", e.Idle(), len(e.seqs), e.Scheduler().KV().NumFree(), free)
	}
	if e.pkept != [maxSources]float64{} || e.pmissed != [maxSources]float64{} {
		t.Errorf("Calibrate's drafts counted in the acceptance rate: %g kept, %g missed", e.pkept, e.pmissed)
	}

	// A short model length bounds the lengths measured instead of failing (a server with a
	// small --max-model-len still starts).
	sc, err := smallEngine(t, m, tok, 40).Calibrate(80, time.Minute)
	if err != nil || len(sc) == 0 || sc[len(sc)-1].Tokens > 16 {
		t.Errorf("model length 40, up to 80 tokens asked: %v, %v (want lengths up to 16)", sc, err)
	}

	want, err := Generate(context.Background(), m, tok, prompt, Options{MaxTokens: 24, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Add(Request{ID: 2, Prompt: prompt, MaxTokens: 24, IgnoreEOS: true, Proposer: spec.PromptLookup{}}); err != nil {
		t.Fatal(err)
	}
	var ids []int
	for !e.Idle() {
		rep, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range rep.Tokens {
			ids = append(ids, tk.ID)
		}
	}
	if !slices.Equal(ids, want.IDs) {
		t.Errorf("after Calibrate: %v\nGenerate: %v", ids, want.IDs)
	}
}

// wrongDraft proposes, every step, a token the sequence has not produced: drafts that are
// never kept.
type wrongDraft struct{}

func (wrongDraft) Propose(tokens []int, max int) []int {
	d := make([]int, max)
	for i := range d {
		d[i] = 3 + i // ids of byte tokens a model given text does not write
	}
	return d
}

// TestAcceptancePrior: a new sequence's chance that a draft is kept starts from the engine's
// recent rate, not from a fixed guess: one in two on a fresh engine, near zero after a
// sequence whose drafts were all rejected, and drafting then starts with no draft.
func TestAcceptancePrior(t *testing.T) {
	m, tok := synthFrom(t, "llama3", archSynth["llama"], `{"bos_token_id":128000,"eos_token_id":[128001,128009]}`)
	t.Cleanup(func() { m.Close() }) // after the engines (cleanups run last first)
	e := smallEngine(t, m, tok, 256)
	prompt := tok.Encode("Once upon a time", true)
	add := func(id sched.SeqID, fixed bool) {
		t.Helper()
		if err := e.Add(Request{ID: id, Prompt: prompt, MaxTokens: 30, IgnoreEOS: true, Proposer: wrongDraft{}, MaxDraft: 3, FixedDraft: fixed}); err != nil {
			t.Fatal(err)
		}
	}
	add(1, true)
	if p := e.acceptance(e.seqs[1], 0); p != 0.5 {
		t.Errorf("fresh engine: acceptance %g, want 0.5", p)
	}
	var st Stats
	for !e.Idle() {
		rep, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Finished {
			st = f.Stats
		}
	}
	if st.DraftedTokens == 0 || st.AcceptedDrafts != 0 {
		t.Fatalf("the wrong drafts: %d drafted, %d kept", st.DraftedTokens, st.AcceptedDrafts)
	}
	add(2, false)
	p := e.acceptance(e.seqs[2], 0)
	if p > 0.1 {
		t.Errorf("after a sequence whose %d drafts all failed: a new one starts at acceptance %g", st.DraftedTokens, p)
	}
	// Steps as a bandwidth-bound CPU prices them: drafts nearly free. At one in two a draft
	// pays; at the new sequence's prior none does.
	e.costs.set([]StepCost{{1, 10}, {2, 10.5}, {3, 11}, {4, 11.5}})
	if n := e.costs.draftLen(3, 1, 0.5); n == 0 {
		t.Fatalf("at acceptance 0.5 no draft pays on these step costs")
	}
	if n := e.costs.draftLen(3, 1, p); n != 0 {
		t.Errorf("at acceptance %g the new sequence drafts %d", p, n)
	}
	t.Logf("engine rate %.3g kept / %.3g missed; new sequence's prior %.3g", e.pkept, e.pmissed, p)
}

// TestNonDecreasing: the calibrated costs are made non-decreasing in the length by pooling
// adjacent violators into their mean; a table already in order is left as it is.
func TestNonDecreasing(t *testing.T) {
	for _, c := range []struct{ in, want []float64 }{
		{[]float64{15.9, 6.1, 5.0, 6.0, 5.8, 8.9}, []float64{7.76, 7.76, 7.76, 7.76, 7.76, 8.9}},
		{[]float64{1, 2, 3}, []float64{1, 2, 3}},
		{[]float64{3, 1, 2, 4}, []float64{2, 2, 2, 4}},
		{[]float64{2, 1}, []float64{1.5, 1.5}},
	} {
		var sc []StepCost
		for i, ms := range c.in {
			sc = append(sc, StepCost{Tokens: i + 1, Ms: ms})
		}
		nonDecreasing(sc)
		for i, x := range sc {
			if x.Tokens != i+1 || math.Abs(x.Ms-c.want[i]) > 1e-9 {
				t.Fatalf("%v: got %v, want %v", c.in, sc, c.want)
			}
		}
	}
}

// TestCalibrationUnderLoad: a calibration taken in a busy moment (two servers starting on
// the same two cores: a one-token step at 98 ms, longer ones at 142) does not keep drafts
// off once served steps show what a step costs: Calibrate's lengths are scaled by served
// one-token steps against its own, and a served step of a length replaces its entry.
func TestCalibrationUnderLoad(t *testing.T) {
	var c stepCosts
	c.set([]StepCost{{1, 98.4}, {2, 141.6}, {3, 141.6}, {4, 141.6}, {5, 150}})
	step := func(tokens int) sched.Step {
		return sched.Step{Work: []sched.Work{{Seq: 1, Tokens: make([]int, tokens), Sample: true, Draft: tokens - 1}}}
	}
	for range 3 {
		c.observe(step(1), nil, 6*time.Millisecond)
	}
	c.mu.Lock()
	got2, _ := c.cost(1, 2)
	c.mu.Unlock()
	if want := 141.6 * 6 / 98.4; math.Abs(got2-want) > 1e-9 {
		t.Errorf("a 2-token step after served 6 ms one-token steps: %.3g ms, want Calibrate's 141.6 scaled by 6/98.4 = %.3g", got2, want)
	}
	// Unscaled, a 2-token step would be priced at 141.6 ms against served 6 ms ones: no
	// draft would ever pay, and none would be served to correct it.
	if n := c.draftLen(4, 1, 0.8); n == 0 {
		t.Errorf("at acceptance 0.8 no draft pays on the scaled table")
	}
	c.observe(step(2), nil, 9*time.Millisecond) // a served 2-token step: its entry from now on
	c.mu.Lock()
	got2, _ = c.cost(1, 2)
	got3, _ := c.cost(1, 3)
	c.mu.Unlock()
	if got2 != 9 {
		t.Errorf("after a served 9 ms 2-token step its entry is %g", got2)
	}
	if want := 141.6 * 6 / 98.4; math.Abs(got3-want) > 1e-9 {
		t.Errorf("3 tokens, still Calibrate's alone: %.3g, want %.3g", got3, want)
	}
}

// twoSources drafts from two sources by the parity of the sequence's length: source 0 the
// oracle's right tokens, source 1 wrong ones (engine.Sourced).
type twoSources struct{ o *oracle }

func (p twoSources) Propose(tokens []int, k int) []int {
	d, _ := p.ProposeSource(tokens, k)
	return d
}

func (p twoSources) ProposeSource(tokens []int, k int) ([]int, int) {
	if len(tokens)%2 == 0 {
		return p.o.Propose(tokens, k), 0
	}
	w := *p.o
	w.wrong = true
	return w.Propose(tokens, k), 1
}

// TestAcceptanceBySource: each draft source is judged by its own acceptance. After steps
// in which source 0's drafts were all kept and source 1's first draft always failed, source
// 0 drafts the most the costs allow and source 1 none (its drafts become shadows); a source
// with no history starts from the engine's rate over all. One estimate for all sources
// (before) put both at 0.77, and source 1 drafted four tokens a step that all failed. Then a
// run whose proposer alternates between a right and a wrong source keeps the plain run's
// output and drafts.
func TestAcceptanceBySource(t *testing.T) {
	e, s := &Engine{costs: &stepCosts{}}, &seqState{}
	e.costs.set([]StepCost{{1, 10}, {2, 10.5}, {3, 11}, {4, 11.5}, {5, 12}})
	for range 10 {
		s.src = 0
		s.learn(e, 4, 4)
		s.src = 1
		s.learn(e, 4, 0)
	}
	p0, p1, p2 := e.acceptance(s, 0), e.acceptance(s, 1), e.acceptance(s, 2)
	if p0 < 0.8 || p1 > 0.2 {
		t.Errorf("acceptance: source 0 (all kept) %.3g, source 1 (all failed) %.3g", p0, p1)
	}
	if k0, k1 := e.costs.draftLen(4, 1, p0), e.costs.draftLen(4, 1, p1); k0 != 4 || k1 != 0 {
		t.Errorf("draft lengths: source 0 %d, source 1 %d; want 4 and 0", k0, k1)
	}
	all := (e.pkept[0] + e.pkept[1]) / (e.pkept[0] + e.pkept[1] + e.pmissed[0] + e.pmissed[1])
	if math.Abs(p2-all) > 1e-12 {
		t.Errorf("a source with no history: %.6g, want the engine's rate over all sources %.6g", p2, all)
	}

	m, tok := synthFrom(t, "llama3", archSynth["llama"], `{"bos_token_id":128000,"eos_token_id":[128001,128009]}`)
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	prompt := tok.Encode("Once upon a time", true)
	const n = 96
	plain, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: n, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	// Steps priced as a bandwidth-bound CPU prices them: drafts nearly free.
	costsOf(m).set([]StepCost{{1, 10}, {2, 10.5}, {3, 11}, {4, 11.5}, {5, 12}})
	o := &oracle{prompt: prompt, ids: plain.IDs, vocab: tok.VocabSize()}
	res, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: n, IgnoreEOS: true, Proposer: twoSources{o}, MaxDraft: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.IDs, plain.IDs) {
		t.Fatalf("ids %v\nwithout drafts %v", res.IDs, plain.IDs)
	}
	tm := res.Timing
	t.Logf("%d drafted, %d kept, %d decode steps", tm.DraftedTokens, tm.AcceptedDrafts, tm.DecodeSteps)
	if tm.AcceptedDrafts < n/2 {
		t.Errorf("%d drafted, %d kept: want the right source's drafts kept", tm.DraftedTokens, tm.AcceptedDrafts)
	}
}
