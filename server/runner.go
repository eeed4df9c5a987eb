package server

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/engine/sched"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// The runner loop is the one goroutine that owns the scheduler, the KV cache and every
// running request's sampler. Each iteration: take in new requests and cancellations, ask
// the scheduler for a step, run it as one batched forward pass, sample the sequences that
// reached their last token, and tell the scheduler what happened. HTTP handlers talk to it
// only through channels, and it never blocks on a handler: each request's event channel
// has room for every event the request can produce.

// event is what a request's handler receives: one per generated token, then a final one.
type event struct {
	text     string // text this token completes (whole UTF-8; may be empty)
	token    int
	logprob  *engine.TokenLogprobs
	done     bool
	finish   string // stop, length
	usage    Usage
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

	sampler      *engine.Sampler
	stream       *tokenizer.StreamDecoder
	stop         engine.StopText
	gen          int
	admitted     time.Time
	firstToken   time.Time
	lastToken    time.Time
	cached       int
	prefillDur   time.Duration
	decodeDur    time.Duration
	prefillSteps int
	decodeSteps  int
	finish, tail string // why it ended, and the text held back until then
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
		if s.sch.Idle() {
			select {
			case sub := <-s.submit:
				s.admit(sub)
			case id := <-s.cancels:
				s.cancel(id)
			case <-s.stop:
				return
			}
		}
	drain:
		for {
			select {
			case sub := <-s.submit:
				s.admit(sub)
			case id := <-s.cancels:
				s.cancel(id)
			case <-s.stop:
				return
			default:
				break drain
			}
		}
		if s.sch.Idle() {
			continue
		}
		step := s.sch.Schedule()
		if len(step.Work) == 0 {
			// Cannot happen with admission checks in place (a lone request always fits);
			// wait for a change rather than spin.
			s.updateGauges()
			select {
			case sub := <-s.submit:
				s.admit(sub)
			case id := <-s.cancels:
				s.cancel(id)
			case <-s.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		s.updateGauges() // blocks are allocated now, before any token of this step is seen
		s.execute(step)
		s.updateGauges()
	}
}

// admit queues a request with the scheduler and answers the handler.
func (s *Server) admit(sub submission) {
	r := sub.r
	sampler, err := engine.NewSampler(r.p.sampler, s.vocab)
	if err != nil {
		sub.reply <- badRequest("", "%v", err)
		return
	}
	sampler.SetPrompt(r.prompt)
	if err := s.sch.Add(sched.Request{ID: r.id, Prompt: r.prompt, MaxTokens: r.maxTokens}); err != nil {
		if errors.Is(err, sched.ErrQueueFull) {
			sub.reply <- err
		} else {
			sub.reply <- badRequest("", "%v", err)
		}
		return
	}
	r.sampler = sampler
	r.stream = s.tok.NewStreamDecoder(true)
	r.stop = engine.StopText{Stops: r.p.stop}
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
	s.sch.Cancel(id)
	s.met.aborted.Inc()
	s.updateGauges()
}

// cancelAll ends every request with err (shutdown, or a failed step).
func (s *Server) cancelAll(err error) {
	for id, r := range s.reqs {
		r.events <- event{done: true, err: err, internal: true}
		s.sch.Cancel(id)
		delete(s.reqs, id)
	}
	s.updateGauges()
}

// execute runs one step and feeds its results back to the scheduler.
func (s *Server) execute(step sched.Step) {
	now := time.Now()
	for _, id := range step.Admitted {
		if r := s.reqs[id]; r != nil && r.admitted.IsZero() {
			r.admitted = now
			s.met.queueTime.Observe(now.Sub(r.arrival).Seconds())
		}
	}
	for _, w := range step.Work {
		if r := s.reqs[w.Seq]; r != nil && slices.Contains(step.Admitted, w.Seq) && r.gen == 0 {
			r.cached = w.Start // tokens the prefix cache supplied at first admission
		}
	}
	s.met.preemptions.Add(float64(len(step.Preempted)))

	chunks := make([]model.Chunk, len(step.Work))
	for i, w := range step.Work {
		chunks[i] = model.Chunk{Tokens: w.Tokens, Start: w.Start, Blocks: w.Blocks, Logits: w.Sample}
	}
	logits, err := s.forward(chunks)
	var outs []sched.Output
	if err == nil {
		outs, err = s.sample(step, logits)
	}
	dur := time.Since(now)
	if err != nil {
		// A failed step fails the requests in it, not the server.
		slog.Error("step failed", "err", err, "step", step.String())
		for _, w := range step.Work {
			if r := s.reqs[w.Seq]; r != nil {
				r.events <- event{done: true, err: fmt.Errorf("engine step failed: %w", err), internal: true}
				delete(s.reqs, w.Seq)
			}
			s.sch.Cancel(w.Seq)
		}
		return
	}
	for _, w := range step.Work {
		r := s.reqs[w.Seq]
		if r == nil {
			continue
		}
		if w.Prefill {
			s.met.promptTokens.Add(float64(len(w.Tokens)))
			r.prefillDur += dur
			r.prefillSteps++
		} else {
			r.decodeDur += dur
			r.decodeSteps++
		}
	}
	s.sch.Update(step, outs)
	s.finishDone(outs)
}

// forward runs the batched pass, turning a panic into an error.
func (s *Server) forward(chunks []model.Chunk) (logits [][]float32, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in forward pass: %v\n%s", p, debug.Stack())
		}
	}()
	return s.pc.Forward(chunks)
}

// sample picks the next token of every sequence that reached its last token, streams it,
// and decides whether the sequence is done.
func (s *Server) sample(step sched.Step, logits [][]float32) (outs []sched.Output, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic while sampling: %v\n%s", p, debug.Stack())
		}
	}()
	now := time.Now()
	for i, w := range step.Work {
		if !w.Sample {
			continue
		}
		r := s.reqs[w.Seq]
		if r == nil {
			continue
		}
		ch, err := r.sampler.Sample(logits[i])
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", w.Seq, err)
		}
		r.sampler.Accept(ch.ID)
		r.gen++
		s.met.genTokens.Inc()
		if r.firstToken.IsZero() {
			r.firstToken = now
			s.met.ttft.Observe(now.Sub(r.arrival).Seconds())
		} else {
			s.met.itl.Observe(now.Sub(r.lastToken).Seconds())
		}
		r.lastToken = now
		ev := event{token: ch.ID}
		if r.p.logprobs {
			ev.logprob = &engine.TokenLogprobs{ID: ch.ID, Logprob: ch.Logprob, Top: slices.Clone(ch.TopLogprobs)}
		}
		finish := ""
		if !r.p.ignoreEOS && slices.Contains(s.stopIDs, ch.ID) {
			finish = engine.FinishStop
		} else if piece := r.stream.Next(ch.ID); piece != "" {
			text, stopped := r.stop.Write(piece)
			ev.text = text
			if stopped {
				finish = engine.FinishStop
			}
		}
		if finish == "" && r.gen >= r.maxTokens {
			finish = engine.FinishLength
		}
		r.events <- ev
		outs = append(outs, sched.Output{Seq: w.Seq, Token: ch.ID, Done: finish != ""})
		if finish != "" {
			r.finish, r.tail = finish, r.stop.Flush()
		}
	}
	return outs, nil
}

// finishDone records the metrics of the requests that finished this step and forgets them.
// Their final event is sent here, after the step's time is in their usage.
func (s *Server) finishDone(outs []sched.Output) {
	for _, o := range outs {
		if !o.Done {
			continue
		}
		r := s.reqs[o.Seq]
		if r == nil {
			continue
		}
		delete(s.reqs, o.Seq)
		s.met.prefillTime.Observe(r.prefillDur.Seconds())
		s.met.decodeTime.Observe(r.decodeDur.Seconds())
		s.met.e2e.Observe(time.Since(r.arrival).Seconds())
		s.met.success.Inc()
		r.events <- event{text: r.tail, done: true, finish: r.finish, usage: r.usage()}
	}
}

// usage is the request's accounting so far.
func (r *genRequest) usage() Usage {
	u := Usage{
		PromptTokens: len(r.prompt), CompletionTokens: r.gen, TotalTokens: len(r.prompt) + r.gen,
		PromptTokensDetails: &tokenDetails{CachedTokens: r.cached},
		PrefillMs:           ms(r.prefillDur), PrefillSteps: r.prefillSteps,
		DecodeMs: ms(r.decodeDur), DecodeSteps: r.decodeSteps,
	}
	if !r.admitted.IsZero() {
		u.QueueMs = ms(r.admitted.Sub(r.arrival))
	}
	if !r.firstToken.IsZero() {
		u.TTFTMs = ms(r.firstToken.Sub(r.arrival))
	}
	return u
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func (s *Server) updateGauges() {
	kv := s.sch.KV()
	s.met.running.Set(float64(s.sch.NumRunning()))
	s.met.waiting.Set(float64(s.sch.NumWaiting()))
	s.met.kvUsage.Set(kv.Usage())
	// The manager counts prefix lookups since the start; pass on what is new.
	s.met.prefixQueries.Add(float64(kv.Queries - s.seenQueries))
	s.met.prefixHits.Add(float64(kv.Hits - s.seenHits))
	s.seenQueries, s.seenHits = kv.Queries, kv.Hits
}
