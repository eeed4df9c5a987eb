package server

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tokenwise/tokenwise/cost"
)

// The web page (GET /) and the small tokenwise endpoints it needs beside the public API.
//
// The page is plain HTML, CSS and JavaScript in web/, embedded in the binary: no build
// step, no framework, and no request to any host but this server. Everything it shows
// comes from the endpoints a client uses (/tokenize, /v1/chat/completions streamed with
// stream_options.include_tokens) plus these, under /v1/tokenwise/ and behind --api-key like
// the rest of /v1/, except the status, open like /metrics:
//
//   GET  /v1/tokenwise/status    the runner's state: sequences running and waiting, KV blocks,
//                                prefix-cache hits, tokens generated (the page derives tokens/s);
//                                api_key_required tells the page to ask for the key
//   POST /v1/tokenwise/tokenize  {"prompt", "tokenizer": "model"|"compare"}: the pieces of a
//                                text (id, text, bytes, domain) under the served tokenizer or
//                                the one given with --compare-tokenizer
//   GET  /v1/tokenwise/cost      ?hardware=&prompt=&output=&batch=: the cost model's estimate
//                                for the served model and its time-per-token-vs-batch sweep
//                                (the plot of tokenwise cost --plot, as SVG and as points)

//go:embed web/index.html web/app.js web/app.css
var webFS embed.FS

const statusPath = "/v1/tokenwise/status"

// handleWeb serves the embedded page; / is index.html.
func (s *Server) handleWeb(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Path
	if name == "/" {
		name = "/index.html"
	}
	sub, _ := fs.Sub(webFS, "web")
	b, err := fs.ReadFile(sub, name[1:])
	if err != nil {
		writeError(w, &apiError{status: 404, typ: "invalid_request_error", msg: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
		return
	}
	h := w.Header()
	switch {
	case name == "/index.html":
		h.Set("Content-Type", "text/html; charset=utf-8")
	case len(name) > 3 && name[len(name)-3:] == ".js":
		h.Set("Content-Type", "text/javascript; charset=utf-8")
	default:
		h.Set("Content-Type", "text/css; charset=utf-8")
	}
	// The page loads only from this server; the policy says so to the browser too.
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// webPath reports whether the path is the page's (open without the API key: the page asks
// for the key itself).
func webPath(p string) bool {
	return p == "/" || p == "/index.html" || p == "/app.js" || p == "/app.css"
}

// statusSnapshot is the runner's state after its last step (written by the runner only).
type statusSnapshot struct {
	Running, Waiting          int
	BlocksUsed, Blocks        int
	PrefixQueries, PrefixHits int64
}

// webCounters are totals the status endpoint reports, kept beside the Prometheus ones so
// that the endpoint does not parse /metrics.
type webCounters struct {
	snap      atomic.Pointer[statusSnapshot]
	generated atomic.Int64 // output tokens
	prompt    atomic.Int64 // prompt tokens computed (prefill chunks)
	finished  atomic.Int64
	started   time.Time
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	st := s.web.snap.Load()
	if st == nil {
		st = &statusSnapshot{}
	}
	hit := 0.0
	if st.PrefixQueries > 0 {
		hit = float64(st.PrefixHits) / float64(st.PrefixQueries)
	}
	out := map[string]any{
		"model":                   s.cfg.ModelName,
		"uptime_s":                time.Since(s.web.started).Seconds(),
		"running":                 st.Running,
		"waiting":                 st.Waiting,
		"max_seqs":                s.cfg.MaxSeqs,
		"kv_blocks_used":          st.BlocksUsed,
		"kv_blocks":               st.Blocks,
		"block_size":              s.BlockSize(),
		"prefix_cache_queries":    st.PrefixQueries,
		"prefix_cache_hits":       st.PrefixHits,
		"prefix_cache_hit_rate":   hit,
		"generation_tokens_total": s.web.generated.Load(),
		"prompt_tokens_total":     s.web.prompt.Load(),
		"requests_finished_total": s.web.finished.Load(),
		"max_model_len":           s.maxLen,
		"vocab_size":              s.vocab,
		"tokenizer":               s.cfg.TokenizerName,
		"compare_tokenizer":       nil,
		"domain_tokens":           len(s.domain),
		"cost_profiles":           cost.Profiles(),
		"cost_hardware":           s.cfg.CostHardware,
		"chat_template":           s.tmpl != nil,
		"api_key_required":        s.cfg.APIKey != "",
	}
	if s.cfg.CompareTokenizer != nil {
		out["compare_tokenizer"] = s.cfg.CompareName
	}
	writeJSON(w, 200, out)
}

// piece is one token of a text.
type piece struct {
	ID     int    `json:"id"`
	Text   string `json:"text"`  // the token's own text (U+FFFD for part of a character)
	Bytes  int    `json:"bytes"` // how many bytes of the text it stands for
	Domain bool   `json:"domain,omitempty"`
}

func (s *Server) handlePieces(w http.ResponseWriter, r *http.Request) {
	body, aerr := s.readBody(w, r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	var req struct {
		Prompt           *string `json:"prompt"`
		Tokenizer        string  `json:"tokenizer"`
		AddSpecialTokens *bool   `json:"add_special_tokens"`
	}
	if aerr := decodeJSON(body, &req); aerr != nil {
		writeError(w, aerr)
		return
	}
	if req.Prompt == nil {
		writeError(w, badRequest("prompt", "prompt (a string) is required"))
		return
	}
	tok, name, domain := s.tok, s.cfg.TokenizerName, s.domain
	switch req.Tokenizer {
	case "", "model":
	case "compare":
		if s.cfg.CompareTokenizer == nil {
			writeError(w, badRequest("tokenizer", "no second tokenizer: start the server with --compare-tokenizer PATH"))
			return
		}
		tok, name, domain = s.cfg.CompareTokenizer, s.cfg.CompareName, s.compareDomain
	default:
		writeError(w, badRequest("tokenizer", "tokenizer %q: expected \"model\" or \"compare\"", req.Tokenizer))
		return
	}
	ids := tok.Encode(*req.Prompt, req.AddSpecialTokens == nil || *req.AddSpecialTokens)
	out := make([]piece, len(ids))
	for i, id := range ids {
		out[i] = piece{ID: id, Text: tok.Decode([]int{id}, false), Bytes: len(tok.TokenBytes(id)), Domain: domain[id]}
	}
	writeJSON(w, 200, map[string]any{"tokenizer": name, "tokens": out, "count": len(ids), "bytes": len(*req.Prompt)})
}

// handleCost is the cost model for the served model on one hardware profile.
func (s *Server) handleCost(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	num := func(name string, def, lo, hi int) (int, *apiError) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return 0, badRequest(name, "%s %q: expected a whole number in [%d, %d]", name, v, lo, hi)
		}
		return n, nil
	}
	prompt, aerr := num("prompt", 512, 1, 1<<20)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	output, aerr := num("output", 128, 1, 1<<20)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	batch, aerr := num("batch", 1, 1, 4096)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	hwName := q.Get("hardware")
	if hwName == "" {
		hwName = s.cfg.CostHardware
	}
	if hwName == "" {
		hwName = "h100-sxm"
	}
	known := false
	for _, p := range cost.Profiles() {
		known = known || p == hwName
	}
	if !known { // only the shipped profiles: a query must not name files on the server
		writeError(w, badRequest("hardware", "hardware %q: not a shipped profile (%v)", hwName, cost.Profiles()))
		return
	}
	hw, err := cost.LoadProfile(hwName)
	if err != nil {
		writeError(w, badRequest("hardware", "%v", err))
		return
	}
	shape := cost.FromModelConfig(s.m.Config())
	if s.cfg.CostName != "" {
		shape.Name = s.cfg.CostName
	}
	dtName := s.cfg.CostDType
	if dtName == "" {
		dtName = "bf16"
	}
	dt, err := cost.ParsePrecision(dtName)
	if err != nil {
		writeError(w, &apiError{status: 500, typ: "server_error", msg: fmt.Sprintf("cost dtype: %v", err)})
		return
	}
	kvName := "bf16" // as tokenwise cost chooses: f32 on a CPU (tokenwise's cache), else 16-bit
	if hw.Kind == "cpu" {
		kvName = "f32"
	} else if dt.Bytes == 2 {
		kvName = dt.Name
	}
	kv, _ := cost.ParsePrecision(kvName)
	wl := cost.Workload{Prompt: prompt, Output: output, Batch: batch, DType: dt, KV: kv}
	est, err := shape.Estimate(hw, wl)
	if err != nil {
		writeError(w, badRequest("", "cost: %v", err))
		return
	}
	var batches []int
	for b := 1; b <= 4096; b *= 2 {
		batches = append(batches, b)
	}
	pts, err := shape.Sweep(hw, wl, batches)
	if err != nil {
		writeError(w, badRequest("", "cost: %v", err))
		return
	}
	title := fmt.Sprintf("%s on %s (%s weights, %s KV): prompt %d, output %d", shape.Name, hw.Name, dt.Name, kv.Name, prompt, output)
	writeJSON(w, 200, map[string]any{"estimate": est, "sweep": pts, "svg": cost.PlotSVG(title, pts), "profiles": cost.Profiles()})
}

// idSet is a set of token ids (nil for none).
func idSet(ids []int) map[int]bool {
	if len(ids) == 0 {
		return nil
	}
	m := make(map[int]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}
