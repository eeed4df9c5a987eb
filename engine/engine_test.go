package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/engine/sched"
)

// oracle proposes what a earlier run of the same request produced after the tokens so far;
// wrong proposes a token that is never it.
type oracle struct {
	prompt, ids []int
	wrong       bool
	vocab       int
}

func (o *oracle) Propose(tokens []int, k int) []int {
	at := len(tokens) - len(o.prompt)
	next := o.ids[min(at, len(o.ids)):]
	next = slices.Clone(next[:min(k, len(next))])
	if o.wrong {
		for i := range next {
			next[i] = (next[i] + 1) % o.vocab
		}
	}
	return next
}

// TestDraftsVerified: drafts verified in one pass leave greedy output unchanged. Right
// drafts are kept (fewer decode steps: up to MaxDraft+1 tokens a step); wrong ones are all
// rejected, and the step still yields its one sampled token.
func TestDraftsVerified(t *testing.T) {
	m, tok := synthModel(t)
	defer m.Close()
	ctx := context.Background()
	prompt := tok.Encode("The quick brown fox", true)
	plain, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: 24, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Timing.DecodeSteps != 23 {
		t.Fatalf("plain run: %d decode steps, want 23", plain.Timing.DecodeSteps)
	}
	for _, c := range []struct {
		name  string
		wrong bool
	}{{"right drafts", false}, {"wrong drafts", true}} {
		t.Run(c.name, func(t *testing.T) {
			o := &oracle{prompt: prompt, ids: plain.IDs, wrong: c.wrong, vocab: tok.VocabSize()}
			res, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: 24, IgnoreEOS: true, Proposer: o, MaxDraft: 4, FixedDraft: true})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.IDs, plain.IDs) || res.Text != plain.Text {
				t.Fatalf("ids %v\nwithout drafts %v", res.IDs, plain.IDs)
			}
			tm := res.Timing
			if c.wrong {
				if tm.AcceptedDrafts != 0 || tm.DecodeSteps != 23 || tm.DraftedTokens == 0 {
					t.Errorf("wrong drafts: %d drafted, %d kept, %d decode steps; want some, none, 23", tm.DraftedTokens, tm.AcceptedDrafts, tm.DecodeSteps)
				}
				return
			}
			// 24 tokens: the prefill's first, then 5 per step (4 drafts + 1): 5 steps, the
			// last drafting only what MaxTokens leaves.
			if tm.DecodeSteps != 5 || tm.AcceptedDrafts != 23-tm.DecodeSteps || tm.DraftedTokens != tm.AcceptedDrafts {
				t.Errorf("right drafts: %d drafted, %d kept, %d decode steps; want all kept in 5 steps", tm.DraftedTokens, tm.AcceptedDrafts, tm.DecodeSteps)
			}
		})
	}
}

// TestDraftLenFollowsCost: the draft length is the one that gives the most expected tokens
// per millisecond of step, from measured step costs.
func TestDraftLenFollowsCost(t *testing.T) {
	// measured(seqs, ms...): steps of seqs sequences and 1, 2, ... tokens cost ms (0: not
	// measured).
	measured := func(seqs int, ms ...float64) *stepCosts {
		c := &stepCosts{}
		r := c.row(seqs)
		for n, v := range ms {
			if v > 0 {
				r.ms[n+1], r.seen[n+1] = v, true
			}
		}
		return c
	}
	// Calibrated one-sequence steps (1..80 tokens) beside measured plain steps of 16.
	with16 := func(one func(n int) float64, plain16 float64) *stepCosts {
		c := &stepCosts{}
		r := c.row(1)
		for n := 1; n <= 80; n++ {
			r.ms[n], r.seen[n] = one(n), true
		}
		c.row(16).ms[16], c.row(16).seen[16] = plain16, true
		return c
	}
	cases := []struct {
		name  string
		costs *stepCosts
		batch int
		p     float64
		max   int
		want  int
	}{
		{"nothing measured: a plain step first", &stepCosts{}, 1, 0.5, 4, 0},
		{"no batch-size step measured", measured(1, 10), 2, 0.9, 4, 0},
		{"bandwidth-bound: 5 tokens cost 1.1 steps", measured(1, 10, 10.2, 10.4, 10.7, 11), 1, 0.8, 4, 4},
		{"compute-bound: cost grows with every token", measured(1, 10, 20, 30, 40, 50), 1, 0.9, 4, 0},
		{"in between, good drafts", measured(1, 10, 13, 16, 19, 22), 1, 0.9, 4, 4},
		{"in between, poor drafts", measured(1, 10, 13, 16, 19, 22), 1, 0.2, 4, 0},
		{"only one step measured, larger ones guessed as cheap", measured(1, 10), 1, 0.5, 3, 3},
		{"a batch of 4: drafts add to a 4-token step", measured(4, 10, 11, 12, 13, 30, 40, 50, 60), 4, 0.9, 4, 0},
		{"two measured, longer steps extrapolated", measured(1, 10, 20), 1, 0.9, 4, 0},
		{"a batch of 4 drafting alike, bandwidth-bound", measured(4, 10, 10, 10, 10, 10, 10, 10, 10.5, 10, 10, 10, 11), 4, 0.9, 4, 2},
		{"a batch of 4 drafting alike, compute-bound", measured(4, 10, 10, 10, 10, 10, 10, 10, 19), 4, 0.9, 4, 0},
		// 16 streams with only their plain step measured: the longer steps follow the shape
		// of the one-sequence row, scaled to the 16-sequence step.
		{"16 streams, one-sequence steps linear past 16 tokens", with16(func(n int) float64 { return 6 + 2.5*float64(n) }, 70), 16, 0.64, 4, 0},
		{"16 streams, one-sequence steps flat (bandwidth-bound)", with16(func(n int) float64 { return 10 + 0.01*float64(n) }, 70), 16, 0.64, 4, 4},
		{"the one-sequence row alone: as before", with16(func(n int) float64 { return 10 + 0.01*float64(n) }, 70), 1, 0.9, 4, 4},
	}
	for _, c := range cases {
		if got := c.costs.draftLen(c.max, c.batch, c.p); got != c.want {
			t.Errorf("%s: %d drafts, want %d", c.name, got, c.want)
		}
	}
	// The scaled estimate itself: 16 sequences of 32 tokens, from 70 ms for 16 of 16, cost
	// 70·(6+2.5·32)/(6+2.5·16) ms.
	lin := with16(func(n int) float64 { return 6 + 2.5*float64(n) }, 70)
	if ms, ok := lin.cost(16, 32); !ok || math.Abs(ms-70*86.0/46.0) > 1e-9 {
		t.Errorf("16 sequences, 32 tokens: %g ms (%v), want %g", ms, ok, 70*86.0/46.0)
	}
	// A step of prompt work is not a decode cost.
	c := &stepCosts{}
	c.observe(sched.Step{Work: []sched.Work{{Tokens: []int{1, 2}, Prefill: true}}}, nil, 5*time.Millisecond)
	if c.rows[1] != nil {
		t.Error("prefill step recorded as a decode cost")
	}
	c.observe(sched.Step{Work: []sched.Work{{Tokens: []int{1, 2}, Draft: 1}}}, nil, 5*time.Millisecond)
	if ms, ok := c.cost(1, 2); !ok || ms != 5 {
		t.Errorf("2-token decode step: %g ms (%v), want 5", ms, ok)
	}
	c.observe(sched.Step{Work: []sched.Work{{Tokens: []int{1}}, {Tokens: []int{2}}}}, nil, 9*time.Millisecond)
	if ms, ok := c.cost(2, 2); !ok || ms != 9 {
		t.Errorf("two sequences of one token: %g ms (%v), want 9 (a row apart from one sequence's)", ms, ok)
	}
}

// script is a grammar of one document: the token ids of a text. It allows only the next
// one, and (as a Forcer) tells the text that remains.
type script struct {
	ids    []int
	at     int
	decode func([]int) string
	jump   bool
}

func (s *script) Process(logits []float32) error {
	for i := range logits {
		if s.at >= len(s.ids) || i != s.ids[s.at] {
			logits[i] = float32(math.Inf(-1))
		}
	}
	return nil
}

func (s *script) Accept(id int) error {
	if s.at >= len(s.ids) || id != s.ids[s.at] {
		return fmt.Errorf("token %d at %d: not the script's", id, s.at)
	}
	s.at++
	return nil
}

type jumpingScript struct{ *script }

func (s jumpingScript) Forced() []byte { return []byte(s.decode(s.ids[s.at:])) }

// TestJumpForward: text a processor forces is appended without sampling and computed in one
// pass with the next token; the output is the same as sampling it token by token.
func TestJumpForward(t *testing.T) {
	m, tok := synthModel(t)
	defer m.Close()
	ctx := context.Background()
	prompt := tok.Encode("Answer:", true)
	doc := tok.Encode(`{"verdict": "pass", "score": 4, "feedback": "clear and well argued"}`, false)
	dec := func(ids []int) string { return tok.Decode(ids, false) }
	n := len(doc)
	masked, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: n, Processor: &script{ids: doc, decode: dec}})
	if err != nil {
		t.Fatal(err)
	}
	jumped, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: n, Processor: jumpingScript{&script{ids: doc, decode: dec}}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(masked.IDs, doc) || !slices.Equal(jumped.IDs, doc) || jumped.Text != masked.Text {
		t.Fatalf("masked %v\njumped %v\nwant %v", masked.IDs, jumped.IDs, doc)
	}
	mt, jt := masked.Timing, jumped.Timing
	if mt.DecodeSteps != n-1 || mt.ForcedTokens != n || mt.JumpedTokens != 0 {
		t.Errorf("masked: %d decode steps, %d forced, %d jumped; want %d, %d, 0", mt.DecodeSteps, mt.ForcedTokens, mt.JumpedTokens, n-1, n)
	}
	// The first token from prefill's logits, then the rest but the last in one jump, then
	// one decode step computes them all and samples the last.
	if jt.DecodeSteps != 1 || jt.JumpedTokens != n-2 || jt.ForcedTokens != n {
		t.Errorf("jumped: %d decode steps, %d forced, %d jumped; want 1, %d, %d", jt.DecodeSteps, jt.ForcedTokens, jt.JumpedTokens, n, n-2)
	}
}

// fixedDraft always proposes the same tokens.
type fixedDraft []int

func (f fixedDraft) Propose([]int, int) []int { return f }

// TestDraftsKeepTheDistribution: at temperature 1, drafts change neither the distribution
// of the tokens (a chi-square test over 400 seeds on the second and third tokens, where
// drafts are verified) nor, seed for seed, the tokens themselves: verification samples each
// position as plain decoding does, with one draw each, and keeps a draft only when the draw
// is the draft.
func TestDraftsKeepTheDistribution(t *testing.T) {
	m, tok := synthModel(t)
	defer m.Close()
	ctx := context.Background()
	prompt := tok.Encode("Pick a word:", true)
	const seeds = 400
	hist := [2]map[int]int{{}, {}}
	same, kept := 0, 0
	var draft fixedDraft
	for seed := range uint64(seeds) {
		sp := SamplerParams{Temperature: 1, TopK: 8, Seed: seed}
		plain, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: 3, Sampler: sp, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		if draft == nil { // the first run's tokens: a draft that is sometimes right
			draft = fixedDraft(plain.IDs[1:])
		}
		spec, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: 3, Sampler: sp, IgnoreEOS: true, Proposer: draft, MaxDraft: 2, FixedDraft: true})
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(plain.IDs, spec.IDs) {
			same++
		}
		kept += spec.Timing.AcceptedDrafts
		hist[0][plain.IDs[1]*1000003+plain.IDs[2]]++
		hist[1][spec.IDs[1]*1000003+spec.IDs[2]]++
	}
	// Two-sample chi-square over the (second, third) token pairs seen at least 5 times.
	chi, dof := 0.0, -1
	for k := range hist[0] {
		a, b := float64(hist[0][k]), float64(hist[1][k])
		if a+b >= 10 {
			chi += (a - b) * (a - b) / (a + b)
			dof++
		}
	}
	t.Logf("%d of %d seeds give the same tokens, %d drafts kept; chi-square %.1f over %d degrees of freedom", same, seeds, kept, chi, dof)
	if dof < 1 || kept == 0 {
		t.Fatalf("%d repeated outcomes, %d drafts kept: too few for a test", dof+1, kept)
	}
	// The limit is about the p = 0.001 point of the chi-square distribution.
	if limit := float64(dof) + 4*math.Sqrt(2*float64(dof)); chi > limit {
		t.Errorf("chi-square %.1f over %d dof (limit %.1f): drafts changed the distribution", chi, dof, limit)
	}
	if same < seeds*99/100 {
		t.Errorf("only %d of %d seeds give the same tokens with drafts", same, seeds)
	}
}

// TestDraftsStopWhereTheyLose: steps of sixteen sequences whose drafts the table judges to
// pay (each kept 9 times in 10) but which delivered fewer tokens per millisecond than the
// plain steps of sixteen (measured over yieldMin of each) draft no more, except once every
// yieldProbe plain steps, to measure again; where drafted steps deliver more, they go on;
// and one sequence's row is judged by its table alone.
func TestDraftsStopWhereTheyLose(t *testing.T) {
	batch := func(seqs, tokens int) sched.Step {
		var st sched.Step
		for i := range seqs {
			st.Work = append(st.Work, sched.Work{Seq: sched.SeqID(i), Tokens: make([]int, tokens), Draft: tokens - 1})
		}
		return st
	}
	outs := func(seqs, accepted int) []sched.Output {
		o := make([]sched.Output, seqs)
		for i := range o {
			o[i].Accepted = make([]int, accepted)
		}
		return o
	}
	run := func(draftMs float64) *stepCosts {
		c := &stepCosts{}
		for range yieldMin {
			c.observe(batch(16, 1), outs(16, 0), 40*time.Millisecond) // 0.4 tokens a ms
			c.observe(batch(16, 3), outs(16, 1), time.Duration(draftMs*float64(time.Millisecond)))
		}
		return c
	}
	// Drafted steps of 48 tokens in 100 ms emitting 32: 0.32 tokens a ms.
	c := run(100)
	if k := c.draftLen(4, 16, 0.9); k != 0 {
		t.Fatalf("drafted steps deliver 0.32 tokens a ms against 0.4 plain: %d drafts, want 0", k)
	}
	// The same in 70 ms: 0.46 tokens a ms, more than plain.
	if k := run(70).draftLen(4, 16, 0.9); k == 0 {
		t.Fatal("drafted steps deliver 0.46 tokens a ms against 0.4 plain: no drafts")
	}
	// After yieldProbe plain steps the losing row probes once more.
	for range yieldProbe - 1 {
		c.observe(batch(16, 1), outs(16, 0), 40*time.Millisecond)
		if k := c.draftLen(4, 16, 0.9); k != 0 {
			t.Fatalf("%d drafts before the probe is due", k)
		}
	}
	c.observe(batch(16, 1), outs(16, 0), 40*time.Millisecond)
	if k := c.draftLen(4, 16, 0.9); k == 0 {
		t.Fatal("no probe after yieldProbe plain steps")
	}
	// Jump-forward: steps that compute forced tokens without drafts, and outputs that
	// append forced tokens, are plain steps, and the forced tokens are not their yield.
	j := &stepCosts{}
	j.observe(batch(16, 1), outs(16, 0), 40*time.Millisecond) // the table's plain step
	for range yieldMin {
		st := batch(16, 1)
		for i := range st.Work {
			st.Work[i].Tokens, st.Work[i].Draft = make([]int, 5), 0
		}
		o := outs(16, 0)
		for i := range o {
			o[i].Forced = make([]int, 6)
		}
		j.observe(st, o, 40*time.Millisecond)
		j.observe(batch(16, 3), outs(16, 1), 70*time.Millisecond)
	}
	if r := j.rows[16]; r.nPlain != yieldMin+1 || r.nDraft != yieldMin || math.Abs(r.yPlain-0.4) > 1e-9 {
		t.Fatalf("jump-forward steps: %d plain, %d drafted, plain yield %g (want %d, %d, 0.4)", r.nPlain, r.nDraft, r.yPlain, yieldMin+1, yieldMin)
	}
	if k := j.draftLen(4, 16, 0.9); k == 0 {
		t.Fatal("drafts that deliver more than plain steps stopped under jump-forward")
	}
	// One sequence's row is judged by its table alone, even where its drafted steps
	// delivered less.
	for range yieldMin {
		c.observe(batch(1, 1), outs(1, 0), 10*time.Millisecond)
		c.observe(batch(1, 3), outs(1, 0), 11*time.Millisecond)
	}
	if r := c.rows[1]; !r.draftsLose() {
		t.Fatal("one sequence's drafted steps delivered less, but draftsLose says not")
	}
	if k := c.draftLen(2, 1, 0.9); k == 0 {
		t.Fatal("one sequence: no drafts where the table says they pay")
	}
}
