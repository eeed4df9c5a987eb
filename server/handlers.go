package server

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/tokenwise/tokenwise/engine"
)

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req completionRequest
	if aerr := decodeJSON(body, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	if aerr := s.checkModel(req.Model); aerr != nil {
		writeError(w, aerr)
		return
	}
	if req.Echo {
		writeError(w, badRequest("echo", "echo is not supported"))
		return
	}
	if req.Suffix != nil && *req.Suffix != "" {
		writeError(w, badRequest("suffix", "suffix is not supported"))
		return
	}
	p, aerr := req.params("max_tokens", req.MaxTokens)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	p.noJump = req.ResponseFormat != nil && req.ResponseFormat.JumpForward != nil && !*req.ResponseFormat.JumpForward
	if p.grammar, aerr = s.responseGrammar(req.ResponseFormat); aerr != nil {
		writeError(w, aerr)
		return
	}
	text, ids, aerr := promptInput(req.Prompt)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	if ids == nil {
		ids = s.tok.Encode(text, true)
	}
	logprobs, top := false, 0
	if req.Logprobs != nil {
		logprobs, top = true, *req.Logprobs
		if top < 0 || top > engine.MaxTopLogprobs {
			writeError(w, badRequest("logprobs", "logprobs %d: must be in [0, %d]", top, engine.MaxTopLogprobs))
			return
		}
	}
	s.generate(w, r, "cmpl", &req.samplingFields, ids, p, logprobs, top, false)
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req chatRequest
	if aerr := decodeJSON(body, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	if aerr := s.checkModel(req.Model); aerr != nil {
		writeError(w, aerr)
		return
	}
	maxName, maxTokens := "max_completion_tokens", req.MaxCompletionTokens
	if maxTokens == nil {
		maxName, maxTokens = "max_tokens", req.MaxTokens
	}
	p, aerr := req.params(maxName, maxTokens)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	p.noJump = req.ResponseFormat != nil && req.ResponseFormat.JumpForward != nil && !*req.ResponseFormat.JumpForward
	if p.grammar, aerr = s.responseGrammar(req.ResponseFormat); aerr != nil {
		writeError(w, aerr)
		return
	}
	ids, aerr := s.chatPrompt(req.Messages)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	top := 0
	if req.TopLogprobs != nil {
		if !req.Logprobs {
			writeError(w, badRequest("top_logprobs", "top_logprobs needs logprobs: true"))
			return
		}
		top = *req.TopLogprobs
	}
	s.generate(w, r, "chatcmpl", &req.samplingFields, ids, p, req.Logprobs, top, true)
}

// generate runs a validated request and writes the response (streamed or whole).
func (s *Server) generate(w http.ResponseWriter, r *http.Request, idPrefix string, f *samplingFields, ids []int, p genParams, logprobs bool, top int, chat bool) {
	p.tokens = f.Stream && f.StreamOptions != nil && f.StreamOptions.IncludeTokens
	g, aerr := s.prepare(ids, &p, logprobs, top)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	if aerr := s.start(ctx, g); aerr != nil {
		if aerr.status == 429 {
			w.Header().Set("Retry-After", "1")
		}
		writeError(w, aerr)
		return
	}
	// The id is unguessable (not the sequence number), so one client cannot name another's
	// response; created is this response's time, the same in each of its chunks.
	out := &responder{s: s, w: w, id: idPrefix + "-" + rand.Text(), created: time.Now().Unix(), chat: chat, logprobs: p.logprobs, tokens: p.tokens}
	if f.Stream {
		out.stream(ctx, g, f.StreamOptions != nil && f.StreamOptions.IncludeUsage)
		return
	}
	res, err := s.collect(ctx, g, nil)
	if err != nil {
		writeError(w, s.failure(ctx, err))
		return
	}
	u := res.usage
	if chat {
		text := res.text.String()
		choice := chatChoice{Message: &chatMessageOut{Role: "assistant", Content: &text}, FinishReason: &res.finish}
		if p.logprobs {
			choice.Logprobs = out.chatLogprobs(res.tokens)
		}
		writeJSON(w, 200, chatResponse{ID: out.id, Object: "chat.completion", Created: out.created, Model: s.cfg.ModelName, Choices: []chatChoice{choice}, Usage: &u})
		return
	}
	choice := completionChoice{Text: res.text.String(), FinishReason: &res.finish}
	if p.logprobs {
		choice.Logprobs = out.completionLogprobs(res.tokens, 0)
	}
	writeJSON(w, 200, completionResponse{ID: out.id, Object: "text_completion", Created: out.created, Model: s.cfg.ModelName, Choices: []completionChoice{choice}, Usage: &u})
}

// failure maps how a generation ended early to an API error.
func (s *Server) failure(ctx context.Context, err error) *apiError {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &apiError{status: 504, typ: "timeout_error", msg: fmt.Sprintf("request timed out after %v", s.cfg.RequestTimeout)}
	}
	if errors.Is(err, errShutdown) {
		return &apiError{status: 503, typ: "server_error", msg: "server shut down before the request finished"}
	}
	if errors.Is(err, context.Canceled) {
		return &apiError{status: 499, typ: "invalid_request_error", msg: "request cancelled"}
	}
	return &apiError{status: 500, typ: "server_error", msg: err.Error()}
}

// responder writes one request's response.
type responder struct {
	s        *Server
	w        http.ResponseWriter
	id       string
	created  int64
	chat     bool
	logprobs bool
	tokens   bool          // stream_options.include_tokens
	pending  []streamToken // tokens not sent yet (their text held back), for the next chunk
	offset   int           // text offset of the next token (completion logprobs)
}

// stream writes the request's events as server-sent events, ending with data: [DONE].
func (o *responder) stream(ctx context.Context, g *genRequest, includeUsage bool) {
	s, w := o.s, o.w
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(200)
	rc := http.NewResponseController(w)
	send := func(v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return err
		}
		return rc.Flush()
	}
	if o.chat {
		empty := ""
		first := chatChoice{Delta: &chatMessageOut{Role: "assistant", Content: &empty}}
		if err := send(o.chatChunk(first)); err != nil {
			s.abandon(g.id)
			return
		}
	}
	res, err := s.collect(ctx, g, func(ev event) error {
		var finish *string
		if ev.done {
			finish = &ev.finish
		}
		var lp []engine.TokenLogprobs
		if ev.logprob != nil {
			lp = []engine.TokenLogprobs{*ev.logprob}
		}
		if o.tokens && !ev.done {
			o.pending = append(o.pending, streamToken{ID: ev.token, Text: o.tokenText(ev.token), Source: ev.source.String(),
				Domain: s.domain[ev.token], Special: s.tok.IsSpecial(ev.token)})
		}
		if ev.text == "" && lp == nil && !ev.done {
			return nil // a token whose text is held back: its entry goes with the next chunk
		}
		var tw *chunkTokens
		if len(o.pending) > 0 {
			tw, o.pending = &chunkTokens{Tokens: o.pending}, nil
		}
		if o.chat {
			text := ev.text
			c := chatChoice{Delta: &chatMessageOut{Content: &text}, FinishReason: finish, Tokenwise: tw}
			if ev.done && text == "" {
				c.Delta = &chatMessageOut{}
			}
			if lp != nil {
				c.Logprobs = o.chatLogprobs(lp)
			}
			return send(o.chatChunk(c))
		}
		c := completionChoice{Text: ev.text, FinishReason: finish, Tokenwise: tw}
		if lp != nil {
			c.Logprobs = o.completionLogprobs(lp, o.offset)
		}
		o.offset += len(ev.text)
		return send(completionResponse{ID: o.id, Object: "text_completion", Created: o.created, Model: s.cfg.ModelName, Choices: []completionChoice{c}})
	})
	if err != nil {
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Tell a still-connected client why the stream ends early.
			_ = send(o.s.failure(ctx, err).body())
		}
		return
	}
	if includeUsage {
		u := res.usage
		var tw *chunkSteps
		if o.tokens {
			tw = &chunkSteps{Steps: res.steps}
			if tw.Steps == nil {
				tw.Steps = []stepSpan{}
			}
		}
		if o.chat {
			_ = send(chatResponse{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: s.cfg.ModelName, Choices: []chatChoice{}, Usage: &u, Tokenwise: tw})
		} else {
			_ = send(completionResponse{ID: o.id, Object: "text_completion", Created: o.created, Model: s.cfg.ModelName, Choices: []completionChoice{}, Usage: &u, Tokenwise: tw})
		}
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	_ = rc.Flush()
}

func (o *responder) chatChunk(c chatChoice) chatResponse {
	return chatResponse{ID: o.id, Object: "chat.completion.chunk", Created: o.created, Model: o.s.cfg.ModelName, Choices: []chatChoice{c}}
}

// tokenText is a token's own text, as logprobs show it.
func (o *responder) tokenText(id int) string { return o.s.tok.Decode([]int{id}, false) }

func (o *responder) chatLogprobs(toks []engine.TokenLogprobs) *chatLogprobs {
	out := &chatLogprobs{Content: []chatLogprob{}}
	for _, t := range toks {
		lp := o.chatLogprob(t.ID, t.Logprob)
		lp.TopLogprobs = []chatLogprob{}
		for _, a := range t.Top {
			lp.TopLogprobs = append(lp.TopLogprobs, o.chatLogprob(a.ID, a.Logprob))
		}
		out.Content = append(out.Content, lp)
	}
	return out
}

// chatLogprob is one token's entry. bytes are the token's raw bytes: a token holding part
// of a character (a byte-level or byte-fallback token) shows as U+FFFD in token, and its
// bytes are what lets a client put the character back together.
func (o *responder) chatLogprob(id int, lp float32) chatLogprob {
	text := o.tokenText(id)
	raw := o.s.tok.TokenBytes(id)
	if raw == nil {
		raw = []byte(text)
	}
	b := make([]int, len(raw))
	for i, c := range raw {
		b[i] = int(c)
	}
	return chatLogprob{Token: text, Logprob: lp, Bytes: b}
}

func (o *responder) completionLogprobs(toks []engine.TokenLogprobs, offset int) *completionLogprobs {
	out := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float32{}, TopLogprobs: []map[string]float32{}, TextOffset: []int{}}
	for _, t := range toks {
		text := o.tokenText(t.ID)
		out.Tokens = append(out.Tokens, text)
		out.TokenLogprobs = append(out.TokenLogprobs, t.Logprob)
		top := map[string]float32{}
		for _, a := range t.Top {
			k := o.tokenText(a.ID)
			if _, dup := top[k]; dup { // two ids with the same text: keep both visible
				k += "#" + strconv.Itoa(a.ID)
			}
			top[k] = a.Logprob
		}
		out.TopLogprobs = append(out.TopLogprobs, top)
		out.TextOffset = append(out.TextOffset, offset)
		offset += len(text)
	}
	return out
}
