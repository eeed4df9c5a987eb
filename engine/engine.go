package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime/debug"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/tokenwise/tokenwise/engine/kvcache"
	"github.com/tokenwise/tokenwise/engine/sched"
	"github.com/tokenwise/tokenwise/grammar"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// The one generation loop. Engine.Step is what every caller runs — the server's runner
// once per iteration for all its requests, Generate (and through it generate, demo and
// bench) for a batch of one:
//
//  1. the scheduler (engine/sched) decides the step: which sequences run, which chunk of
//     each, which KV blocks hold them;
//  2. the model runs it as one batched forward pass over the paged cache
//     (model.PagedCache.Forward, the one forward);
//  3. each sequence that reached its last token turns its logits into a token: its logits
//     processor (a grammar's mask) if any, the sampler, stop ids, the streaming UTF-8
//     decoder, stop strings, its length limit, logprobs;
//  4. the step's time is shared out among the sequences in it, by their tokens in the step,
//     and the scheduler is told what happened.
//
// Only the Engine's own goroutine may call its methods; it does no locking.

// LogitsProcessor changes a sequence's logits before its sampler sees them — a grammar's
// mask sets the logits of the tokens it forbids to -Inf — and is told each token the
// sequence appends. Set per request (Request.Processor).
type LogitsProcessor interface {
	Process(logits []float32) error
	Accept(id int) error
}

// Forcer is a LogitsProcessor that can tell the text its grammar forces next: the only
// continuation the grammar allows (a key, the punctuation after it, the rest of an enum
// value). The engine appends it without sampling (jump-forward): its tokens are computed in
// the sequence's next pass with its next token, one pass for all of them.
type Forcer interface {
	LogitsProcessor
	Forced() []byte
}

// Proposer proposes the tokens that may follow a sequence — drafts, from the prompt, past
// answers or a grammar — which the engine verifies in the sequence's next step: that step
// computes the last token and the drafts in one pass, with the logits after each, and keeps
// the drafts the sampler would have produced anyway, plus one token more. Set per request
// (Request.Proposer).
type Proposer interface {
	// Propose returns at most max tokens to follow tokens (the prompt and the output so far).
	Propose(tokens []int, max int) []int
}

// Source says how a token came to be in the output.
type Source uint8

const (
	Sampled Source = iota // drawn by the sampler from the model's logits
	Forced                // the only token the logits processor allowed
	Drafted               // proposed by the Proposer and verified: what the sampler drew
	Jumped                // appended without a pass of its own: forced text (jump-forward)
)

func (s Source) String() string {
	switch s {
	case Forced:
		return "forced"
	case Drafted:
		return "draft"
	case Jumped:
		return "jump-forward"
	}
	return "sampled"
}

// Request is one sequence to generate.
type Request struct {
	ID     sched.SeqID
	Prompt []int
	// MaxTokens caps the generated tokens (> 0); the scheduler's MaxModelLen caps prompt +
	// generated tokens.
	MaxTokens int
	Sampler   SamplerParams
	// Stop strings end generation before their first occurrence; StopIDs end it when
	// sampled, in addition to the model's EOS ids unless IgnoreEOS.
	Stop      []string
	StopIDs   []int
	IgnoreEOS bool
	// KeepSpecial keeps special tokens in the text (by default they are skipped).
	KeepSpecial bool
	// Arrival is when the request arrived, for its queue time and TTFT (zero: when added).
	Arrival time.Time
	// Processor, if set, masks the logits before sampling.
	Processor LogitsProcessor
	// Grammar, if set, constrains the output to a document of the grammar (structured
	// output): the engine keeps the sequence's parse, masks the logits before each sampling
	// (the end-of-sequence and stop ids are allowed exactly when the document is complete),
	// cuts drafts where the grammar rejects them, and appends the text the grammar forces
	// without sampling it (jump-forward) unless NoJumpForward. Not with Processor.
	Grammar       *grammar.Table
	NoJumpForward bool
	// SchemaDrafts proposes the text the grammar forces as drafts to verify, instead of
	// appending it unverified (jump-forward, which it replaces): the forced text becomes
	// the tokens the tokenizer spells it with, checked against the model like any draft, so
	// the output is exactly the masked decoding's (NoJumpForward) token for token, in fewer
	// passes where the model writes the text as the tokenizer does. The Proposer's drafts,
	// if any, continue after them. Only with Grammar.
	SchemaDrafts bool
	// Proposer, if set, drafts up to MaxDraft tokens per step (DefaultMaxDraft) to verify. How
	// many are asked for each step follows the sequence's acceptance and what a step of that
	// many tokens has been measured to cost (see draftLen): none where drafts do not pay.
	Proposer Proposer
	MaxDraft int
	// FixedDraft drafts MaxDraft tokens every step whatever they cost (tests and
	// acceptance measurements).
	FixedDraft bool
}

// DefaultMaxDraft is Request.MaxDraft where it is not set.
const DefaultMaxDraft = 4

// Token is one token a step appended to a sequence.
type Token struct {
	Seq sched.SeqID
	ID  int
	// Text is the text this token releases: whole UTF-8, after the stop-string rule held
	// back what may be the start of a stop string (often empty).
	Text    string
	Logprob *TokenLogprobs // with SamplerParams.Logprobs or TopLogprobs
	Source  Source
}

// Stats is a sequence's accounting. Prefill and Decode are its shares of the steps it ran
// in (see Step), so that the requests of a batched step together account for the step's
// time once.
type Stats struct {
	PromptTokens, CompletionTokens int
	CachedTokens                   int // prompt tokens the prefix cache supplied
	Queue                          time.Duration
	TTFT                           time.Duration // arrival to first token
	Prefill, Decode                time.Duration
	PrefillSteps, DecodeSteps      int
	DraftedTokens, AcceptedDrafts  int // tokens proposed for verification, and those kept
	SchemaDrafted, SchemaAccepted  int // of those, drafts of the grammar's forced text (SchemaDrafts)
	// DraftedAt[i] and AcceptedAt[i] count the drafts proposed and kept at position i of a
	// step's draft (vLLM's acceptance by position): AcceptedAt[i]/DraftedAt[i] is the chance
	// that the (i+1)-th draft is kept once the i before it were.
	DraftedAt, AcceptedAt []int
	ForcedTokens          int           // tokens the processor allowed alone (sampled or not)
	JumpedTokens          int           // forced tokens appended without sampling (jump-forward)
	MaskTime              time.Duration // computing the grammar's masks
	Masks                 int
	// HeadRows counts the logits rows the sequence's steps computed, and FewHeadRows those
	// of them computed over the grammar's few allowed tokens only (Chunk.Allowed): the LM
	// head's share of the work a grammar saved.
	HeadRows, FewHeadRows int
}

// Finish ends a sequence.
type Finish struct {
	Seq    sched.SeqID
	Reason string // FinishStop or FinishLength; empty with Err
	// Text is the text held back until the end (a possible stop-string prefix that was not).
	Text  string
	Stats Stats
	Err   error
}

// StepReport is what one step did.
type StepReport struct {
	Step     sched.Step
	Start    time.Time
	Dur      time.Duration // forward pass and sampling
	Tokens   []Token
	Finished []Finish
}

// EngineConfig sizes an Engine.
type EngineConfig struct {
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	// NumBlocks blocks of BlockSize tokens make the paged KV cache.
	NumBlocks, BlockSize int
	Sched                sched.Config
	// MaxVerifyTokens bounds the tokens of a step's decoding sequences with their drafts
	// (0: no bound). Verification pays while a step is bandwidth-bound: k+1 tokens cost one
	// read of the weights. Past the point where the step turns compute-bound (the cost
	// model's ridge: cost.Shape and a hardware profile give it) each drafted token costs
	// what decoding it would, and rejected ones are lost work, so the caller sets this from
	// the ridge and drafts shrink as the batch grows.
	MaxVerifyTokens int
	// WholeHead computes every logits row over the whole vocabulary, even where a grammar
	// allows a few tokens (see Engine.allowedRows): the same tokens, to measure the saving.
	WholeHead bool
}

// Engine runs sequences in continuous batches over one paged KV cache.
type Engine struct {
	m     *model.Model
	tok   *tokenizer.Tokenizer
	pc    *model.PagedCache
	sch   *sched.Scheduler
	seqs  map[sched.SeqID]*seqState
	eos   []int
	vocab int
	// maxVerify is EngineConfig.MaxVerifyTokens.
	maxVerify int
	costs     *stepCosts
	wholeHead bool
	// pkept and pmissed are kept and missed over the proposer drafts of every sequence
	// (verified, and shadow ones), per draft source (Sourced), decaying by 0.98 an
	// observation: a new sequence starts from this rate instead of a guess (see Add).
	pkept, pmissed [maxSources]float64
	// calib, while Calibrate runs, collects decode steps' durations by their tokens.
	calib map[int][]float64

	// BeforeStep, if set, is called with each step before it runs. Tests hold a step with
	// it (a request timeout, a full queue) instead of relying on the machine's speed.
	BeforeStep func(sched.Step)
}

// NewEngine allocates the cache and the scheduler.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	pc, err := cfg.Model.NewPagedCache(cfg.NumBlocks, cfg.BlockSize)
	if err != nil {
		return nil, err
	}
	kv, err := kvcache.New(cfg.NumBlocks, cfg.BlockSize)
	if err != nil {
		return nil, err
	}
	sch, err := sched.New(cfg.Sched, kv)
	if err != nil {
		return nil, err
	}
	return &Engine{m: cfg.Model, tok: cfg.Tokenizer, pc: pc, sch: sch, seqs: map[sched.SeqID]*seqState{},
		eos:       StopIDs(cfg.Model, cfg.Tokenizer),
		vocab:     min(cfg.Model.Config().VocabSize, cfg.Tokenizer.VocabSize()),
		maxVerify: cfg.MaxVerifyTokens, costs: costsOf(cfg.Model), wholeHead: cfg.WholeHead}, nil
}

// Close gives the cache memory back to the model for the next engine (a loop of
// generations reuses one cache). The engine must not be used afterwards.
func (e *Engine) Close() { e.pc.Release() }

// Scheduler is the engine's scheduler, for its counts and the block manager.
func (e *Engine) Scheduler() *sched.Scheduler { return e.sch }

// Cache is the engine's paged KV cache.
func (e *Engine) Cache() *model.PagedCache { return e.pc }

// Idle reports whether no sequence is queued or running.
func (e *Engine) Idle() bool { return e.sch.Idle() }

// seqState is a sequence's generation state: everything between its logits and its text.
type seqState struct {
	req      Request
	sampler  *Sampler
	stream   *tokenizer.StreamDecoder
	stop     StopText
	stopIDs  []int
	logprobs bool
	gen      int
	tokens   []int // prompt and output, for the proposer
	// kept and missed count, with decay, drafts verification kept and the first rejected
	// draft of each step, per draft source: with the engine's rate as a prior they estimate
	// the chance that a draft is kept (Engine.acceptance). src is the source of the
	// pending proposer draft (or shadow).
	kept, missed [maxSources]float64
	src          int
	// shadow is a draft not verified (speculation paused): the next token produced tells
	// whether it would have been kept, at no cost, so speculation resumes when drafts start
	// matching again.
	shadow int
	// fkept and fmissed are kept and missed for the drafts of forced text (SchemaDrafts),
	// counted apart: their chance is much higher than the proposer's. nForced is how many of
	// the pending draft's tokens are forced text (they come first).
	fkept, fmissed float64
	nForced        int
	admitted       time.Time
	first          time.Time
	st             Stats
	finished       bool
	matcher        *grammar.Matcher // Request.Grammar's parse
	allowed        [][]int32        // allowedRows' lists, reused
}

// Add queues a request. Errors are the request's fault (an empty prompt, ids outside the
// vocabulary, bad sampler parameters, a request that can never fit), or sched.ErrQueueFull.
func (e *Engine) Add(req Request) error {
	if len(req.Prompt) == 0 {
		return errors.New("empty prompt")
	}
	if req.MaxTokens <= 0 {
		return fmt.Errorf("max tokens %d: must be > 0", req.MaxTokens)
	}
	nv := e.m.Config().VocabSize
	for i, id := range req.Prompt {
		if id < 0 || id >= nv {
			return fmt.Errorf("prompt token %d at position %d is outside the model's vocabulary (%d)", id, i, nv)
		}
	}
	for _, s := range req.Stop {
		if s == "" {
			return errors.New("empty stop string")
		}
	}
	// The sampler only sees ids the tokenizer knows: the LM head may have padding rows
	// beyond them (vocab_size rounded up) that mean nothing.
	sampler, err := NewSampler(req.Sampler, e.vocab)
	if err != nil {
		return err
	}
	sampler.SetPrompt(req.Prompt)
	var stopIDs []int
	if !req.IgnoreEOS {
		stopIDs = slices.Clone(e.eos)
	}
	stopIDs = append(stopIDs, req.StopIDs...)
	var matcher *grammar.Matcher
	if req.Grammar != nil {
		if req.Processor != nil {
			return errors.New("a request takes a grammar or a logits processor, not both")
		}
		if len(stopIDs) == 0 {
			return errors.New("a grammar needs an end-of-sequence or stop id to end the document with (EOS is ignored and no stop ids are given)")
		}
		matcher = req.Grammar.NewMatcher(stopIDs)
		req.Processor = matcher
	} else if req.SchemaDrafts {
		return errors.New("schema drafts need a grammar")
	}
	if err := e.sch.Add(sched.Request{ID: req.ID, Prompt: req.Prompt, MaxTokens: req.MaxTokens}); err != nil {
		return err
	}
	if req.Arrival.IsZero() {
		req.Arrival = time.Now()
	}
	s := &seqState{req: req, sampler: sampler, stream: e.tok.NewStreamDecoder(!req.KeepSpecial),
		stop:     StopText{Stops: req.Stop},
		logprobs: req.Sampler.Logprobs || req.Sampler.TopLogprobs > 0,
		stopIDs:  stopIDs, matcher: matcher}
	s.st.PromptTokens = len(req.Prompt)
	if s.drafting() {
		s.tokens = slices.Clone(req.Prompt)
		if s.req.MaxDraft <= 0 {
			s.req.MaxDraft = DefaultMaxDraft
		}
		// Forced text is mostly written as the tokenizer spells it: a prior of nine in ten.
		s.fkept, s.fmissed = 9, 1
		s.shadow = -1
	}
	e.seqs[req.ID] = s
	return nil
}

// Cancel drops a sequence (its blocks are freed at once). It reports whether it existed.
func (e *Engine) Cancel(id sched.SeqID) bool {
	if _, ok := e.seqs[id]; !ok {
		return false
	}
	delete(e.seqs, id)
	e.sch.Cancel(id)
	return true
}

// Stats is a running sequence's accounting so far.
func (e *Engine) Stats(id sched.SeqID) (Stats, bool) {
	s, ok := e.seqs[id]
	if !ok {
		return Stats{}, false
	}
	st := s.st
	st.DraftedAt, st.AcceptedAt = slices.Clone(st.DraftedAt), slices.Clone(st.AcceptedAt)
	return st, true
}

// Step runs one step. With nothing to run it returns an empty report. An error means the
// step failed (the model returned an error or panicked): every sequence in it is finished
// with that error in the report, and the engine goes on with the others.
func (e *Engine) Step() (StepReport, error) {
	step := e.sch.Schedule()
	rep := StepReport{Step: step, Start: time.Now()}
	if len(step.Work) == 0 {
		return rep, nil
	}
	if e.BeforeStep != nil {
		e.BeforeStep(step)
	}
	start := time.Now()
	rep.Start = start
	for _, id := range step.Admitted {
		if s := e.seqs[id]; s != nil && s.admitted.IsZero() {
			s.admitted = start
			s.st.Queue = start.Sub(s.req.Arrival)
		}
	}
	for _, w := range step.Work {
		if s := e.seqs[w.Seq]; s != nil && s.gen == 0 && slices.Contains(step.Admitted, w.Seq) {
			s.st.CachedTokens = w.Start // tokens the prefix cache supplied at admission
		}
	}
	chunks := make([]model.Chunk, len(step.Work))
	for i, w := range step.Work {
		chunks[i] = model.Chunk{Tokens: w.Tokens, Start: w.Start, Blocks: w.Blocks, Logits: w.Sample}
		if s := e.seqs[w.Seq]; s != nil {
			// Its attention then follows its positions, not where the budget cut its prompt.
			chunks[i].Prompt = len(s.req.Prompt)
		}
		if w.Draft > 0 { // the logits after the last known token and after each draft
			n := len(w.Tokens)
			for o := n - 1 - w.Draft; o < n; o++ {
				chunks[i].LogitsAt = append(chunks[i].LogitsAt, o)
			}
		}
		if s := e.seqs[w.Seq]; s != nil && w.Sample {
			s.st.HeadRows += w.Draft + 1
			if s.matcher != nil && !e.wholeHead {
				chunks[i].Allowed = s.allowedRows(w.Tokens[len(w.Tokens)-w.Draft:], e.vocab)
				for _, ids := range chunks[i].Allowed {
					if ids != nil {
						s.st.FewHeadRows++
					}
				}
			}
		}
	}
	logits, err := e.forward(chunks)
	var outs []sched.Output
	if err == nil {
		outs, err = e.sample(step, logits, &rep)
	}
	rep.Dur = time.Since(start)
	if err != nil {
		rep.Tokens = nil
		for _, w := range step.Work {
			if e.seqs[w.Seq] != nil {
				rep.Finished = append(rep.Finished, Finish{Seq: w.Seq, Err: err, Stats: e.seqs[w.Seq].st})
				delete(e.seqs, w.Seq)
			}
			e.sch.Cancel(w.Seq)
		}
		return rep, err
	}
	e.charge(step, rep.Dur)
	if e.calib != nil {
		if n := step.Tokens(); !step.Work[0].Prefill {
			e.calib[n] = append(e.calib[n], float64(rep.Dur)/1e6)
		}
	} else {
		e.costs.observe(step, outs, rep.Dur)
	}
	e.sch.Update(step, outs)
	for _, o := range outs {
		if !o.Done {
			continue
		}
		s := e.seqs[o.Seq]
		delete(e.seqs, o.Seq)
		rep.Finished = append(rep.Finished, Finish{Seq: o.Seq, Reason: s.finishReason(), Text: s.stop.Flush(), Stats: s.st})
	}
	return rep, nil
}

// charge shares the step's time among its sequences by their tokens in it: a decode token
// batched with 15 others is charged a sixteenth of the step, a 200-token prefill chunk
// beside 3 decodes 200/203 of it. Work on prompt tokens is prefill, the rest decode.
func (e *Engine) charge(step sched.Step, dur time.Duration) {
	total := step.Tokens()
	for _, w := range step.Work {
		s := e.seqs[w.Seq]
		if s == nil {
			continue
		}
		share := time.Duration(math.Round(float64(dur) * float64(len(w.Tokens)) / float64(total)))
		if w.Prefill {
			s.st.Prefill += share
			s.st.PrefillSteps++
		} else {
			s.st.Decode += share
			s.st.DecodeSteps++
		}
	}
}

// forward runs the batched pass, turning a panic into an error.
func (e *Engine) forward(chunks []model.Chunk) (logits [][]float32, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in forward pass: %v\n%s", p, debug.Stack())
		}
	}()
	return e.pc.Forward(chunks)
}

// sample turns the logits of every sequence that reached its last token into its next
// token, and decides whether the sequence is done.
func (e *Engine) sample(step sched.Step, logits [][]float32, rep *StepReport) (outs []sched.Output, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while sampling: %v\n%s", p, debug.Stack())
		}
	}()
	rows := e.m.Config().VocabSize
	sampling := 0
	for _, w := range step.Work {
		if w.Sample {
			sampling++
		}
	}
	for i, w := range step.Work {
		s := e.seqs[w.Seq]
		if !w.Sample || s == nil {
			continue
		}
		// Verify the drafts: sample after the last known token; while the sampled token is
		// the draft, it is kept and the logits after it give the next one. The first token
		// that differs from its draft (or the one after the last draft) ends the step.
		drafts := w.Tokens[len(w.Tokens)-w.Draft:]
		out := sched.Output{Seq: w.Seq}
		for j := 0; ; j++ {
			tok, done, err := s.next(logits[i][j*rows:(j+1)*rows], e)
			if err != nil {
				return nil, fmt.Errorf("sequence %d: %w", w.Seq, err)
			}
			if s.first.IsZero() { // the first token exists once it is sampled
				now := time.Now()
				s.first = now
				s.st.TTFT = now.Sub(s.req.Arrival)
			}
			tok.Seq = w.Seq
			kept := j < len(drafts) && tok.ID == drafts[j]
			if kept {
				tok.Source = Drafted
				s.st.AcceptedDrafts++
				s.st.AcceptedAt[j]++
				if j < s.nForced {
					s.st.SchemaAccepted++
				}
			}
			rep.Tokens = append(rep.Tokens, tok)
			if s.tokens != nil {
				s.tokens = append(s.tokens, tok.ID)
			}
			if done || !kept {
				out.Token, out.Done = tok.ID, done
				break
			}
			out.Accepted = append(out.Accepted, tok.ID) // and on: after the last draft, one more
		}
		if f, ok := s.req.Processor.(Forcer); ok && !out.Done && !s.req.NoJumpForward && !s.req.SchemaDrafts {
			jumped, done, err := s.jump(f, e)
			if err != nil {
				return nil, fmt.Errorf("sequence %d: jump-forward: %w", w.Seq, err)
			}
			for _, tk := range jumped {
				tk.Seq = w.Seq
				rep.Tokens = append(rep.Tokens, tk)
				out.Forced = append(out.Forced, tk.ID)
			}
			out.Done = done
		}
		if s.shadow >= 0 && len(drafts) == 0 {
			// Counted as a verified draft of one token would be (nForced is 0: no draft).
			s.learn(e, 1, b2i(out.Token == s.shadow))
			s.shadow = -1
		}
		if len(drafts) > 0 {
			s.learn(e, len(drafts), len(out.Accepted))
		}
		if !out.Done && s.drafting() {
			out.Draft = s.propose(e, sampling)
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// allowedRows returns, for each logits row of the sequence's next pass (after its last
// token, then after each draft), the tokens the grammar allows there when they are few
// (nil where many are, or the drafts leave the grammar): the LM head then computes only those
// rows (model.Chunk.Allowed). Nothing else can be sampled there — the mask sets every other
// logit to -Inf — and each computed logit has the bits the whole product gives it, so the
// output is the same token for token. On a CPU the head is a large share of a small model's
// step (SmolLM2-135M: 28M of its 135M weights), and JSON's punctuation, keys and enums leave
// a handful of tokens.
//
// The mask after the last token is the one sampling uses (the matcher keeps it); the masks
// after drafts are computed on a copy of the parse, and again by the matcher after it
// accepts them, a cost a mask fill is small beside (a row of the head per position).
func (s *seqState) allowedRows(drafts []int, vocab int) [][]int32 {
	rows := s.allowed[:0]
	mt := s.matcher
	some := false
	for j := 0; j <= len(drafts); j++ {
		if j > 0 {
			if j == 1 {
				mt = s.matcher.Clone()
			}
			if mt.Accept(drafts[j-1]) != nil || mt.Ended() {
				for ; j <= len(drafts); j++ {
					rows = append(rows, nil)
				}
				break
			}
		}
		var ids []int32
		if j < cap(rows) {
			ids = rows[:j+1][j][:0]
		}
		ids, ok := fewAllowed(mt.Mask(), vocab, ids)
		if !ok {
			ids = nil
		}
		some = some || ids != nil
		rows = append(rows, ids)
	}
	s.allowed = rows
	if !some {
		return nil
	}
	return rows
}

// fewAllowed lists the ids below vocab whose bit is set in mask into ids, and reports false
// when there are more than vocab/8: from there the head's whole product costs about as much
// as the rows the list picks (four-row groups, one product per row).
func fewAllowed(mask []uint64, vocab int, ids []int32) ([]int32, bool) {
	limit, n := vocab/8, 0
	for _, w := range mask {
		if n += bits.OnesCount64(w); n > limit {
			return ids, false
		}
	}
	ids = ids[:0]
	for wi, w := range mask {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			if id := wi*64 + b; id < vocab {
				ids = append(ids, int32(id))
			}
			w &= w - 1
		}
	}
	return ids, true
}

// drafting reports whether the sequence proposes drafts.
func (s *seqState) drafting() bool {
	return s.req.Proposer != nil || (s.req.SchemaDrafts && s.matcher != nil)
}

// learn updates the acceptance estimates after a step verified n drafts and kept the first
// a: the forced-text drafts (the first nForced) and the proposer's are counted apart. Each
// estimate decays by 0.8 a step it is used, so it follows the sequence's recent text. What
// the proposer's drafts did goes to the engine's rate too (observeAcceptance).
func (s *seqState) learn(e *Engine, n, a int) {
	nf := min(s.nForced, n)
	if nf > 0 {
		af := min(a, nf)
		s.fkept, s.fmissed = 0.8*s.fkept+float64(af), 0.8*s.fmissed
		if af < nf {
			s.fmissed++
		}
	}
	if n > nf && a >= nf { // the proposer's drafts were reached
		ap, i := a-nf, s.src
		s.kept[i], s.missed[i] = 0.8*s.kept[i]+float64(ap), 0.8*s.missed[i]
		if ap < n-nf {
			s.missed[i]++
		}
		e.observeAcceptance(i, ap, ap < n-nf)
	}
}

// maxSources is the most draft sources told apart; a chain's later members share the last.
const maxSources = 4

// Sourced is a Proposer that says which of its sources drafted (spec.Chain: the index of
// the member), so that each source's drafts are judged by their own acceptance. Another
// Proposer is one source.
type Sourced interface {
	ProposeSource(tokens []int, k int) ([]int, int)
}

// proposeSource asks p for up to k drafts and their source, in [0, maxSources).
func proposeSource(p Proposer, tokens []int, k int) ([]int, int) {
	sp, ok := p.(Sourced)
	if !ok {
		return p.Propose(tokens, k), 0
	}
	d, src := sp.ProposeSource(tokens, k)
	return d, min(max(src, 0), maxSources-1)
}

// acceptance estimates the chance that the sequence's next proposer draft is kept: its own
// decayed counts (an effective window of about five steps) shrunk toward the engine's rate
// over recent sequences, which counts as two observations. Alone, the few counts are noisy,
// and drafting where they happened to run high loses: on sampled prose (SmolLM2-135M,
// temperature 1) three shadow hits in a row took the estimate past the point where a draft
// pays on this CPU although drafts were then kept one time in ten. The prior also decides
// a new sequence's first steps: on text nothing predicts it does not open with a draft
// step that fails, on extraction traffic it drafts from its first step. With no history
// yet the prior is one kept draft in two.
//
// All of it per draft source (Sourced): a chain's members are kept at rates far apart (on
// the bench's extraction answers, 78% of first drafts after a prompt match of two or
// three tokens, 29% after one), and one rate for all of them drafted as far after a weak
// match as after a strong one. A source with no engine history of its own starts from the
// engine's rate over all sources.
func (e *Engine) acceptance(s *seqState, src int) float64 {
	pg := 0.5
	var k, m float64
	for i := range maxSources {
		k, m = k+e.pkept[i], m+e.pmissed[i]
	}
	if k+m >= 2 {
		pg = k / (k + m)
	}
	if t := e.pkept[src] + e.pmissed[src]; t >= 2 {
		pg = e.pkept[src] / t
	}
	return (s.kept[src] + 2*pg) / (s.kept[src] + s.missed[src] + 2)
}

// observeAcceptance adds a sequence's step to the engine's acceptance rate of draft source
// src (pkept, pmissed). Calibrate's arbitrary drafts are not counted.
func (e *Engine) observeAcceptance(src, kept int, miss bool) {
	if e.calib != nil {
		return
	}
	e.pkept[src], e.pmissed[src] = 0.98*e.pkept[src]+float64(kept), 0.98*e.pmissed[src]+float64(b2i(miss))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// propose returns the drafts for the sequence's next step: the grammar's forced text first
// (SchemaDrafts), then the Proposer's continuation, each as long as the measured step costs
// say pays at its acceptance (draftLen), cut where the grammar rejects them.
func (s *seqState) propose(e *Engine, sampling int) []int {
	// Drafts up to the last position this sequence may compute: its last token is never
	// computed, so at most MaxTokens-gen-1 of them can still be used.
	k := min(s.req.MaxDraft, s.req.MaxTokens-s.gen-1)
	if e.maxVerify > 0 {
		k = min(k, e.maxVerify/sampling-1)
	}
	s.nForced = 0
	if k <= 0 {
		return nil
	}
	length := func(p float64) int {
		if s.req.FixedDraft {
			return k
		}
		return e.costs.draftLen(k, sampling, p)
	}
	var draft []int
	if s.req.SchemaDrafts {
		if f, ok := s.req.Processor.(Forcer); ok {
			if ids, _ := forcedTokens(f, e); len(ids) > 0 {
				draft = ids[:min(len(ids), length(s.fkept/(s.fkept+s.fmissed)))]
				s.nForced = len(draft)
			}
		}
	}
	if s.req.Proposer != nil && k > len(draft) {
		// The longest draft first, then as much of it as its source's acceptance pays for
		// (a proposer's shorter draft is a prefix of its longer one).
		ctx := s.tokens
		if len(draft) > 0 {
			ctx = append(slices.Clone(s.tokens), draft...)
		}
		more, src := proposeSource(s.req.Proposer, ctx, k-len(draft))
		if len(more) > 0 {
			s.src = src
			kp := length(e.acceptance(s, src))
			if kp == 0 && len(draft) == 0 {
				s.shadow = more[0]
			}
			if kp > len(draft) {
				draft = append(draft, more[:min(len(more), kp-len(draft))]...)
			}
		}
	}
	if s.matcher != nil { // a draft the grammar rejects is not worth verifying
		draft = draft[:s.matcher.ValidPrefix(draft)]
		s.nForced = min(s.nForced, len(draft))
	}
	s.st.DraftedTokens += len(draft)
	s.st.SchemaDrafted += s.nForced
	for len(s.st.DraftedAt) < len(draft) {
		s.st.DraftedAt, s.st.AcceptedAt = append(s.st.DraftedAt, 0), append(s.st.AcceptedAt, 0)
	}
	for i := range draft {
		s.st.DraftedAt[i]++
	}
	return draft
}

// next picks the sequence's next token from its logits (the model's buffer, which the
// processor may change) and applies the stop rules and the length limit.
func (s *seqState) next(logits []float32, e *Engine) (Token, bool, error) {
	src := Sampled
	if p := s.req.Processor; p != nil {
		if err := p.Process(logits); err != nil {
			return Token{}, false, err
		}
		if s.matcher != nil {
			s.st.MaskTime, s.st.Masks = s.matcher.MaskTime, s.matcher.Masks
		}
		if onlyOne(logits[:e.vocab]) {
			src = Forced
			s.st.ForcedTokens++
		}
	}
	ch, err := s.sampler.Sample(logits)
	if err != nil {
		return Token{}, false, err
	}
	s.sampler.Accept(ch.ID)
	if p := s.req.Processor; p != nil {
		if err := p.Accept(ch.ID); err != nil {
			return Token{}, false, err
		}
	}
	s.gen++
	s.st.CompletionTokens = s.gen
	tok := Token{ID: ch.ID, Source: src}
	if s.logprobs {
		tok.Logprob = &TokenLogprobs{ID: ch.ID, Logprob: ch.Logprob, Top: slices.Clone(ch.TopLogprobs)}
	}
	switch {
	case slices.Contains(s.stopIDs, ch.ID):
		s.finished = true
	default:
		if piece := s.stream.Next(ch.ID); piece != "" {
			var stopped bool
			tok.Text, stopped = s.stop.Write(piece)
			s.finished = stopped
		}
	}
	if s.finished {
		return tok, true, nil
	}
	return tok, s.gen >= s.req.MaxTokens, nil
}

// jump appends the text the grammar forces after the sequence's last token, as the
// tokenizer encodes it. The boundary with what the model writes next needs care (the
// retokenization problem): the tokenizer might have merged the end of the forced text with
// what follows (`"name": "` with a value's first letters, or a specialized vocabulary's
// `, "grammar": 3, "coherence":`). So, with a grammar that can tell (Matcher.Extends), each
// forced token is appended only while no token the grammar allows at that point runs past the
// end of the forced text; without one, every token but the last is. Each goes through the
// processor, the streaming decoder, the stop strings and the length limit as a sampled one
// would. It reports whether the sequence is done.
func (s *seqState) jump(f Forcer, e *Engine) ([]Token, bool, error) {
	ids, text := forcedTokens(f, e)
	if len(ids) == 0 {
		return nil, false, nil
	}
	x, canTell := f.(interface{ Extends([]byte) bool })
	if !canTell {
		ids = ids[:len(ids)-1]
	}
	var out []Token
	at := 0
	for _, id := range ids {
		if canTell && x.Extends(text[at:]) {
			break
		}
		if s.gen >= s.req.MaxTokens {
			return out, true, nil
		}
		tok, stopped, err := s.appendJumped(f, id)
		if err != nil {
			return nil, false, err
		}
		out = append(out, tok)
		if stopped {
			return out, true, nil
		}
		at += len(e.tok.TokenBytes(id))
	}
	return out, s.gen >= s.req.MaxTokens, nil
}

// forcedTokens returns the text the grammar forces next and the tokens the tokenizer spells
// it with. The tokens must spell it exactly: a tokenizer that adds a prefix space
// (SentencePiece's dummy prefix) or normalizes the text would write something else, so then
// there are none and the tokens are sampled instead.
func forcedTokens(f Forcer, e *Engine) ([]int, []byte) {
	text := f.Forced()
	if len(text) == 0 {
		return nil, nil
	}
	ids := e.tok.Encode(string(text), false)
	var spelled []byte
	for _, id := range ids {
		spelled = append(spelled, e.tok.TokenBytes(id)...)
	}
	if !bytes.Equal(text, spelled) {
		return nil, nil
	}
	return ids, text
}

// appendJumped appends one forced token as jump-forward does: through the processor, the
// streaming decoder and the stop strings, as a sampled one would go. It reports whether a
// stop string ended the sequence.
func (s *seqState) appendJumped(f Forcer, id int) (Token, bool, error) {
	if err := f.Accept(id); err != nil {
		return Token{}, false, err
	}
	s.sampler.Accept(id)
	s.gen++
	s.st.CompletionTokens = s.gen
	s.st.JumpedTokens++
	s.st.ForcedTokens++
	if s.tokens != nil {
		s.tokens = append(s.tokens, id)
	}
	tok := Token{ID: id, Source: Jumped}
	if piece := s.stream.Next(id); piece != "" {
		var stopped bool
		tok.Text, stopped = s.stop.Write(piece)
		if stopped {
			s.finished = true
			return tok, true, nil
		}
	}
	return tok, false, nil
}

// finishReason is why a done sequence ended.
func (s *seqState) finishReason() string {
	if s.finished {
		return FinishStop
	}
	return FinishLength
}

// onlyOne reports whether exactly one logit is above -Inf: the processor forced the token.
func onlyOne(logits []float32) bool {
	n := 0
	for _, l := range logits {
		if !math.IsInf(float64(l), -1) {
			if n++; n > 1 {
				return false
			}
		}
	}
	return n == 1
}

// stepCosts is what decode steps have been measured to cost by the sequences in them and
// the tokens they compute: a step of one token per sequence, and steps with drafts. On a
// CPU where decode is not bandwidth-bound (a small model, few cores) a step of n tokens
// costs nearly n times one of one token, and drafts lose time; on one where it is, they are
// nearly free. The engine measures instead of assuming.
//
// A row per number of sequences: a step of 16 sequences of one token is not a step of one
// sequence of 16 (SmolLM2-135M Q4_1 on 2 cores: 70 ms against 40, and each draft added to
// the 16 sequences cost 10-15 ms against 2.5 for a token of the single sequence), so a
// table by tokens alone, calibrated on one sequence, priced 16 streams' drafts as cheap and
// they ran at 0.79x the plain rate.
//
// They are a property of the model on this machine, so every engine of a model shares one
// table (costsOf): a loop of one-request generations learns once.
type stepCosts struct {
	mu   sync.Mutex
	rows map[int]*costRow // by the number of sequences in the step
}

// costRow is the steps of one number of sequences by their tokens.
type costRow struct {
	ms   [maxCostTokens + 1]float64 // decayed mean duration of decode steps of n tokens
	seen [maxCostTokens + 1]bool
	// calib: ms[n] is Calibrate's and no step of n tokens has been served yet; cal1 is
	// Calibrate's one-token step.
	calib [maxCostTokens + 1]bool
	cal1  float64
	// What this row's steps delivered: tokens emitted per millisecond, decayed, for steps
	// that verified drafts (yDraft) and plain ones (yPlain), with their counts, and the
	// plain steps since the last drafted one (observe, draftsLose).
	yDraft, yPlain float64
	nDraft, nPlain int
	plainRun       int
}

// Drafts are judged twice. draftLen predicts from the acceptance and the step-cost table;
// draftsLose then checks what steps of this many sequences actually delivered. The
// prediction alone drafted where it lost: at 16 streams on an Ice Lake Xeon (SmolLM2-135M
// Q4_1, extraction) the table said a step of sixteen sequences' drafts paid, the steps kept
// 80% of their drafts, and served 0.92× the plain rate (the table's longer steps are
// estimated from a calibration of one sequence with a short context, and a full batch's
// attention over long ones costs more). A row whose drafted steps yield fewer tokens per
// millisecond than its plain ones, each measured over at least yieldMin steps, drafts
// again only once every yieldProbe steps, to see whether that still holds. Rows of several
// sequences only: one sequence's steps of every length are what Calibrate measures and
// served steps then replace, so its table is not an estimate from another row's shape, and
// its drafted steps mix sources kept at very different rates (TestAcceptanceBySource: the
// guard there stopped the right source's drafts after the wrong one's early misses).
const (
	yieldMin   = 8
	yieldProbe = 32
	yieldDecay = 0.8
)

// draftsLose reports whether the row's drafted steps deliver less than its plain ones (and
// it is not yet time to probe again); c.mu is held.
func (r *costRow) draftsLose() bool {
	return r.nDraft >= yieldMin && r.nPlain >= yieldMin && r.yDraft < r.yPlain && r.plainRun < yieldProbe
}

// at is the cost of a step of n tokens, measured. An entry that only Calibrate has measured
// is scaled by what served one-token steps cost against Calibrate's one: the calibration
// runs once, in about a second, and a busy moment then (another server starting beside it
// on the same cores) made every step there look many times dearer, the one-token step
// 95-98 ms against the 6-7 it costs. Served plain steps corrected the one-token entry, but
// drafts were then judged by calibrated lengths 20 times its cost, never paid, were never
// tried, and so never measured: speculation stayed off for the server's life. The ratio
// of lengths, what drafts are judged by, is what a busy moment changes least.
func (r *costRow) at(n int) float64 {
	if r.calib[n] && !r.calib[1] && r.cal1 > 0 { // cal1 > 0: Calibrate set ms[1] too
		return r.ms[n] * r.ms[1] / r.cal1
	}
	return r.ms[n]
}

// modelCosts maps weak.Pointer[model.Model] to *stepCosts: weak, so that the table does not
// keep a closed model's weights reachable (a dead model leaves a few hundred bytes).
var modelCosts sync.Map

// costsOf is the step-cost table of m's engines.
func costsOf(m *model.Model) *stepCosts {
	c, _ := modelCosts.LoadOrStore(weak.Make(m), &stepCosts{})
	return c.(*stepCosts)
}

// maxCostTokens is the largest step measured: 16 sequences each verifying 15 drafts.
const maxCostTokens = 256

// row is the row of steps of seqs sequences, made on first use; c.mu is held.
func (c *stepCosts) row(seqs int) *costRow {
	if c.rows == nil {
		c.rows = map[int]*costRow{}
	}
	r := c.rows[seqs]
	if r == nil {
		r = &costRow{}
		c.rows[seqs] = r
	}
	return r
}

// observe records a decode step (no prompt work in it) and the tokens its outputs emitted.
func (c *stepCosts) observe(step sched.Step, outs []sched.Output, d time.Duration) {
	n := step.Tokens()
	if n > maxCostTokens || len(step.Work) == 0 {
		return
	}
	for _, w := range step.Work {
		if w.Prefill {
			return
		}
	}
	v := float64(d) / 1e6
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.row(len(step.Work))
	if v > 0 {
		// What sampling and verification decided: jump-forward's forced tokens come
		// without either, drafting or not, and are computed by the next step as tokens
		// of its own, so a step is drafted by its drafts, not by its length.
		emitted, drafted := 0, false
		for _, o := range outs {
			emitted += 1 + len(o.Accepted)
		}
		for _, w := range step.Work {
			drafted = drafted || w.Draft > 0
		}
		y := float64(emitted) / v
		if drafted {
			r.yDraft = yieldDecay*r.yDraft + (1-yieldDecay)*y
			if r.nDraft == 0 {
				r.yDraft = y
			}
			r.nDraft++
			r.plainRun = 0
		} else {
			r.yPlain = yieldDecay*r.yPlain + (1-yieldDecay)*y
			if r.nPlain == 0 {
				r.yPlain = y
			}
			r.nPlain++
			r.plainRun++
		}
	}
	if !r.seen[n] || r.calib[n] { // the first served step of n tokens replaces Calibrate's
		r.ms[n], r.seen[n], r.calib[n] = v, true, false
		return
	}
	r.ms[n] = 0.9*r.ms[n] + 0.1*v
}

// set replaces the entries of one-sequence steps for the measured lengths (Calibrate).
func (c *stepCosts) set(m []StepCost) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.row(1)
	for _, p := range m {
		if p.Tokens >= 1 && p.Tokens <= maxCostTokens {
			r.ms[p.Tokens], r.seen[p.Tokens], r.calib[p.Tokens] = p.Ms, true, true
			if p.Tokens == 1 {
				r.cal1 = p.Ms
			}
		}
	}
}

// cost estimates a decode step of seqs sequences and n tokens in all, from the steps of
// that many sequences: measured, or interpolated between measured neighbours. Past the
// longest measured, a row of several sequences follows the shape of the one-sequence row
// where that has the lengths (Calibrate measures them): the longest measured step of the
// row times one-sequence cost(n)/cost(that length). Otherwise it is extrapolated along the
// line through the row's two longest measured steps — or, with only one, as cheap as it,
// so that a longer step is tried once and measured. c.mu is held.
func (c *stepCosts) cost(seqs, n int) (float64, bool) {
	r := c.rows[seqs]
	if r == nil {
		return 0, false
	}
	if seqs > 1 && n <= maxCostTokens && !r.seen[n] {
		if lo, hi := r.bounds(n); lo > 0 && hi < 0 {
			if one := c.rows[1]; one != nil {
				// It needs two measured lengths up to n for a shape (one gives a flat line).
				l1, _ := one.bounds(n)
				l0, _ := one.bounds(l1 - 1)
				if l1 > 0 && (l1 == n || l0 > 0) {
					a, _ := one.cost(lo)
					b, _ := one.cost(n)
					if a > 0 {
						return r.at(lo) * b / a, true
					}
				}
			}
		}
	}
	return r.cost(n)
}

// bounds returns the longest measured length ≤ n and the shortest > n (-1: none).
func (r *costRow) bounds(n int) (lo, hi int) {
	lo, hi = -1, -1
	for i := min(n, maxCostTokens); i >= 1; i-- {
		if r.seen[i] {
			lo = i
			break
		}
	}
	for i := n + 1; i <= maxCostTokens; i++ {
		if r.seen[i] {
			hi = i
			break
		}
	}
	return lo, hi
}

// cost is stepCosts.cost within the row alone.
func (r *costRow) cost(n int) (float64, bool) {
	if n <= maxCostTokens && r.seen[n] {
		return r.at(n), true
	}
	lo, hi := r.bounds(n)
	switch {
	case lo < 0 && hi < 0:
		return 0, false
	case hi < 0:
		for i := lo - 1; i >= 1; i-- {
			if r.seen[i] {
				slope := (r.at(lo) - r.at(i)) / float64(lo-i)
				return r.at(lo) + max(slope, 0)*float64(n-lo), true
			}
		}
		return r.at(lo), true
	case lo < 0:
		return r.at(hi), true
	}
	f := float64(n-lo) / float64(hi-lo)
	return r.at(lo)*(1-f) + r.at(hi)*f, true
}

// draftLen picks how many drafts (0..max) a sequence asks for in a step of batch sampling
// sequences, given the chance p that a draft is kept: the expected tokens of k drafts are
// 1 + p + ... + p^k (the drafts are kept in order until the first miss, plus the sampled
// token), and k is the one that gives the most tokens per millisecond of step. Every
// sequence of the batch decides the same way at once, so the step it judges is the batch
// drafting alike: batch·(k+1) tokens. (Judging batch+k, as if it alone drafted, made each of
// 16 streams add drafts to a step that then carried 16 times as many: SmolLM2 Q4_1 at 16
// streams fell to half the plain rate.) Until a plain step of the batch's size is measured it
// drafts none; a longer step not measured yet is estimated by cost.
func (c *stepCosts) draftLen(max, batch int, p float64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if batch > maxCostTokens {
		return 0
	}
	r := c.rows[batch]
	if r == nil || !r.seen[batch] {
		return 0 // measure a plain step first: the drafts' cost is judged against it
	}
	if batch > 1 && r.draftsLose() {
		return 0
	}
	best, bestRate := 0, 0.0
	expected, pk := 1.0, 1.0
	for k := 0; k <= max; k++ {
		if k > 0 {
			pk *= p
			expected += pk
		}
		n := batch * (k + 1)
		if n > maxCostTokens {
			break
		}
		ms, _ := c.cost(batch, n)                        // known: the plain step is measured
		if rate := expected / ms; rate > bestRate*1.02 { // a longer draft must pay by 2%
			best, bestRate = k, rate
		}
	}
	return best
}
