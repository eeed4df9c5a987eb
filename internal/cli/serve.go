package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/cost"
	"github.com/tokenwise/tokenwise/demo"
	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/engine/spec"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/server"
	"github.com/tokenwise/tokenwise/specialize"
	"github.com/tokenwise/tokenwise/tokenizer"
)

type serveFlags struct {
	model, host, name, kvMem, apiKey string
	kvDType                          string
	speculate, draftIndex            string
	maxDraft                         int
	fixedDraft                       bool
	mmap                             bool
	port, maxSeqs, maxBatched        int
	maxWaiting, maxLen, threads      int
	timeout, grace                   time.Duration
	readHeader, read, write, idle    time.Duration
	allowHosts, allowOrigins         []string
	allowSpecial                     bool
	compare, costHW                  string
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --model PATH [--host 127.0.0.1] [--port 8080] [--max-seqs N] [--kv-cache-mem SIZE] [--api-key KEY]",
		Short: "Serve a model over an OpenAI-compatible HTTP API with continuous batching",
		Long: `Serve loads the model and answers POST /v1/completions and /v1/chat/completions
(streamed as server-sent events with "stream": true), GET /v1/models(/ID), POST /tokenize and
/detokenize, GET /health (200 once ready) and GET /metrics (Prometheus; vLLM's metric names
with the prefix "tokenwise:").

Requests are batched continuously: each step runs up to --max-seqs sequences and
--max-batched-tokens tokens (prompt chunks and one token per decoding sequence), over a
paged KV cache of --kv-cache-mem bytes with prefix caching. When --max-waiting requests are
queued, more get 429 with Retry-After. Each response's usage reports its prefill and decode
time and steps.

Sampling defaults are OpenAI's: a request without "temperature" samples at temperature 1,
so its answer varies from request to request. Send "temperature": 0 for greedy decoding,
the default of tokenwise generate (which gives the same text for the same prompt).

With --api-key (or TOKENWISE_API_KEY), every endpoint except /health and /metrics needs
"Authorization: Bearer KEY". SIGTERM or Ctrl-C stops accepting requests, closes the
connections with no request in flight, lets those in flight finish for up to
--shutdown-grace, cancels the rest and exits 0.

Connections are bounded by --read-header-timeout (a request's headers), --read-timeout
(the whole request, body included), --idle-timeout (a keep-alive connection between
requests) and --write-timeout (each write: a client that stops reading is cut off; a
stream that keeps being read is never cut, however long it runs). --request-timeout
bounds the generation.

Only requests whose Host is the address they came in on, or localhost, 127.0.0.1 or [::1]
with the port, are answered (403 otherwise; add names with --allow-host, e.g. behind a
proxy): a web page cannot reach the server through DNS rebinding. Browser requests from
another origin (an Origin header that is not the server's own) get 403 unless
--allow-origin lists the origin.

GET / serves a web page (embedded; it loads nothing from elsewhere): the text's tokens under
the served tokenizer and a second one (--compare-tokenizer; the embedded demo compares its
specialized tokenizer), a streamed chat showing each token's source (sampled, forced,
jump-forward, draft, domain) and the request's timeline and usage, the server's state, and
the cost model on a hardware profile (--cost-hardware). Besides the public API it calls GET
/v1/tokenwise/status, POST /v1/tokenwise/tokenize and GET /v1/tokenwise/cost; with --api-key
it asks for the key.

Request fields the server does not implement (tools, logit_bias, best_of, ...) get
400 naming the field. Chat roles are those of the model's template; message content holding
special-token text (<|eot_id|>, <|im_end|>, ...) gets 400 unless --allow-special-in-content.`,
		Example: `  tokenwise serve --model /tmp/smollm2-synth --port 8080 --max-seqs 16 --kv-cache-mem 1GiB`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runServe(ctx, f, cmd.ErrOrStderr(), nil)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model: a Hugging Face folder or a .gguf file")
	fl.StringVar(&f.host, "host", "127.0.0.1", "address to listen on")
	fl.IntVar(&f.port, "port", 8080, "port to listen on (0: any free port)")
	fl.StringVar(&f.name, "served-model-name", "", "model id in the API (default: the model folder's name)")
	fl.IntVar(&f.maxSeqs, "max-seqs", 16, "sequences batched at once")
	fl.IntVar(&f.maxBatched, "max-batched-tokens", 256, "tokens computed per step (prefill chunks + decodes)")
	fl.IntVar(&f.maxWaiting, "max-waiting", 0, "queued requests before 429 (0: 4 × --max-seqs)")
	fl.IntVar(&f.maxLen, "max-model-len", 0, "longest prompt + completion in tokens (0: the model's context)")
	fl.StringVar(&f.kvMem, "kv-cache-mem", "512MiB", "KV cache memory, e.g. 512MiB, 2GiB, 1e9")
	fl.StringVar(&f.apiKey, "api-key", "", "require this Bearer key (default: $TOKENWISE_API_KEY)")
	fl.IntVar(&f.threads, "threads", 0, "compute threads (0: one per CPU)")
	fl.StringVar(&f.kvDType, "kv-cache-dtype", "f32", "KV cache dtype: f32, or f16 (half the memory per token; attention computed as llama.cpp's default)")
	fl.BoolVar(&f.mmap, "mmap", false, "map the checkpoint from the page cache (quick to load, shared between processes) instead of reading it into huge-page memory (faster decode)")
	fl.DurationVar(&f.timeout, "request-timeout", 10*time.Minute, "longest a request may run")
	fl.DurationVar(&f.grace, "shutdown-grace", 30*time.Second, "how long requests in flight may finish after SIGTERM")
	fl.DurationVar(&f.readHeader, "read-header-timeout", 10*time.Second, "longest a client may take to send a request's headers")
	fl.DurationVar(&f.read, "read-timeout", time.Minute, "longest a client may take to send a whole request, headers and body")
	fl.DurationVar(&f.write, "write-timeout", time.Minute, "longest one write to a client may block (a client that stops reading); renewed on every write, so streams that make progress run on")
	fl.DurationVar(&f.idle, "idle-timeout", 2*time.Minute, "how long a keep-alive connection may wait for its next request")
	fl.StringSliceVar(&f.allowHosts, "allow-host", nil, "also answer requests with this Host (name, or name:port; repeatable; '*': any), e.g. behind a proxy")
	fl.BoolVar(&f.allowSpecial, "allow-special-in-content", false, "let chat message content hold special-token text (e.g. <|im_end|>), read as control tokens; refused by default")
	addSpecFlags(fl, &f.speculate, &f.maxDraft, &f.draftIndex, &f.fixedDraft)
	fl.StringVar(&f.compare, "compare-tokenizer", "", "a second tokenizer (tokenizer.json or a model folder) the web page shows beside the model's, e.g. the base model's next to a specialized one")
	fl.StringVar(&f.costHW, "cost-hardware", "h100-sxm", "the web page's default hardware profile for the cost model ("+strings.Join(cost.Profiles(), ", ")+")")
	fl.StringSliceVar(&f.allowOrigins, "allow-origin", nil, "also answer browser requests from this origin, with CORS headers (e.g. https://app.example; repeatable; '*': any)")
	return cmd
}

// runServe serves until ctx is cancelled, then shuts down gracefully. ready (tests) gets
// the listening address.
func runServe(ctx context.Context, f serveFlags, stderr io.Writer, ready func(addr string)) error {
	compareName := tokenizerName(f.compare)
	if f.model == "" && f.compare == "" {
		// The demo's page compares the base tokenizer with the specialized one.
		dir, err := os.MkdirTemp("", "tokenwise-demo-adapted-")
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer os.RemoveAll(dir)
		if f.compare, err = demo.ExtractAdapted(dir); err != nil {
			return fmt.Errorf("serve: embedded demo model: %w", err)
		}
		compareName = "tokenwise-demo, specialized"
	}
	if f.model == "" {
		// No --model: serve the embedded demo model (demo/model), written to a temporary folder
		// because the loader memory-maps files.
		dir, err := os.MkdirTemp("", "tokenwise-demo-model-")
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		defer os.RemoveAll(dir)
		if f.model, err = demo.ExtractModel(dir); err != nil {
			return fmt.Errorf("serve: embedded demo model: %w", err)
		}
		if f.name == "" {
			f.name = "tokenwise-demo"
		}
		fmt.Fprintf(stderr, "serve: no --model given: serving the embedded demo model (pass --model for your own)\n")
	}
	kvBytes, err := parseByteSize(f.kvMem)
	if err != nil {
		return fmt.Errorf("serve: --kv-cache-mem: %w", err)
	}
	if f.maxSeqs < 1 || f.maxBatched < 1 {
		return fmt.Errorf("serve: --max-seqs %d and --max-batched-tokens %d must be >= 1", f.maxSeqs, f.maxBatched)
	}
	if f.apiKey == "" {
		f.apiKey = os.Getenv("TOKENWISE_API_KEY")
	}
	tok, err := loadModelTokenizer(f.model)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var compare *tokenizer.Tokenizer
	if f.compare != "" {
		if compare, err = tokenizer.Load(f.compare); err != nil {
			return fmt.Errorf("serve: --compare-tokenizer %s: %w", f.compare, err)
		}
	}
	if f.costHW == "" {
		f.costHW = "h100-sxm"
	}
	if _, err := cost.LoadProfile(f.costHW); err != nil {
		return fmt.Errorf("serve: --cost-hardware: %w", err)
	}
	// Merged domain tokens, marked on the page: the served model's, if it was specialized,
	// else the second tokenizer's (the page marks them in whichever column is specialized).
	domainIDs, err := specialize.NewTokenIDs(f.model)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	var compareDomain []int
	if f.compare != "" {
		dir := f.compare
		if filepath.Base(dir) == "tokenizer.json" {
			dir = filepath.Dir(dir) // its model folder's vocab_map.json
		}
		if compareDomain, err = specialize.NewTokenIDs(dir); err != nil {
			return fmt.Errorf("serve: --compare-tokenizer: %w", err)
		}
	}
	kv, err := model.ParseKVDType(f.kvDType)
	if err != nil {
		return fmt.Errorf("serve: --kv-cache-dtype: %w", err)
	}
	modelGC() // as bench measures its memory: after the tokenizer, before the weights
	m, err := model.Load(f.model, model.Options{Threads: f.threads, KVCache: kv, Mmap: f.mmap})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer m.Close()
	prop, note, err := proposers(f.speculate, f.draftIndex, f.model, true)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if note != "" {
		fmt.Fprintf(stderr, "serve: %s\n", note)
	}
	var speculate engine.Proposer
	if len(prop) > 0 {
		speculate = prop
	}
	var index *spec.Index // the domain proposer's, which finished answers extend
	for _, p := range prop {
		if x, ok := p.(*spec.Index); ok {
			index = x
		}
	}
	verify := 0 // drafts bounded by the cost model's decode ridge on this CPU
	if speculate != nil || spec.SchemaDrafts(f.speculate) {
		var why string
		verify, why = verifyBound(f.model, f.kvDType, f.threads, f.maxLen)
		fmt.Fprintf(stderr, "serve: speculation: %s\n", why)
	}
	name := f.name
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(filepath.Clean(f.model)), filepath.Ext(f.model))
	}
	// After the flags are checked: a mistyped one is reported without waiting for the
	// repacks.
	if err := m.Warm(); err != nil { // the one-time repacks, before the first request
		return fmt.Errorf("serve: %w", err)
	}
	srv, err := server.New(server.Config{
		Model: m, Tokenizer: tok, ModelName: name,
		MaxSeqs: f.maxSeqs, MaxBatchedTokens: f.maxBatched, MaxWaiting: f.maxWaiting, MaxModelLen: f.maxLen,
		KVCacheBytes: kvBytes, APIKey: f.apiKey, RequestTimeout: f.timeout,
		ReadHeaderTimeout: f.readHeader, ReadTimeout: f.read, WriteTimeout: f.write, IdleTimeout: f.idle,
		AllowHosts: f.allowHosts, AllowOrigins: f.allowOrigins, AllowSpecialInContent: f.allowSpecial,
		Speculate: speculate, MaxDraft: f.maxDraft, FixedDraft: f.fixedDraft, DraftIndex: index, SchemaDrafts: spec.SchemaDrafts(f.speculate), MaxVerifyTokens: verify,
		TokenizerName: name, CompareTokenizer: compare, CompareName: compareName,
		DomainTokens: domainIDs, CompareDomainTokens: compareDomain, CostHardware: f.costHW, CostDType: costDType(f.model), CostName: name,
	})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer srv.Close()
	if c := srv.Calibration(); len(c) > 0 {
		var b strings.Builder
		for i, p := range c {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d: %.1f", p.Tokens, p.Ms)
		}
		fmt.Fprintf(stderr, "serve: decode steps measured (tokens: ms): %s\n", b.String())
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	hs := srv.HTTPServer()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	addr := ln.Addr().String()
	fmt.Fprintf(stderr, "tokenwise: serving %q on http://%s (KV cache %d blocks of %d tokens, max model length %d, max %d sequences)\n",
		name, addr, srv.NumBlocks(), srv.BlockSize(), srv.MaxModelLen(), f.maxSeqs)
	if ready != nil {
		ready(addr)
	}

	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintln(stderr, "tokenwise: shutting down: finishing requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), f.grace)
	defer cancel()
	if err := srv.Shutdown(sctx, hs); err != nil {
		fmt.Fprintln(stderr, "tokenwise: grace period over: cancelled the requests still in flight")
	}
	return nil
}

// tokenizerName names a --compare-tokenizer path on the page: its folder's name.
func tokenizerName(path string) string {
	if path == "" {
		return ""
	}
	path = filepath.Clean(path)
	if filepath.Base(path) == "tokenizer.json" {
		path = filepath.Dir(path)
	}
	return filepath.Base(path)
}

// costDType is the weights' precision for the page's cost model, as tokenwise cost picks it.
func costDType(modelPath string) string {
	if dt := cost.WeightsDType(modelPath); dt != "" {
		return dt
	}
	if s, err := cost.LoadShape(modelPath); err == nil && s.TorchDType != "" {
		if _, err := cost.ParsePrecision(s.TorchDType); err == nil {
			return s.TorchDType
		}
	}
	return "bf16"
}
