package server

import (
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/engine/sched"
)

// The runner loop is the one goroutine that owns the engine (its scheduler, KV cache and
// every running request's sampler). Each iteration: take in new requests and
// cancellations, run one engine step (engine.Engine.Step: schedule, one batched forward
// pass, sampling), and pass each request its tokens and, at the end, its usage. HTTP
// handlers talk to it only through channels, and it never blocks on a handler: each
// request's event channel has room for every event the request can produce.

// event is what a request's handler receives: one per generated token, then a final one.
type event struct {
	text     string // text this token completes (whole UTF-8; may be empty)
	token    int
	source   engine.Source
	logprob  *engine.TokenLogprobs
	done     bool
	finish   string // stop, length
	usage    Usage
	steps    []stepSpan // the final event's, with stream_options.include_tokens
	err      error
	internal bool // err is the server's fault (500), not the request's
}

// genRequest is one request in flight. The fields below the line are the runner's.
type genRequest struct {
	id        sched.SeqID
	prompt    []int
	maxTokens int
	p         genParams
	arrival   time.Time
	events    chan event

	admitted, firstToken, lastToken time.Time
	out                             []int      // the completion's ids, for the draft index
	steps                           []stepSpan // with stream_options.include_tokens: the timeline
}

// stepSpan is one engine step a request took part in, for the web page's timeline.
type stepSpan struct {
	StartMs float64 `json:"start_ms"` // since the request arrived
	Ms      float64 `json:"ms"`       // the whole step (forward pass and sampling)
	ShareMs float64 `json:"share_ms"` // the request's share of it, as usage charges it
	Prefill bool    `json:"prefill"`  // the step computed prompt tokens of this request
	Tokens  int     `json:"tokens"`   // this request's tokens in the step (prompt chunk, or decode + drafts)
	Draft   int     `json:"draft,omitempty"`
	Batch   int     `json:"batch"` // sequences in the step
}

// errShutdown ends the requests still running when the server closes.
var errShutdown = errors.New("server shutting down")

type submission struct {
	r     *genRequest
	reply chan error
}

// loop runs until stop is closed, then cancels whatever is left.
func (s *Server) loop() {
	defer close(s.loopDone)
	defer s.cancelAll(errShutdown)
	for {
		if s.eng.Idle() && !s.waitIn(nil) {
			return
		}
		if !s.takeIn() {
			return
		}
		if s.eng.Idle() {
			continue
		}
		rep, err := s.eng.Step()
		if len(rep.Step.Work) == 0 {
			// Cannot happen with admission checks in place (a lone request always fits);
			// wait for a change rather than spin.
			s.updateGauges()
			if !s.waitIn(time.After(10 * time.Millisecond)) {
				return
			}
			continue
		}
		if err != nil {
			slog.Error("step failed", "err", err, "step", rep.Step.String()) // it fails the requests in it, not the server
		}
		s.deliver(rep)
		s.updateGauges()
	}
}

// waitIn blocks until a submission or a cancellation arrives (and takes it in) or timeout
// fires (nil: never); it reports false once stop is closed.
func (s *Server) waitIn(timeout <-chan time.Time) bool {
	select {
	case sub := <-s.submit:
		s.admit(sub)
	case id := <-s.cancels:
		s.cancel(id)
	case <-s.stop:
		return false
	case <-timeout:
	}
	return true
}

// takeIn admits the submissions and applies the cancellations waiting on the channels,
// without blocking; it reports false once stop is closed.
func (s *Server) takeIn() bool {
	for {
		select {
		case sub := <-s.submit:
			s.admit(sub)
		case id := <-s.cancels:
			s.cancel(id)
		case <-s.stop:
			return false
		default:
			return true
		}
	}
}

// beforeStep runs before each engine step executes: the step's blocks are allocated now,
// before any of its tokens is seen, so the gauges say so; then the test hook.
func (s *Server) beforeStep(step sched.Step) {
	s.updateGauges()
	if s.cfg.beforeStep != nil {
		s.cfg.beforeStep(step)
	}
}

// admit queues a request with the engine and answers the handler.
func (s *Server) admit(sub submission) {
	r := sub.r
	req := engine.Request{ID: r.id, Prompt: r.prompt, MaxTokens: r.maxTokens, Sampler: r.p.sampler,
		Stop: r.p.stop, IgnoreEOS: r.p.ignoreEOS, Arrival: r.arrival, Grammar: r.p.grammar,
		NoJumpForward: r.p.noJump}
	if r.p.speculate {
		if s.cfg.Speculate != nil {
			req.Proposer = s.cfg.Speculate
		}
		req.MaxDraft, req.FixedDraft = s.cfg.MaxDraft, s.cfg.FixedDraft
		req.SchemaDrafts = s.cfg.SchemaDrafts && req.Grammar != nil
	}
	err := s.eng.Add(req)
	switch {
	case errors.Is(err, sched.ErrQueueFull):
		sub.reply <- err
		return
	case err != nil:
		sub.reply <- badRequest("", "%v", err)
		return
	}
	s.reqs[r.id] = r
	s.updateGauges()
	sub.reply <- nil
}

// cancel drops a request whose client went away or timed out: its blocks are freed now.
func (s *Server) cancel(id sched.SeqID) {
	if _, ok := s.reqs[id]; !ok {
		return
	}
	delete(s.reqs, id)
	s.eng.Cancel(id)
	s.met.aborted.Inc()
	s.updateGauges()
}

// cancelAll ends every request with err (shutdown).
func (s *Server) cancelAll(err error) {
	for id, r := range s.reqs {
		r.events <- event{done: true, err: err, internal: true}
		s.eng.Cancel(id)
		delete(s.reqs, id)
	}
	s.updateGauges()
}

// deliver passes a step's tokens and finished requests to their handlers and records the
// metrics. Token times are the step's end: when the tokens reach the handlers.
func (s *Server) deliver(rep engine.StepReport) {
	now := rep.Start.Add(rep.Dur)
	for _, id := range rep.Step.Admitted {
		if r := s.reqs[id]; r != nil && r.admitted.IsZero() {
			r.admitted = rep.Start
			s.met.queueTime.Observe(rep.Start.Sub(r.arrival).Seconds())
		}
	}
	s.met.preemptions.Add(float64(len(rep.Step.Preempted)))
	total := rep.Step.Tokens()
	for _, w := range rep.Step.Work {
		if w.Prefill {
			s.met.promptTokens.Add(float64(len(w.Tokens)))
			s.web.prompt.Add(int64(len(w.Tokens)))
		}
		if r := s.reqs[w.Seq]; r != nil && r.p.tokens {
			// The share is engine.charge's rule, so the spans add up to the usage's ms.
			r.steps = append(r.steps, stepSpan{StartMs: ms(rep.Start.Sub(r.arrival)), Ms: ms(rep.Dur),
				ShareMs: ms(rep.Dur) * float64(len(w.Tokens)) / float64(total),
				Prefill: w.Prefill, Tokens: len(w.Tokens), Draft: w.Draft, Batch: len(rep.Step.Work)})
		}
		if w.Draft > 0 {
			s.met.specDrafts.Inc()
			s.met.specDraftTokens.Add(float64(w.Draft))
		}
	}
	for _, tk := range rep.Tokens {
		r := s.reqs[tk.Seq]
		if r == nil {
			continue
		}
		s.met.genTokens.Inc()
		s.web.generated.Add(1)
		if r.firstToken.IsZero() {
			r.firstToken = now
			s.met.ttft.Observe(now.Sub(r.arrival).Seconds())
		} else {
			s.met.itl.Observe(now.Sub(r.lastToken).Seconds())
		}
		r.lastToken = now
		if tk.Source == engine.Drafted {
			s.met.specAccepted.Inc()
		}
		if s.cfg.DraftIndex != nil {
			r.out = append(r.out, tk.ID)
		}
		r.events <- event{token: tk.ID, text: tk.Text, source: tk.Source, logprob: tk.Logprob}
	}
	for _, f := range rep.Finished {
		r := s.reqs[f.Seq]
		if r == nil {
			continue
		}
		delete(s.reqs, f.Seq)
		if f.Err != nil {
			r.events <- event{done: true, err: f.Err, internal: true}
			continue
		}
		// vLLM's phase histograms: prefill from admission to the first token, decode from
		// there to the last.
		s.met.prefillTime.Observe(r.firstToken.Sub(r.admitted).Seconds())
		s.met.decodeTime.Observe(r.lastToken.Sub(r.firstToken).Seconds())
		s.met.e2e.Observe(now.Sub(r.arrival).Seconds())
		s.met.success.Inc()
		if f.Stats.Masks > 0 {
			s.met.grammarMaskSeconds.Add(f.Stats.MaskTime.Seconds())
			s.met.grammarMasks.Add(float64(f.Stats.Masks))
			s.met.grammarForced.Add(float64(f.Stats.ForcedTokens))
			s.met.grammarJumped.Add(float64(f.Stats.JumpedTokens))
		}
		if f.Stats.DraftedTokens > 0 {
			s.met.specSchemaDraft.Add(float64(f.Stats.SchemaDrafted))
			s.met.specSchemaAccepted.Add(float64(f.Stats.SchemaAccepted))
			for i, n := range f.Stats.AcceptedAt {
				s.met.specAcceptedAt.WithLabelValues(strconv.Itoa(i)).Add(float64(n))
			}
		}
		if s.cfg.DraftIndex != nil {
			s.cfg.DraftIndex.Add(r.out) // the domain index learns from every finished answer
		}
		s.web.finished.Add(1)
		r.events <- event{text: f.Text, done: true, finish: f.Reason, usage: usageOf(f.Stats), steps: r.steps}
	}
}

// usageOf is a finished request's usage: its tokens, and its own share of the time of the
// steps it ran in (engine.Stats), prefill and decode apart.
func usageOf(st engine.Stats) Usage {
	return Usage{
		PromptTokens: st.PromptTokens, CompletionTokens: st.CompletionTokens, TotalTokens: st.PromptTokens + st.CompletionTokens,
		PromptTokensDetails: &tokenDetails{CachedTokens: st.CachedTokens},
		QueueMs:             ms(st.Queue), TTFTMs: ms(st.TTFT),
		PrefillMs: ms(st.Prefill), PrefillSteps: st.PrefillSteps,
		DecodeMs: ms(st.Decode), DecodeSteps: st.DecodeSteps,
		DraftedTokens: st.DraftedTokens, AcceptedDrafts: st.AcceptedDrafts,
		SchemaDrafted: st.SchemaDrafted, SchemaAccepted: st.SchemaAccepted,
		ForcedTokens: st.ForcedTokens, JumpedTokens: st.JumpedTokens,
	}
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func (s *Server) updateGauges() {
	sch := s.eng.Scheduler()
	kv := sch.KV()
	s.met.running.Set(float64(sch.NumRunning()))
	s.met.waiting.Set(float64(sch.NumWaiting()))
	s.met.kvUsage.Set(kv.Usage())
	// The manager counts prefix lookups since the start; pass on what is new.
	s.met.prefixQueries.Add(float64(kv.Queries - s.seenQueries))
	s.met.prefixHits.Add(float64(kv.Hits - s.seenHits))
	s.seenQueries, s.seenHits = kv.Queries, kv.Hits
	s.web.snap.Store(&statusSnapshot{Running: sch.NumRunning(), Waiting: sch.NumWaiting(),
		BlocksUsed: kv.NumBlocks() - kv.NumFree(), Blocks: kv.NumBlocks(), PrefixQueries: kv.Queries, PrefixHits: kv.Hits})
}
