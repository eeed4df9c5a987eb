package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tokenwise/tokenwise/engine/sched"
)

// StepCost is a decode step's measured duration by the tokens it computes.
type StepCost struct {
	Tokens int
	Ms     float64
}

// Calibrate measures decode steps of 1 up to maxTokens tokens on an idle engine and writes
// them into the model's step-cost table, so that drafting never has to try an unmeasured
// step length on a user's request. Without it, the first step of each length is estimated
// from the shorter ones already measured (see stepCosts.cost), which on a CPU where a
// 4-token step costs twice a 1-token one means the first requests draft at a loss until the
// table has learnt; a server that speculates calibrates at start (serve --speculate).
//
// It runs one sequence of its own through the ordinary step (prefill, then decode steps
// carrying 0 .. maxTokens-1 drafts of arbitrary ids), three rounds over the lengths, and
// takes each length's median (the first step of a length also pays its one-time
// allocations), made non-decreasing in the length (nonDecreasing). Lengths
// are 1..8, then growing by half up to maxTokens (at most half the model length or the
// cache); it stops adding lengths once budget is spent, or when the sequence reaches its
// length (the longer ones are then estimated as before). The sequence is cancelled at the
// end; its full blocks stay findable in the prefix cache like any finished request's. It
// returns what it measured.
func (e *Engine) Calibrate(maxTokens int, budget time.Duration) ([]StepCost, error) {
	if !e.Idle() || len(e.seqs) > 0 {
		return nil, errors.New("calibrate: the engine is not idle")
	}
	maxTokens = min(maxTokens, maxCostTokens)
	if e.maxVerify > 0 {
		maxTokens = min(maxTokens, e.maxVerify)
	}
	// Room for the 8-token prompt and the steps: the model length and the cache bound the
	// longest length measured (a short --max-model-len or a small cache measures fewer).
	const promptLen = 8
	maxLen := min(e.sch.Config().MaxModelLen, e.sch.KV().NumBlocks()*e.sch.KV().BlockSize())
	maxTokens = min(maxTokens, (maxLen-promptLen)/2)
	if maxTokens < 1 {
		return nil, nil
	}
	var sizes []int
	for n := 1; n <= maxTokens; {
		sizes = append(sizes, n)
		if n < 8 {
			n++
		} else {
			n += n / 2
		}
	}
	if sizes[len(sizes)-1] != maxTokens {
		sizes = append(sizes, maxTokens)
	}
	const rounds = 3
	vocab := e.vocab
	prompt := make([]int, promptLen)
	for i := range prompt {
		prompt[i] = (1 + 131*i) % vocab
	}
	// The rounds go through every length in turn (1, 2, … max, then again), not one length
	// three times over: a VM's rate drifts by tens of percent within seconds, and a table whose
	// 1-token steps were measured in a slow second and its 3-token steps in a fast one says
	// drafts are free (SmolLM2 at server start: 1: 15.9 ms, 3: 5.0 ms), so the sampled,
	// no-match workload drafted at a loss.
	p := &calibProposer{vocab: vocab}
	for range rounds {
		for _, n := range sizes {
			p.sizes = append(p.sizes, n-1)
		}
	}
	// Each step adds at least one token; drafts that happen to be the greedy choice add
	// more. The sequence is cancelled when the lengths are done.
	gen := min(2*len(p.sizes)+2*maxTokens, maxLen-promptLen)
	const id = sched.SeqID(1<<64 - 1) // not an id a caller numbering from 0 or 1 reaches
	if err := e.Add(Request{ID: id, Prompt: prompt, MaxTokens: gen, IgnoreEOS: true,
		Proposer: p, MaxDraft: maxTokens - 1, FixedDraft: true}); err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	defer e.Cancel(id)
	e.calib = map[int][]float64{}
	defer func() { e.calib = nil }()
	start := time.Now()
	for e.seqs[id] != nil {
		last := p.next == len(p.sizes) // this step verifies the last scripted draft
		rep, err := e.Step()
		if err != nil {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
		if len(rep.Step.Work) == 0 {
			break
		}
		if last || (time.Since(start) > budget && len(e.calib[rep.Step.Tokens()]) >= rounds) {
			break
		}
	}
	var out []StepCost
	for n, ms := range e.calib {
		slices.Sort(ms)
		out = append(out, StepCost{Tokens: n, Ms: ms[len(ms)/2]})
	}
	slices.SortFunc(out, func(a, b StepCost) int { return a.Tokens - b.Tokens })
	nonDecreasing(out)
	e.costs.set(out)
	return out, nil
}

// nonDecreasing makes costs (by length, ascending) non-decreasing with the least-squares
// monotone fit, pooling adjacent violators into their mean: a step of more tokens does the
// work of one of fewer and more, so where a shorter one measured dearer the drift of the
// machine did it, and taken as it is it would make the longer step look cheaper than
// decoding plainly.
func nonDecreasing(c []StepCost) {
	type pool struct {
		sum float64
		n   int
	}
	var ps []pool
	for _, x := range c {
		ps = append(ps, pool{x.Ms, 1})
		for k := len(ps); k > 1 && ps[k-2].sum*float64(ps[k-1].n) > ps[k-1].sum*float64(ps[k-2].n); k-- {
			ps[k-2].sum += ps[k-1].sum
			ps[k-2].n += ps[k-1].n
			ps = ps[:k-1]
		}
	}
	i := 0
	for _, p := range ps {
		for range p.n {
			c[i].Ms = p.sum / float64(p.n)
			i++
		}
	}
}

// calibProposer drafts the next of its scripted lengths each step, of arbitrary ids.
type calibProposer struct {
	sizes []int
	next  int
	vocab int
}

func (p *calibProposer) Propose(tokens []int, max int) []int {
	if p.next >= len(p.sizes) {
		return nil
	}
	n := min(p.sizes[p.next], max)
	p.next++
	d := make([]int, n)
	for i := range d {
		d[i] = (len(tokens)*7 + i*977 + 3) % p.vocab
	}
	return d
}
