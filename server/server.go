// Package server is tokenwise's OpenAI-compatible HTTP server: /v1/completions and
// /v1/chat/completions (streamed as server-sent events or not), /v1/models(/{id}), /tokenize,
// /detokenize, /health and Prometheus /metrics.
//
// Requests share the model through continuous batching: one runner goroutine loops over
// steps that engine/sched decides and model.PagedCache executes, so sequences join and
// leave the batch at every step and all decoding sequences share each weight read. A
// request whose client disconnects or times out is cancelled and its KV blocks are freed
// before the next step.
//
// Every response's usage carries the OpenAI token counts plus the request's prefill/decode
// split: queue_ms, ttft_ms, prefill_ms/prefill_steps (steps that computed its prompt) and
// decode_ms/decode_steps (steps that decoded its tokens), and
// prompt_tokens_details.cached_tokens (prompt tokens taken from the prefix cache).
//
// Metrics use vLLM's names with the prefix "tokenwise:" (see MetricPrefix).
package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/engine/sched"
	"github.com/tokenwise/tokenwise/engine/spec"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// Config sets up a server. Zero values take the defaults noted.
type Config struct {
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	ModelName string // the id in /v1/models and responses; default "tokenwise"

	MaxSeqs          int   // sequences batched at once; default 16
	MaxBatchedTokens int   // tokens per step (prefill chunks + decodes); default 256
	MaxWaiting       int   // queued requests beyond which 429 is answered; default 4·MaxSeqs
	MaxModelLen      int   // prompt + output tokens; default the model's context
	KVCacheBytes     int64 // KV cache memory; default 512 MiB
	BlockSize        int   // tokens per KV block; default 16

	APIKey         string        // when set, /v1/*, /tokenize and /detokenize need "Authorization: Bearer APIKey"
	RequestTimeout time.Duration // per request; default 10 minutes
	MaxBodyBytes   int64         // default 4 MiB

	// Connection timeouts (see http.go). None of them cuts a request in flight that makes
	// progress.
	ReadHeaderTimeout time.Duration // reading a request's headers; default 10 s
	ReadTimeout       time.Duration // reading a whole request, headers and body; default 60 s
	WriteTimeout      time.Duration // each write to the client: a client that stops reading is cut off after it; default 60 s
	IdleTimeout       time.Duration // a keep-alive connection waiting for its next request; default 120 s

	// Host and Origin policy (see policy.go).
	AllowHosts   []string // Host names answered besides the request's own address and the loopback names ("name" or "name:port"; "*": any)
	AllowOrigins []string // browser origins ("https://app.example") answered besides the server's own, with CORS headers; "*": any

	// AllowSpecialInContent lets chat message content hold the text of special tokens, which
	// then act as control tokens (see chat.go); by default such content is refused.
	AllowSpecialInContent bool

	// Speculate, if set, drafts tokens for every request to verify in one pass (engine
	// Proposer; a request turns it off with "speculate": false). DraftIndex, if set, is
	// updated with every finished answer (it may also be one of Speculate's proposers).
	Speculate engine.Proposer
	MaxDraft  int
	// FixedDraft drafts MaxDraft tokens every step (engine.Request.FixedDraft) instead of as
	// many as the measured step costs pay for; such a server does not calibrate at start.
	FixedDraft bool
	// SchemaDrafts, with a response_format schema, drafts the text the grammar forces
	// (engine.Request.SchemaDrafts) instead of jumping over it: the output is exactly what
	// masked decoding gives. "speculate": false turns it off for a request as well.
	SchemaDrafts bool
	// MaxVerifyTokens bounds a step's decoding tokens with their drafts
	// (engine.EngineConfig.MaxVerifyTokens; 0: only the engine's measured step costs).
	MaxVerifyTokens int
	DraftIndex      *spec.Index

	// For the web page (web.go). TokenizerName names the served tokenizer there;
	// CompareTokenizer, if set, is a second one shown beside it (CompareName: its name).
	// DomainTokens are the ids a specialized vocabulary added (vocab_map.json's new_tokens):
	// pieces and streamed tokens mark them. CostHardware is the page's default hardware
	// profile, CostDType the weights' precision for the cost model (default bf16), CostName
	// the model's name in the cost plot.
	TokenizerName    string
	CompareTokenizer *tokenizer.Tokenizer
	CompareName      string
	DomainTokens     []int
	// CompareDomainTokens are the second tokenizer's added ids, when it is the specialized one.
	CompareDomainTokens []int
	CostHardware        string
	CostDType           string
	CostName            string

	// beforeStep, when set (by tests), runs before each engine step: a test holds a step
	// with it instead of relying on how fast this machine generates.
	beforeStep func(sched.Step)
	onStart    func(*Server) // called by New before the runner starts
}

// Server serves one model. Create it with New; serve Handler, or the http.Server from
// HTTPServer and stop that with Shutdown; stop the runner with Close.
type Server struct {
	cfg      Config
	m        *model.Model
	tok      *tokenizer.Tokenizer
	tmpl     *engine.ChatTemplate // nil: the tokenizer has no chat template
	tmplErr  error
	roles    []string      // chat roles the template takes
	specials *specialTexts // the special tokens' texts, refused in chat content
	vocab    int
	maxLen   int
	eng      *engine.Engine
	grammars *engine.Grammars // response_format's, compiled once per schema
	met      *metrics
	created  int64

	// calibration is the step costs measured at start (Calibration).
	calibration []engine.StepCost

	submit   chan submission
	cancels  chan sched.SeqID
	stop     chan struct{}
	loopDone chan struct{}
	reqs     map[sched.SeqID]*genRequest // runner-owned
	// prefix-cache counters already exported (runner-owned)
	seenQueries, seenHits int64
	nextID                atomic.Uint64
	draining              atomic.Bool
	closeOne              sync.Once
	conns                 connTracker  // of the http.Server from HTTPServer
	domain, compareDomain map[int]bool // Config.DomainTokens, CompareDomainTokens
	web                   webCounters
}

// New allocates the KV cache and starts the runner.
func New(cfg Config) (*Server, error) {
	if cfg.Model == nil || cfg.Tokenizer == nil {
		return nil, errors.New("server: a model and a tokenizer are required")
	}
	mc := cfg.Model.Config()
	if cfg.ModelName == "" {
		cfg.ModelName = "tokenwise"
	}
	if cfg.MaxSeqs <= 0 {
		cfg.MaxSeqs = 16
	}
	if cfg.MaxBatchedTokens <= 0 {
		cfg.MaxBatchedTokens = 256
	}
	if cfg.MaxWaiting <= 0 {
		cfg.MaxWaiting = 4 * cfg.MaxSeqs
	}
	if cfg.MaxModelLen <= 0 || cfg.MaxModelLen > mc.MaxPositions {
		cfg.MaxModelLen = mc.MaxPositions
	}
	if cfg.KVCacheBytes <= 0 {
		cfg.KVCacheBytes = 512 << 20
	}
	if cfg.BlockSize <= 0 {
		cfg.BlockSize = 16
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Minute
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&cfg.ReadHeaderTimeout, 10 * time.Second}, {&cfg.ReadTimeout, time.Minute}, {&cfg.WriteTimeout, time.Minute}, {&cfg.IdleTimeout, 2 * time.Minute}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	blockBytes := int64(cfg.Model.KVBytesPerToken() * cfg.BlockSize) // per the model's cache dtype
	numBlocks := int(cfg.KVCacheBytes / blockBytes)
	if numBlocks < 1 {
		return nil, fmt.Errorf("server: KV cache of %d bytes holds no block (one block of %d tokens takes %d bytes)", cfg.KVCacheBytes, cfg.BlockSize, blockBytes)
	}
	// No sequence can be longer than the whole cache.
	cfg.MaxModelLen = min(cfg.MaxModelLen, numBlocks*cfg.BlockSize)
	eng, err := engine.NewEngine(engine.EngineConfig{Model: cfg.Model, Tokenizer: cfg.Tokenizer, NumBlocks: numBlocks, BlockSize: cfg.BlockSize, MaxVerifyTokens: cfg.MaxVerifyTokens,
		Sched: sched.Config{MaxSeqs: cfg.MaxSeqs, MaxBatchedTokens: cfg.MaxBatchedTokens, MaxWaiting: cfg.MaxWaiting, MaxModelLen: cfg.MaxModelLen}})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	s := &Server{
		cfg: cfg, m: cfg.Model, tok: cfg.Tokenizer, eng: eng,
		vocab:   min(mc.VocabSize, cfg.Tokenizer.VocabSize()),
		maxLen:  cfg.MaxModelLen,
		met:     newMetrics(cfg.ModelName),
		created: time.Now().Unix(),
		submit:  make(chan submission), cancels: make(chan sched.SeqID, 1024),
		stop: make(chan struct{}), loopDone: make(chan struct{}),
		reqs: map[sched.SeqID]*genRequest{},
	}
	s.web.started = time.Now()
	s.domain, s.compareDomain = idSet(cfg.DomainTokens), idSet(cfg.CompareDomainTokens)
	s.grammars = engine.NewGrammars(cfg.Tokenizer, 0)
	s.grammars.OnCompile = func(d time.Duration) { s.met.grammarCompile.Observe(d.Seconds()) }
	s.tmpl, s.tmplErr = engine.TokenizerTemplate(cfg.Tokenizer)
	s.roles, s.specials = chatRoles(s.tmpl), newSpecialTexts(cfg.Tokenizer)
	if (cfg.Speculate != nil || cfg.SchemaDrafts) && !cfg.FixedDraft {
		// Drafting weighs a step with drafts against a plain one by their measured costs:
		// measure them now rather than on the first requests (engine.Calibrate).
		maxDraft := cfg.MaxDraft
		if maxDraft <= 0 {
			maxDraft = engine.DefaultMaxDraft
		}
		if s.calibration, err = eng.Calibrate(cfg.MaxSeqs*(maxDraft+1), 2*time.Second); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	eng.BeforeStep = s.beforeStep
	if cfg.onStart != nil {
		cfg.onStart(s)
	}
	s.updateGauges()
	go s.loop()
	return s, nil
}

// Calibration is what decode steps of each length were measured to cost at start (with
// speculation; nil without).
func (s *Server) Calibration() []engine.StepCost { return s.calibration }

// NumBlocks is the size of the KV cache in blocks.
func (s *Server) NumBlocks() int { return s.eng.Cache().NumBlocks() }

// BlockSize is the number of tokens per KV block.
func (s *Server) BlockSize() int { return s.eng.Cache().BlockSize() }

// MaxModelLen is the longest sequence served (prompt + output).
func (s *Server) MaxModelLen() int { return s.maxLen }

// Drain makes the server refuse new generations (503) and /health report 503, for a
// graceful shutdown: requests in flight go on.
func (s *Server) Drain() { s.draining.Store(true) }

// Close stops the runner; requests still in flight end with an error. It does not close
// the model.
func (s *Server) Close() {
	s.closeOne.Do(func() {
		s.draining.Store(true)
		close(s.stop)
		<-s.loopDone
	})
}

// Handler is the HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /v1/models/{id...}", s.handleModel)
	mux.HandleFunc("POST /tokenize", s.handleTokenize)
	mux.HandleFunc("POST /detokenize", s.handleDetokenize)
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.met.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /{$}", s.handleWeb)
	mux.HandleFunc("GET /index.html", s.handleWeb)
	mux.HandleFunc("GET /app.js", s.handleWeb)
	mux.HandleFunc("GET /app.css", s.handleWeb)
	mux.HandleFunc("GET "+statusPath, s.handleStatus)
	mux.HandleFunc("POST /v1/tokenwise/tokenize", s.handlePieces)
	mux.HandleFunc("GET /v1/tokenwise/cost", s.handleCost)
	return s.recoverer(s.policy(s.deadlines(s.auth(routes(mux)))))
}

// routes serves mux, answering what it has no route for (404, or 405 for a known path) with
// an OpenAI error body instead of net/http's plain text.
func routes(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		rec := &headerRecorder{h: http.Header{}, status: 404}
		h.ServeHTTP(rec, r)
		if allow := rec.h.Get("Allow"); allow != "" {
			w.Header().Set("Allow", allow)
		}
		e := &apiError{status: rec.status, typ: "invalid_request_error", msg: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)}
		if rec.status == http.StatusMethodNotAllowed {
			e.msg = fmt.Sprintf("method %s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.h.Get("Allow"))
		}
		writeError(w, e)
	})
}

// headerRecorder keeps the status and headers a handler writes, dropping its body.
type headerRecorder struct {
	h      http.Header
	status int
}

func (r *headerRecorder) Header() http.Header         { return r.h }
func (r *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *headerRecorder) WriteHeader(status int)      { r.status = status }

// recoverer answers 500 instead of dying when a handler panics.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				slog.Error("handler panic", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				writeError(w, &apiError{status: 500, typ: "internal_error", msg: "internal server error"})
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// auth checks the Bearer key in constant time; /health, /metrics, the status (what
// /metrics says, as JSON) and the web page's files stay open: the page learns from the
// status that it needs the key, asks for it and sends it with its API calls.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.APIKey == "" {
		return next
	}
	want := []byte(s.cfg.APIKey)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" && r.URL.Path != "/metrics" && !(r.Method == http.MethodGet && webPath(r.URL.Path)) && r.URL.Path != statusPath {
			// The scheme is case-insensitive (RFC 9110 11.1), the key is not.
			scheme, key, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			key = strings.TrimLeft(key, " ")
			if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(key), want) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="tokenwise"`)
				writeError(w, &apiError{status: 401, typ: "authentication_error", msg: "invalid or missing API key (Authorization: Bearer KEY)"})
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, e.body())
}

// readBody reads at most MaxBodyBytes, within ReadTimeout.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	mw := w
	if dw, ok := w.(*deadlineWriter); ok {
		mw = dw.ResponseWriter // MaxBytesReader tells net/http to close the connection through it
	}
	body, err := io.ReadAll(http.MaxBytesReader(mw, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, &apiError{status: 413, typ: "invalid_request_error", msg: fmt.Sprintf("request body larger than %d bytes", mb.Limit)}
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, &apiError{status: 408, typ: "invalid_request_error", msg: fmt.Sprintf("the request body did not arrive within %v", s.cfg.ReadTimeout)}
		}
		return nil, badRequest("", "reading the request body: %v", err)
	}
	s.conns.markBusy(r)
	return body, nil
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		writeError(w, &apiError{status: 503, typ: "server_error", msg: "server is shutting down"})
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": s.cfg.ModelName, "object": "model", "created": s.created, "owned_by": "tokenwise",
			"max_model_len": s.maxLen,
		}},
	})
}

// handleModel is GET /v1/models/{id}.
func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if id == "" {
		id = "(none)" // GET /v1/models/ names no model
	}
	if aerr := s.checkModel(id); aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, 200, map[string]any{
		"id": s.cfg.ModelName, "object": "model", "created": s.created, "owned_by": "tokenwise",
		"max_model_len": s.maxLen,
	})
}

func (s *Server) checkModel(name string) *apiError {
	if name != "" && name != s.cfg.ModelName {
		return &apiError{status: 404, typ: "invalid_request_error", param: "model", code: "model_not_found",
			msg: fmt.Sprintf("the model %q does not exist; this server serves %q", name, s.cfg.ModelName)}
	}
	return nil
}

func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req struct {
		Model            string        `json:"model"`
		Prompt           *string       `json:"prompt"`
		Messages         []chatMessage `json:"messages"`
		AddSpecialTokens *bool         `json:"add_special_tokens"`
	}
	if aerr := decodeJSON(body, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	if aerr := s.checkModel(req.Model); aerr != nil {
		writeError(w, aerr)
		return
	}
	var ids []int
	switch {
	case req.Prompt != nil:
		ids = s.tok.Encode(*req.Prompt, req.AddSpecialTokens == nil || *req.AddSpecialTokens)
	case req.Messages != nil:
		var aerr *apiError
		if ids, aerr = s.chatPrompt(req.Messages); aerr != nil {
			writeError(w, aerr)
			return
		}
	default:
		writeError(w, badRequest("prompt", "prompt (a string) or messages is required"))
		return
	}
	if ids == nil {
		ids = []int{}
	}
	writeJSON(w, 200, map[string]any{"tokens": ids, "count": len(ids), "max_model_len": s.maxLen})
}

func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Tokens []int  `json:"tokens"`
	}
	if aerr := decodeJSON(body, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	if aerr := s.checkModel(req.Model); aerr != nil {
		writeError(w, aerr)
		return
	}
	if aerr := s.checkIDs("tokens", req.Tokens); aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, 200, map[string]any{"prompt": s.tok.Decode(req.Tokens, false)})
}

func (s *Server) checkIDs(param string, ids []int) *apiError {
	for i, id := range ids {
		if id < 0 || id >= s.vocab {
			return badRequest(param, "%s[%d] = %d: outside the vocabulary [0, %d)", param, i, id, s.vocab)
		}
	}
	return nil
}

// prepare validates the prompt length against max_tokens and the context, fills in
// defaults and the seed.
func (s *Server) prepare(prompt []int, p *genParams, logprobs bool, top int) (*genRequest, *apiError) {
	if len(prompt) == 0 {
		return nil, badRequest("prompt", "the prompt is empty (0 tokens)")
	}
	if err := s.checkIDs("prompt", prompt); err != nil {
		return nil, err
	}
	room := s.maxLen - len(prompt)
	if room < 1 {
		return nil, badRequest("prompt", "this model's maximum context length is %d tokens; the prompt has %d, leaving no room to generate", s.maxLen, len(prompt))
	}
	if p.maxTokens > room {
		return nil, badRequest(p.maxName, "this model's maximum context length is %d tokens; you requested %d tokens (%d in the prompt, %d for the completion in %s)",
			s.maxLen, len(prompt)+p.maxTokens, len(prompt), p.maxTokens, p.maxName)
	}
	if p.maxTokens < 0 {
		p.maxTokens = room
	}
	if top < 0 || top > engine.MaxTopLogprobs {
		return nil, badRequest("top_logprobs", "top_logprobs %d: must be in [0, %d]", top, engine.MaxTopLogprobs)
	}
	p.logprobs, p.topLogprobs = logprobs || top > 0, top
	p.sampler.Logprobs, p.sampler.TopLogprobs = p.logprobs, top
	if !p.seeded {
		var b [8]byte
		_, _ = rand.Read(b[:])
		p.sampler.Seed = binary.LittleEndian.Uint64(b[:])
	}
	if err := p.sampler.Validate(); err != nil {
		return nil, badRequest("", "%v", err)
	}
	return &genRequest{
		id: sched.SeqID(s.nextID.Add(1)), prompt: prompt, maxTokens: p.maxTokens, p: *p,
		arrival: time.Now(), events: make(chan event, p.maxTokens+2),
	}, nil
}

// start hands a request to the runner. Errors: 429 when the queue is full, 503 when
// draining.
func (s *Server) start(ctx context.Context, g *genRequest) *apiError {
	if s.draining.Load() {
		return &apiError{status: 503, typ: "server_error", msg: "server is shutting down"}
	}
	reply := make(chan error, 1)
	select {
	case s.submit <- submission{r: g, reply: reply}:
	case <-s.loopDone:
		return &apiError{status: 503, typ: "server_error", msg: "server is shutting down"}
	case <-ctx.Done():
		return &apiError{status: 408, typ: "invalid_request_error", msg: "request cancelled before it was queued"}
	}
	err := <-reply
	if err == nil {
		return nil
	}
	if errors.Is(err, sched.ErrQueueFull) {
		s.met.rejected.Inc()
		return &apiError{status: 429, typ: "rate_limit_error", msg: "the server is at capacity: the waiting queue is full; retry later"}
	}
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return badRequest("", "%v", err)
}

// abandon tells the runner to drop a request (client gone, timeout).
func (s *Server) abandon(id sched.SeqID) {
	select {
	case s.cancels <- id:
	case <-s.loopDone:
	}
}

// generation is a request's outcome, gathered from its events.
type generation struct {
	text   strings.Builder
	tokens []engine.TokenLogprobs
	finish string
	usage  Usage
	steps  []stepSpan
}

// collect waits for a request to finish, calling onEvent for each token event (when not
// nil). A cancelled ctx abandons the request.
func (s *Server) collect(ctx context.Context, g *genRequest, onEvent func(event) error) (*generation, error) {
	var out generation
	for {
		select {
		case ev := <-g.events:
			if ev.err != nil {
				return &out, ev.err
			}
			out.text.WriteString(ev.text)
			if ev.logprob != nil {
				out.tokens = append(out.tokens, *ev.logprob)
			}
			if onEvent != nil {
				if err := onEvent(ev); err != nil {
					s.abandon(g.id)
					return &out, err
				}
			}
			if ev.done {
				out.finish, out.usage, out.steps = ev.finish, ev.usage, ev.steps
				return &out, nil
			}
		case <-ctx.Done():
			s.abandon(g.id)
			return &out, ctx.Err()
		}
	}
}
