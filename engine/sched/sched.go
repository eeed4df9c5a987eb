// Package sched decides what the model runs at each step of continuous batching, and
// nothing else: which sequences run, how many of their tokens each computes, and which KV
// blocks hold them. The result is a plain Step that a runner executes (vLLM v1's split
// between scheduler and model runner), so every decision here is testable without a model.
//
// Each step has a token budget. Running sequences come first, in arrival order: a decoding
// sequence needs one token, one still in its prompt takes what is left of the budget (a
// chunk of a long prompt), so decodes are never starved by a long prefill. Then waiting
// requests are admitted first-come first-served while sequences, budget and blocks allow,
// starting after the longest prefix of their prompt already in the cache. When a running
// sequence needs a block and none is free, the most recently admitted sequence is preempted:
// its blocks are freed and it goes back to the head of the queue, to be recomputed from its
// tokens (prompt and everything generated so far) when it is admitted again.
package sched

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/tokenwise/tokenwise/engine/kvcache"
)

// ErrQueueFull is returned by Add when the waiting queue is at its bound.
var ErrQueueFull = errors.New("sched: waiting queue is full")

// Config bounds the scheduler.
type Config struct {
	MaxSeqs          int // sequences running at once
	MaxBatchedTokens int // tokens computed per step, over all sequences
	MaxWaiting       int // requests waiting for admission; more are refused
	MaxModelLen      int // prompt + generated tokens per sequence
}

// SeqID names a sequence; the caller chooses it.
type SeqID uint64

// Request is a sequence to run.
type Request struct {
	ID        SeqID
	Prompt    []int
	MaxTokens int // tokens it may generate, so that it can be refused if it could never fit
}

// Work is one sequence's part of a step: compute Tokens at positions Start... using the
// KV blocks in Blocks (the block table, which covers Start+len(Tokens) tokens).
type Work struct {
	Seq    SeqID
	Start  int
	Tokens []int
	Blocks []int
	// Sample: this chunk reaches the last known token, so its last logits give the next token.
	Sample bool
	// Prefill: the tokens are prompt tokens (or tokens recomputed after a preemption) rather
	// than a freshly sampled token being decoded.
	Prefill bool
	// Draft is how many of the last Tokens are drafted (proposed, not yet accepted) tokens
	// to verify: the runner wants the logits of the last Draft+1 tokens.
	Draft int
}

// Step is what the runner executes next.
type Step struct {
	Work      []Work
	Preempted []SeqID // sequences sent back to the queue this step (their blocks are freed)
	Admitted  []SeqID // sequences that left the queue this step
}

// Tokens is the number of tokens the step computes.
func (s Step) Tokens() int {
	n := 0
	for _, w := range s.Work {
		n += len(w.Tokens)
	}
	return n
}

// String is a one-line trace of the step, e.g. "1:prefill[0,4)b[0] 2:decode[9,10)b[1 2]*".
// A * marks sampling work; "preempt 3" lists preempted sequences.
func (s Step) String() string {
	var b strings.Builder
	for i, w := range s.Work {
		if i > 0 {
			b.WriteByte(' ')
		}
		kind := "decode"
		if w.Prefill {
			kind = "prefill"
		}
		fmt.Fprintf(&b, "%d:%s[%d,%d)b%v", w.Seq, kind, w.Start, w.Start+len(w.Tokens), w.Blocks)
		if w.Sample {
			b.WriteByte('*')
		}
	}
	for _, id := range s.Preempted {
		fmt.Fprintf(&b, " preempt %d", id)
	}
	return b.String()
}

// Output is the runner's result for a sampling Work: the tokens it appends — Accepted, the
// first drafts of the Work that verification kept, then Token, the one it sampled — and
// whether the sequence is finished (a stop token or string, its length limit): then it is
// released. Forced are tokens appended after Token without sampling (jump-forward): the
// next step computes them with Token. Draft proposes tokens to follow them all, to verify
// in the sequence's next step.
type Output struct {
	Seq      SeqID
	Token    int
	Accepted []int
	Forced   []int
	Draft    []int
	Done     bool
}

type seq struct {
	id         SeqID
	tokens     []int // prompt + generated
	computed   int   // tokens whose K/V are in the cache
	prefillEnd int   // tokens known at admission: computing them is prefill
	blocks     []int
	hashes     []kvcache.Hash // hashes of the first len(hashes) blocks, committed to the cache
	draft      []int          // proposed tokens after tokens, computed (and verified) with them
}

// Scheduler holds the waiting queue, the running sequences and the block manager.
// It is not safe for concurrent use: one goroutine (the engine loop) owns it.
type Scheduler struct {
	cfg     Config
	kv      *kvcache.Manager
	waiting []*seq
	running []*seq
	byID    map[SeqID]*seq

	// Preemptions counts sequences sent back to the queue since the start.
	Preemptions int64
}

// New makes a scheduler over kv.
func New(cfg Config, kv *kvcache.Manager) (*Scheduler, error) {
	if cfg.MaxSeqs <= 0 || cfg.MaxBatchedTokens <= 0 || cfg.MaxWaiting < 0 || cfg.MaxModelLen <= 0 {
		return nil, fmt.Errorf("sched: config %+v: MaxSeqs, MaxBatchedTokens and MaxModelLen must be > 0, MaxWaiting >= 0", cfg)
	}
	return &Scheduler{cfg: cfg, kv: kv, byID: map[SeqID]*seq{}}, nil
}

// KV is the block manager.
func (s *Scheduler) KV() *kvcache.Manager { return s.kv }

// Config is the scheduler's configuration.
func (s *Scheduler) Config() Config { return s.cfg }

// NumRunning is the number of sequences admitted and not finished.
func (s *Scheduler) NumRunning() int { return len(s.running) }

// NumWaiting is the number of queued sequences.
func (s *Scheduler) NumWaiting() int { return len(s.waiting) }

// Idle reports whether there is nothing to run.
func (s *Scheduler) Idle() bool { return len(s.running) == 0 && len(s.waiting) == 0 }

// Has reports whether id is queued or running.
func (s *Scheduler) Has(id SeqID) bool { _, ok := s.byID[id]; return ok }

// Add queues a request. It fails when the queue is full (ErrQueueFull), when the id is in
// use, or when the request could never fit: prompt + MaxTokens beyond MaxModelLen or beyond
// the whole KV cache.
func (s *Scheduler) Add(r Request) error {
	if len(r.Prompt) == 0 {
		return errors.New("sched: empty prompt")
	}
	if _, dup := s.byID[r.ID]; dup {
		return fmt.Errorf("sched: sequence %d already exists", r.ID)
	}
	total := len(r.Prompt) + max(r.MaxTokens, 0)
	if total > s.cfg.MaxModelLen {
		return fmt.Errorf("sched: %d prompt + %d new tokens exceed the model length %d", len(r.Prompt), r.MaxTokens, s.cfg.MaxModelLen)
	}
	if capTokens := s.kv.NumBlocks() * s.kv.BlockSize(); total > capTokens {
		return fmt.Errorf("sched: %d prompt + %d new tokens exceed the KV cache (%d tokens)", len(r.Prompt), r.MaxTokens, capTokens)
	}
	if len(s.waiting) >= s.cfg.MaxWaiting {
		return ErrQueueFull
	}
	q := &seq{id: r.ID, tokens: slices.Clone(r.Prompt)}
	s.waiting = append(s.waiting, q)
	s.byID[r.ID] = q
	return nil
}

// Cancel drops a sequence wherever it is and frees its blocks at once. It reports whether
// the sequence existed.
func (s *Scheduler) Cancel(id SeqID) bool {
	q, ok := s.byID[id]
	if !ok {
		return false
	}
	s.release(q)
	return true
}

// Schedule decides the next step. An empty step means there is nothing to run (or nothing
// fits until a sequence finishes).
func (s *Scheduler) Schedule() Step {
	var step Step
	budget := s.cfg.MaxBatchedTokens
	for i := 0; i < len(s.running) && budget > 0; i++ {
		q := s.running[i]
		if len(q.tokens)-q.computed+len(q.draft) > budget {
			q.draft = q.draft[:max(0, budget-(len(q.tokens)-q.computed))] // what the budget leaves
		}
		n := min(len(q.tokens)-q.computed+len(q.draft), budget)
		if n <= 0 {
			continue
		}
		for {
			tab, ok := s.kv.Allocate(q.blocks, q.computed+n)
			if ok {
				q.blocks = tab
				break
			}
			// No block free: take them from the latest arrival, which may be q itself.
			victim := s.running[len(s.running)-1]
			s.preempt(victim)
			step.Preempted = append(step.Preempted, victim.id)
			if victim == q {
				q = nil
				break
			}
		}
		if q == nil {
			break
		}
		step.Work = append(step.Work, s.work(q, n))
		budget -= n
	}
	// Admit nothing in a step that had to preempt: blocks are short.
	if len(step.Preempted) == 0 {
		for len(s.waiting) > 0 && len(s.running) < s.cfg.MaxSeqs && budget > 0 {
			q := s.waiting[0]
			hit := s.kv.Lookup(q.tokens, len(q.tokens)-1)
			computed := len(hit) * s.kv.BlockSize()
			n := min(len(q.tokens)-computed, budget)
			tab, ok := s.kv.Allocate(hit, computed+n)
			if !ok {
				s.kv.Free(hit)
				break // first come, first served: nobody overtakes the head of the queue
			}
			s.waiting = s.waiting[1:]
			q.blocks, q.computed, q.prefillEnd = tab, computed, len(q.tokens)
			q.hashes = kvcache.PrefixHashes(q.tokens[:computed], s.kv.BlockSize())
			s.running = append(s.running, q)
			step.Admitted = append(step.Admitted, q.id)
			step.Work = append(step.Work, s.work(q, n))
			budget -= n
		}
	}
	return step
}

// work describes computing q's next n tokens (its known tokens, then its drafts).
func (s *Scheduler) work(q *seq, n int) Work {
	start := q.computed
	known := min(n, len(q.tokens)-start)
	w := Work{
		Seq:     q.id,
		Start:   start,
		Tokens:  slices.Clone(q.tokens[start : start+known]),
		Blocks:  slices.Clone(q.blocks),
		Sample:  start+known == len(q.tokens),
		Prefill: start < q.prefillEnd,
	}
	if w.Sample && n > known {
		w.Tokens = append(w.Tokens, q.draft[:n-known]...)
		w.Draft = n - known
	}
	return w
}

// Update applies an executed step: the scheduled tokens are now in the cache, except drafts
// that verification rejected (their cache rows are overwritten when those positions are
// computed again); full blocks become findable by prefix; the outputs' tokens are appended;
// finished sequences are released. Sequences cancelled since Schedule are skipped.
func (s *Scheduler) Update(step Step, outs []Output) {
	bs := s.kv.BlockSize()
	byOut := make(map[SeqID]*Output, len(outs))
	for i := range outs {
		byOut[outs[i].Seq] = &outs[i]
	}
	for _, w := range step.Work {
		q, ok := s.byID[w.Seq]
		if !ok || q.computed != w.Start {
			continue // cancelled, or preempted and re-queued since
		}
		q.computed = w.Start + len(w.Tokens) - w.Draft
		q.draft = nil
		if o := byOut[w.Seq]; o != nil && !o.Done {
			acc := min(len(o.Accepted), w.Draft)
			q.computed += acc
			q.tokens = append(q.tokens, o.Accepted...)
			q.tokens = append(q.tokens, o.Token)
			q.tokens = append(q.tokens, o.Forced...)
			q.draft = slices.Clone(o.Draft)
		}
		for len(q.hashes) < len(q.blocks) && (len(q.hashes)+1)*bs <= q.computed {
			i := len(q.hashes)
			var parent kvcache.Hash
			if i > 0 {
				parent = q.hashes[i-1]
			}
			h := kvcache.BlockHash(parent, q.tokens[i*bs:(i+1)*bs])
			s.kv.Commit(q.blocks[i], h)
			q.hashes = append(q.hashes, h)
		}
	}
	for _, o := range outs {
		if q, ok := s.byID[o.Seq]; ok && o.Done {
			s.release(q)
		}
	}
}

// preempt frees q's blocks and puts it at the head of the queue, to be recomputed.
func (s *Scheduler) preempt(q *seq) {
	s.kv.Free(q.blocks)
	q.blocks, q.hashes, q.computed, q.draft = nil, nil, 0, nil
	s.running = slices.DeleteFunc(s.running, func(o *seq) bool { return o == q })
	s.waiting = slices.Insert(s.waiting, 0, q)
	s.Preemptions++
}

// release forgets q and frees its blocks.
func (s *Scheduler) release(q *seq) {
	s.kv.Free(q.blocks)
	q.blocks = nil
	delete(s.byID, q.id)
	s.running = slices.DeleteFunc(s.running, func(o *seq) bool { return o == q })
	s.waiting = slices.DeleteFunc(s.waiting, func(o *seq) bool { return o == q })
}
