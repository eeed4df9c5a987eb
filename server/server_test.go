package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/engine/sched"
	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// The tests serve a random-weight two-layer Llama (the weights `tokenwise synth` writes)
// with the real Llama-3 tokenizer and chat template, on a loopback port.

var (
	fixtureOnce sync.Once
	fixtureDir  string
	fixtureErr  error
)

const testCfg = `{"model_type":"llama","vocab_size":128256,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
	"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":256,"rms_norm_eps":1e-5,"rope_theta":500000,
	"tie_word_embeddings":true,"bos_token_id":128000,"eos_token_id":128001}`

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

// fixture returns the model folder, writing it once per test binary.
func fixture(t testing.TB) string {
	t.Helper()
	src := testref.Path(t, "node_modules", "@lenml", "tokenizer-llama3", "models")
	fixtureOnce.Do(func() {
		fixtureDir, fixtureErr = os.MkdirTemp("", "tokenwise-server-test")
		if fixtureErr != nil {
			return
		}
		for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "config.json"} {
			var b []byte
			if f == "config.json" {
				b = []byte(testCfg)
			} else if b, fixtureErr = os.ReadFile(filepath.Join(src, f)); fixtureErr != nil {
				return
			}
			if fixtureErr = os.WriteFile(filepath.Join(fixtureDir, f), b, 0o644); fixtureErr != nil {
				return
			}
		}
		cfg, err := model.ParseConfig([]byte(testCfg))
		if err != nil {
			fixtureErr = err
			return
		}
		ws, err := model.RandomWeights(cfg, 7, tensor.F32)
		if err != nil {
			fixtureErr = err
			return
		}
		fixtureErr = safetensors.Write(filepath.Join(fixtureDir, "model.safetensors"), ws, map[string]string{"format": "pt"})
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixtureDir
}

type testServer struct {
	*Server
	url string
	hs  *http.Server
	ln  net.Listener
	m   *model.Model
	tok *tokenizer.Tokenizer
}

// startServer serves the fixture on 127.0.0.1:0 until the test ends.
func startServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	return serveFixture(t, cfg, func(s *Server) *http.Server { return &http.Server{Handler: s.Handler()} })
}

// serveFixture serves the fixture with the http.Server newHS makes.
func serveFixture(t testing.TB, cfg Config, newHS func(*Server) *http.Server) *testServer {
	t.Helper()
	dir := fixture(t)
	m, err := model.Load(dir, model.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() }) // after the server's cleanup (cleanups run last first)
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Model, cfg.Tokenizer, cfg.ModelName = m, tok, "tiny"
	if cfg.KVCacheBytes == 0 {
		cfg.KVCacheBytes = 8 << 20
	}
	return serve(t, cfg, newHS)
}

// serve starts a server of cfg (its model and tokenizer set) on a loopback port, with the
// http.Server newHS makes, and stops both when the test ends.
func serve(t testing.TB, cfg Config, newHS func(*Server) *http.Server) *testServer {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := newHS(s)
	go hs.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(ctx)
		s.Close()
	})
	return &testServer{Server: s, url: "http://" + ln.Addr().String(), m: cfg.Model, tok: cfg.Tokenizer, hs: hs, ln: ln}
}

func (ts *testServer) client(key string) openai.Client {
	opts := []option.RequestOption{option.WithBaseURL(ts.url + "/v1/"), option.WithMaxRetries(0)}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	return openai.NewClient(opts...)
}

// reference is engine.Generate's greedy text for prompt ids: the single-sequence path.
func (ts *testServer) reference(t *testing.T, ids []int, maxTokens int) *engine.Result {
	t.Helper()
	res, err := engine.Generate(context.Background(), ts.m, ts.tok, ids, engine.Options{MaxTokens: maxTokens})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// metric reads one sample of a metric from /metrics (0 when absent).
func (ts *testServer) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	v, _ := MetricValue(resp.Body, name)
	return v
}

// waitMetric polls until the metric satisfies ok.
func (ts *testServer) waitMetric(t *testing.T, name string, ok func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v := ts.metric(t, name)
		if ok(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metric %s stuck at %v", name, v)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestOpenAIClient(t *testing.T) {
	ts := startServer(t, Config{APIKey: "sekrit"})
	c := ts.client("sekrit")
	ctx := context.Background()
	const prompt = "The capital of France is"
	want := ts.reference(t, ts.tok.Encode(prompt, true), 12)

	t.Run("completion", func(t *testing.T) {
		res, err := c.Completions.New(ctx, openai.CompletionNewParams{
			Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
			MaxTokens: openai.Int(12), Temperature: openai.Float(0),
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Choices[0].Text; got != want.Text {
			t.Fatalf("server %q, engine.Generate %q", got, want.Text)
		}
		if string(res.Choices[0].FinishReason) != want.FinishReason {
			t.Fatalf("finish %q, want %q", res.Choices[0].FinishReason, want.FinishReason)
		}
		u := res.Usage
		if u.PromptTokens != int64(want.Usage.PromptTokens) || u.CompletionTokens != int64(want.Usage.CompletionTokens) {
			t.Fatalf("usage %+v, want %+v", u, want.Usage)
		}
		for _, f := range []string{"prefill_ms", "prefill_steps", "decode_ms", "decode_steps", "ttft_ms", "queue_ms"} {
			if u.JSON.ExtraFields[f].Raw() == "" {
				t.Fatalf("usage lacks %s: %s", f, u.RawJSON())
			}
		}
		if steps := u.JSON.ExtraFields["decode_steps"].Raw(); steps != strconv.Itoa(want.Timing.DecodeSteps) {
			t.Fatalf("decode_steps %s, want %d", steps, want.Timing.DecodeSteps)
		}
	})

	t.Run("completion stream", func(t *testing.T) {
		st := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
			MaxTokens: openai.Int(12), Temperature: openai.Float(0),
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var text strings.Builder
		var usage *openai.CompletionUsage
		chunks := 0
		for st.Next() {
			ch := st.Current()
			chunks++
			for _, c := range ch.Choices {
				text.WriteString(c.Text)
			}
			if ch.Usage.TotalTokens > 0 {
				u := ch.Usage
				usage = &u
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != want.Text {
			t.Fatalf("streamed %q, want %q", text.String(), want.Text)
		}
		if chunks < 3 {
			t.Fatalf("only %d chunks: not streamed", chunks)
		}
		if usage == nil || usage.CompletionTokens != 12 {
			t.Fatalf("include_usage: %+v", usage)
		}
	})

	tmpl, err := engine.TokenizerTemplate(ts.tok)
	if err != nil {
		t.Fatal(err)
	}
	chatIDs, _, err := tmpl.ChatPrompt(ts.tok, []engine.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello there"}}, engine.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	wantChat := ts.reference(t, chatIDs, 10)
	chatParams := openai.ChatCompletionNewParams{
		Model:       "tiny",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Hello there")},
		MaxTokens:   openai.Int(10),
		Temperature: openai.Float(0),
	}

	t.Run("chat", func(t *testing.T) {
		p := chatParams
		p.Logprobs, p.TopLogprobs = openai.Bool(true), openai.Int(3)
		res, err := c.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		ch := res.Choices[0]
		if ch.Message.Content != wantChat.Text || ch.Message.Role != "assistant" {
			t.Fatalf("chat %q (%s), want %q", ch.Message.Content, ch.Message.Role, wantChat.Text)
		}
		if len(ch.Logprobs.Content) != 10 {
			t.Fatalf("%d logprob entries, want 10", len(ch.Logprobs.Content))
		}
		for i, lp := range ch.Logprobs.Content {
			if len(lp.TopLogprobs) != 3 || lp.Logprob > 0 || lp.TopLogprobs[0].Logprob < lp.TopLogprobs[2].Logprob {
				t.Fatalf("logprobs[%d] = %+v", i, lp)
			}
			// Greedy: the chosen token is the most likely one.
			if lp.Token != lp.TopLogprobs[0].Token {
				t.Fatalf("logprobs[%d]: chose %q, top is %q", i, lp.Token, lp.TopLogprobs[0].Token)
			}
		}
	})

	t.Run("chat stream", func(t *testing.T) {
		p := chatParams
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		st := c.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.Content; got != wantChat.Text {
			t.Fatalf("streamed chat %q, want %q", got, wantChat.Text)
		}
		if acc.Usage.PromptTokens != int64(len(chatIDs)) {
			t.Fatalf("usage %+v, want %d prompt tokens", acc.Usage, len(chatIDs))
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := c.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != "tiny" {
			t.Fatalf("models %+v", page.Data)
		}
	})

	t.Run("api key", func(t *testing.T) {
		bad := ts.client("wrong")
		_, err := bad.Models.List(ctx)
		var ae *openai.Error
		if !errors.As(err, &ae) || ae.StatusCode != 401 {
			t.Fatalf("wrong key: %v", err)
		}
		resp, err := http.Get(ts.url + "/health") // health stays open
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("health: %v %v", resp, err)
		}
	})
}

// TestBatchingMatchesSequential sends requests at once so that they share steps (chunked
// prefills next to decodes), and checks each against engine.Generate alone.
func TestBatchingMatchesSequential(t *testing.T) {
	// A budget of 12 tokens is below the longer prompts' length, so they are prefilled in chunks
	// whatever the arrival timing.
	ts := startServer(t, Config{MaxSeqs: 8, MaxBatchedTokens: 12})
	c := ts.client("")
	prompts := []string{
		"Once upon a time, in a land far away, there lived a",
		"def fibonacci(n):",
		"The quick brown fox jumps over the lazy dog because it was very very tired after a long day",
		"1, 2, 3, 4,",
		"Paged attention stores keys and values in blocks",
		"Hello",
		"Once upon a time, in a land far away, there was a", // shares a prefix with the first
		"Zebra crossings",
	}
	type result struct {
		text      string
		prefillSt int
		err       error
	}
	results := make([]result, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
				Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(p)},
				MaxTokens: openai.Int(20), Temperature: openai.Float(0),
			})
			if err != nil {
				results[i].err = err
				return
			}
			n, _ := strconv.Atoi(res.Usage.JSON.ExtraFields["prefill_steps"].Raw())
			results[i] = result{text: res.Choices[0].Text, prefillSt: n}
		}()
	}
	wg.Wait()
	chunked := false
	for i, p := range prompts {
		if results[i].err != nil {
			t.Fatalf("prompt %d: %v", i, results[i].err)
		}
		want := ts.reference(t, ts.tok.Encode(p, true), 20)
		if results[i].text != want.Text {
			t.Errorf("prompt %d: batched %q, sequential %q", i, results[i].text, want.Text)
		}
		chunked = chunked || results[i].prefillSt > 1
	}
	if !chunked {
		t.Error("no prompt was prefilled in chunks: the test did not exercise chunked prefill")
	}
	ts.waitMetric(t, "tokenwise:kv_cache_usage_perc", func(v float64) bool { return v == 0 })
}

// TestDisconnectFreesBlocks drops streams mid-generation and checks every block returns.
func TestDisconnectFreesBlocks(t *testing.T) {
	ts := startServer(t, Config{MaxSeqs: 4})
	c := ts.client("")
	for i := range 6 {
		ctx, cancel := context.WithCancel(context.Background())
		st := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{
			Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(fmt.Sprintf("stream %d goes on and on", i))},
			MaxTokens: openai.Int(200), Temperature: openai.Float(1), Seed: openai.Int(int64(i)),
			Stop: openai.CompletionNewParamsStopUnion{OfString: openai.String("never-appears-xyzzy")},
		})
		if !st.Next() {
			t.Fatalf("stream %d: no first chunk: %v", i, st.Err())
		}
		if ts.metric(t, "tokenwise:kv_cache_usage_perc") == 0 {
			t.Fatal("a running stream holds no blocks")
		}
		cancel()
		st.Close()
	}
	ts.waitMetric(t, "tokenwise:kv_cache_usage_perc", func(v float64) bool { return v == 0 })
	ts.waitMetric(t, "tokenwise:num_requests_running", func(v float64) bool { return v == 0 })
	if n := ts.metric(t, "tokenwise:request_aborted_total"); n != 6 {
		t.Fatalf("%v requests aborted, want 6", n)
	}
}

func TestQueueFull429(t *testing.T) {
	cfg, release := holdSteps(1)
	cfg.MaxSeqs, cfg.MaxWaiting = 1, 1
	ts := startServer(t, cfg)
	t.Cleanup(release) // before the server closes (cleanups run last first)
	c := ts.client("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := openai.CompletionNewParams{
		Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("a long one")},
		MaxTokens: openai.Int(240), Temperature: openai.Float(0.8), Seed: openai.Int(1),
	}
	st := c.Completions.NewStreaming(ctx, long)
	if !st.Next() { // the first token; the runner now holds its second step
		t.Fatal(st.Err())
	}
	go c.Completions.New(ctx, long) // waits behind the first
	ts.waitMetric(t, "tokenwise:num_requests_waiting", func(v float64) bool { return v == 1 })
	resp, err := http.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"x","max_tokens":2}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	checkErrorBody(t, resp.Body)
	cancel()
	release()
	ts.waitMetric(t, "tokenwise:kv_cache_usage_perc", func(v float64) bool { return v == 0 })
}

// holdSteps returns a config whose runner runs the first free steps and then holds each
// step until release is called, still taking in requests and cancellations while it holds:
// a test sees a request in flight for as long as it needs, however fast the machine is.
func holdSteps(free int) (Config, func()) {
	var (
		srv   atomic.Pointer[Server]
		steps atomic.Int64
		once  sync.Once
	)
	gate := make(chan struct{})
	cfg := Config{}
	cfg.beforeStep = func(sched.Step) {
		if steps.Add(1) <= int64(free) {
			return
		}
		for {
			select {
			case <-gate:
				return
			case <-time.After(time.Millisecond):
				if s := srv.Load(); s != nil {
					s.takeIn()
				}
			}
		}
	}
	cfg.onStart = func(s *Server) { srv.Store(s) }
	return cfg, func() { once.Do(func() { close(gate) }) }
}

func checkErrorBody(t *testing.T, r io.Reader) {
	t.Helper()
	var e errorBody
	b, _ := io.ReadAll(r)
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error body: %s", b)
	}
}

func TestBadInput(t *testing.T) {
	ts := startServer(t, Config{MaxBodyBytes: 1 << 16})
	cases := []struct {
		name, path, body string
		status           int
	}{
		{"malformed", "/v1/completions", `{"prompt": "x",`, 400},
		{"not an object", "/v1/completions", `[1,2]`, 400},
		{"trailing data", "/v1/completions", `{"prompt":"x"} {}`, 400},
		{"wrong type", "/v1/completions", `{"prompt":"x","max_tokens":"ten"}`, 400},
		{"wrong prompt type", "/v1/completions", `{"prompt":{"a":1}}`, 400},
		{"no prompt", "/v1/completions", `{"max_tokens":3}`, 400},
		{"empty prompt", "/v1/completions", `{"prompt":""}`, 400},
		{"token outside vocab", "/v1/completions", `{"prompt":[5, 999999999]}`, 400},
		{"negative token", "/v1/completions", `{"prompt":[-1]}`, 400},
		{"max_tokens beyond context", "/v1/completions", `{"prompt":"x","max_tokens":100000}`, 400},
		{"max_tokens zero", "/v1/completions", `{"prompt":"x","max_tokens":0}`, 400},
		{"invalid utf-8", "/v1/completions", "{\"prompt\":\"\xff\xfe\"}", 400},
		{"temperature", "/v1/completions", `{"prompt":"x","temperature":-1}`, 400},
		{"top_p", "/v1/completions", `{"prompt":"x","top_p":1.5}`, 400},
		{"n", "/v1/completions", `{"prompt":"x","n":3}`, 400},
		{"batch of prompts", "/v1/completions", `{"prompt":["a","b"]}`, 400},
		{"too many stops", "/v1/completions", `{"prompt":"x","stop":["a","b","c","d","e"]}`, 400},
		{"logprobs range", "/v1/completions", `{"prompt":"x","logprobs":50}`, 400},
		{"unknown model", "/v1/completions", `{"model":"gpt-9","prompt":"x"}`, 404},
		{"chat no messages", "/v1/chat/completions", `{"messages":[]}`, 400},
		{"chat bad content", "/v1/chat/completions", `{"messages":[{"role":"user","content":42}]}`, 400},
		{"chat image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400},
		{"chat top_logprobs without logprobs", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"top_logprobs":2}`, 400},
		{"chat top_logprobs range", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":21}`, 400},
		{"detokenize bad id", "/detokenize", `{"tokens":[-5]}`, 400},
		{"tokenize nothing", "/tokenize", `{}`, 400},
		{"too large", "/v1/completions", `{"prompt":"` + strings.Repeat("a", 1<<17) + `"}`, 413},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(ts.url+tc.path, "application/json", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			checkErrorBody(t, resp.Body)
		})
	}
}

func TestTokenizeDetokenizeStopAndSSE(t *testing.T) {
	ts := startServer(t, Config{})
	post := func(path, body string) (int, []byte) {
		resp, err := http.Post(ts.url+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	code, b := post("/tokenize", `{"prompt":"Hello world"}`)
	var tk struct{ Tokens []int }
	if code != 200 || json.Unmarshal(b, &tk) != nil || fmt.Sprint(tk.Tokens) != fmt.Sprint(ts.tok.Encode("Hello world", true)) {
		t.Fatalf("tokenize: %d %s", code, b)
	}
	code, b = post("/detokenize", `{"tokens":[9906,1917]}`)
	if code != 200 || !strings.Contains(string(b), ts.tok.Decode([]int{9906, 1917}, false)) {
		t.Fatalf("detokenize: %d %s", code, b)
	}

	// A stop string taken from the greedy output cuts the text before it.
	full := ts.reference(t, ts.tok.Encode("Stop here", true), 16).Text
	if len(full) < 6 {
		t.Fatalf("greedy output %q too short to pick a stop string (the fixture changed?)", full)
	}
	stop := full[len(full)/2 : len(full)/2+3]
	req, _ := json.Marshal(map[string]any{"prompt": "Stop here", "max_tokens": 16, "temperature": 0, "stop": stop, "stream": true})
	code, b = post("/v1/completions", string(req))
	if code != 200 {
		t.Fatalf("stream: %d %s", code, b)
	}
	var text strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	var last string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if !strings.HasPrefix(line, "data: ") {
			t.Fatalf("not an SSE data line: %q", line)
		}
		last = strings.TrimPrefix(line, "data: ")
		if last == "[DONE]" {
			break
		}
		var ch completionResponse
		if err := json.Unmarshal([]byte(last), &ch); err != nil {
			t.Fatalf("chunk %q: %v", last, err)
		}
		text.WriteString(ch.Choices[0].Text)
	}
	if last != "[DONE]" {
		t.Fatal("stream did not end with [DONE]")
	}
	want := full[:strings.Index(full, stop)]
	if text.String() != want {
		t.Fatalf("stopped text %q, want %q", text.String(), want)
	}
}

// TestPrefixCacheReuse sends the same long prompt twice: the second request takes the full
// blocks of the first from the prefix cache and still gives the same greedy text.
func TestPrefixCacheReuse(t *testing.T) {
	ts := startServer(t, Config{})
	p := strings.Repeat("the cache keeps whole blocks of tokens, ", 8)
	ids := ts.tok.Encode(p, true)
	body, _ := json.Marshal(map[string]any{"prompt": p, "max_tokens": 6, "temperature": 0})
	var texts []string
	var cached []int
	for range 2 {
		resp, err := http.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var res completionResponse
		err = json.NewDecoder(resp.Body).Decode(&res)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		texts = append(texts, res.Choices[0].Text)
		cached = append(cached, res.Usage.PromptTokensDetails.CachedTokens)
	}
	// Block size 16: all full blocks before the last prompt token are reused.
	if want := (len(ids) - 1) / 16 * 16; cached[0] != 0 || cached[1] != want {
		t.Fatalf("cached tokens %v, want [0 %d] for a %d-token prompt", cached, want, len(ids))
	}
	if texts[0] != texts[1] {
		t.Fatalf("with the prefix cache %q, without %q", texts[1], texts[0])
	}
	if hits := ts.metric(t, "tokenwise:prefix_cache_hits_total"); hits != float64(cached[1]) {
		t.Fatalf("prefix_cache_hits_total %v, want %d", hits, cached[1])
	}
}

func TestRequestTimeout(t *testing.T) {
	// The runner holds the request's second step until the timeout has answered 504.
	cfg, release := holdSteps(1)
	cfg.RequestTimeout = 300 * time.Millisecond
	ts := startServer(t, cfg)
	t.Cleanup(release)
	resp, err := http.Post(ts.url+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"slow","max_tokens":240,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 504 {
		t.Fatalf("status %d, want 504", resp.StatusCode)
	}
	checkErrorBody(t, resp.Body)
	release()
	ts.waitMetric(t, "tokenwise:kv_cache_usage_perc", func(v float64) bool { return v == 0 })
}

// TestPreemptionKeepsOutputs runs four sequences in a KV cache that holds two of them: the
// scheduler preempts and later recomputes, and every greedy output still equals
// engine.Generate's.
func TestPreemptionKeepsOutputs(t *testing.T) {
	// 512 bytes of K/V per token (2 layers × 2 KV heads × 16 dims × K,V × 4 bytes): 8 blocks
	// of 16 tokens.
	ts := startServer(t, Config{KVCacheBytes: 8 * 16 * 512, MaxSeqs: 4})
	if ts.NumBlocks() != 8 {
		t.Fatalf("%d blocks, want 8", ts.NumBlocks())
	}
	prompts := []string{"first of four", "second one here", "third prompt", "the fourth and last"}
	texts := make([]string, len(prompts))
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(map[string]any{"prompt": p, "max_tokens": 40, "temperature": 0, "ignore_eos": true})
			resp, err := http.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			var res completionResponse
			if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || resp.StatusCode != 200 {
				errs[i] = fmt.Errorf("status %d: %v", resp.StatusCode, err)
				return
			}
			texts[i] = res.Choices[0].Text
		}()
	}
	wg.Wait()
	for i, p := range prompts {
		if errs[i] != nil {
			t.Fatalf("prompt %d: %v", i, errs[i])
		}
		want, err := engine.Generate(context.Background(), ts.m, ts.tok, ts.tok.Encode(p, true), engine.Options{MaxTokens: 40, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		if texts[i] != want.Text {
			t.Errorf("prompt %d: served %q, engine %q", i, texts[i], want.Text)
		}
	}
	if n := ts.metric(t, "tokenwise:num_preemptions_total"); n == 0 {
		t.Fatal("no preemption happened: the test did not exercise recompute")
	}
	ts.waitMetric(t, "tokenwise:kv_cache_usage_perc", func(v float64) bool { return v == 0 })
}
