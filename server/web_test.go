package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tokenwise/tokenwise/cost"
	"github.com/tokenwise/tokenwise/demo"
	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/engine/sched"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/specialize"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// The web page's tests drive a real browser (Debian's chromium, headless, through chromedp)
// against the embedded demo model, served with its specialized tokenizer as the second one.
// With TOKENWISE_SCREENSHOTS=1 they write docs/web-*.png, the README's pictures.

// chromiumPath finds the browser; without one the test skips, or fails where the test
// command requires every reference (TOKENWISE_REQUIRE_REFS=1: scripts/test.sh installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH: install it (apt-get install chromium; scripts/setup-refs.sh does) to test the web page"
	if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// demoServer serves the embedded demo's specialized model (its merged domain tokens marked)
// with the base demo tokenizer to compare.
func demoServer(t *testing.T, key string) (*testServer, *tokenizer.Tokenizer) {
	return demoServerHook(t, key, nil)
}

// demoServerHook is demoServer with a hook run before each engine step.
func demoServerHook(t *testing.T, key string, beforeStep func(sched.Step)) (*testServer, *tokenizer.Tokenizer) {
	t.Helper()
	dir := t.TempDir()
	base, err := demo.ExtractModel(filepath.Join(dir, "base"))
	if err != nil {
		t.Fatal(err)
	}
	adapted, err := demo.ExtractAdapted(filepath.Join(dir, "adapted"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(adapted, model.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tok, err := tokenizer.Load(adapted)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := tokenizer.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	added, err := specialize.NewTokenIDs(adapted)
	if err != nil || len(added) == 0 {
		t.Fatalf("demo/adapted: %d new tokens, %v", len(added), err)
	}
	ts := serve(t, Config{Model: m, Tokenizer: tok, ModelName: "tokenwise-demo-adapted", KVCacheBytes: 8 << 20, APIKey: key,
		TokenizerName: "tokenwise-demo, specialized", DomainTokens: added, CompareTokenizer: cmp, CompareName: "tokenwise-demo, base",
		CostHardware: "h100-sxm", CostName: "tokenwise-demo-adapted", beforeStep: beforeStep},
		func(s *Server) *http.Server { return &http.Server{Handler: s.Handler()} })
	return ts, cmp
}

// browser is a headless chromium tab that records console errors, exceptions, error log
// entries (CSP violations, failed loads) and every URL the page requests.
type browser struct {
	ctx      context.Context
	mu       sync.Mutex
	problems []string
	urls     []string
}

func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // the test may run as root
		chromedp.DisableGPU,
		chromedp.WindowSize(width, height),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter"),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	b := &browser{ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError || e.Type == runtime.APITypeWarning {
				var args []string
				for _, a := range e.Args {
					args = append(args, string(a.Value)+a.Description)
				}
				b.problems = append(b.problems, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(args, " ")))
			}
		case *runtime.EventExceptionThrown:
			b.problems = append(b.problems, "exception: "+e.ExceptionDetails.Error())
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.LevelError || e.Entry.Level == cdplog.LevelWarning {
				b.problems = append(b.problems, fmt.Sprintf("log %s (%s): %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			b.urls = append(b.urls, e.Request.URL)
		}
	})
	if err := chromedp.Run(ctx, network.Enable(), cdplog.Enable(), runtime.Enable()); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *browser) run(t *testing.T, actions ...chromedp.Action) {
	t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// check fails on any console error or warning and on any request to a host but the server.
func (b *browser) check(t *testing.T, server string) {
	t.Helper()
	u, _ := url.Parse(server)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("browser: %s", p)
	}
	for _, raw := range b.urls {
		r, err := url.Parse(raw)
		if err != nil || r.Scheme == "data" {
			continue
		}
		if r.Host != u.Host {
			t.Errorf("the page requested %s: a host other than the server %s", raw, u.Host)
		}
	}
	if len(b.urls) == 0 {
		t.Error("no request recorded: the network listener is not working")
	}
}

// text reads an element's text.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	var s string
	b.run(t, chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

func (b *browser) eval(t *testing.T, js string, out any) {
	t.Helper()
	b.run(t, chromedp.Evaluate(js, out))
}

func (b *browser) shot(t *testing.T, name, sel string) {
	t.Helper()
	if os.Getenv("TOKENWISE_SCREENSHOTS") != "1" {
		return
	}
	var raw []byte
	b.run(t, chromedp.Screenshot(sel, &raw, chromedp.ByQuery))
	small, err := palettePNG(raw)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "docs", "web-"+name+".png")
	if err := os.WriteFile(path, small, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes; %d as the browser wrote it)", path, len(small), len(raw))
}

// palettePNG re-encodes a screenshot with a 256-colour palette, to keep the committed PNGs
// small: the page's flat colours are the most frequent and stay exact, anti-aliased edges
// take the nearest of them.
func palettePNG(in []byte) ([]byte, error) {
	img, err := png.Decode(bytes.NewReader(in))
	if err != nil {
		return nil, err
	}
	r := img.Bounds()
	counts := map[color.RGBA]int{}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			counts[color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)]++
		}
	}
	cols := make([]color.RGBA, 0, len(counts))
	for c := range counts {
		cols = append(cols, c)
	}
	slices.SortFunc(cols, func(a, b color.RGBA) int {
		if d := counts[b] - counts[a]; d != 0 {
			return d
		}
		return int(a.R)<<16 | int(a.G)<<8 | int(a.B) - (int(b.R)<<16 | int(b.G)<<8 | int(b.B))
	})
	pal := color.Palette{}
	for _, c := range cols[:min(256, len(cols))] {
		pal = append(pal, c)
	}
	out := image.NewPaletted(r, pal)
	near := map[color.RGBA]uint8{}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			i, ok := near[c]
			if !ok {
				i = uint8(pal.Index(c))
				near[c] = i
			}
			out.SetColorIndex(x, y, i)
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&buf, out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func postAPI(t *testing.T, ts *testServer, key, path string, body any, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", ts.url+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %s", path, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// pageIDs are the ids a tokens column shows.
func (b *browser) pageIDs(t *testing.T, col string) []int {
	t.Helper()
	var ids []int
	b.eval(t, `[...document.querySelectorAll("`+col+` .piece")].map(p => Number(p.dataset.id))`, &ids)
	return ids
}

func waitDone(sel string) chromedp.Action {
	return chromedp.WaitVisible(sel, chromedp.ByQuery)
}

func TestWebPage(t *testing.T) {
	// While held is set, the runner parks before its next step (its gauges just updated for
	// it) and waits for gate.
	// With holdAt3 set, the runner holds itself at the first step that decodes three
	// sequences: a poller from the outside could miss that window on a fast machine (the
	// demo model finishes 40 tokens in a few milliseconds). Until then each step of fewer
	// sequences is slowed by 20 ms, so that the three requests, posted at once but reaching
	// the runner as the machine schedules their handlers, overlap however loaded it is: the
	// runner admits what has arrived before every step, and the first request's 40 tokens
	// now take at least 0.8 s (without it, test.sh failed here once with the other packages'
	// tests running beside it).
	var gate sync.Mutex
	var held, holdAt3 atomic.Bool
	parked := make(chan struct{}, 1)
	ts, cmp := demoServerHook(t, "", func(step sched.Step) {
		if holdAt3.Load() {
			decoding := 0
			for _, w := range step.Work {
				if !w.Prefill {
					decoding++
				}
			}
			if decoding == 3 {
				holdAt3.Store(false)
				held.Store(true)
			} else {
				time.Sleep(20 * time.Millisecond)
			}
		}
		if held.Load() {
			parked <- struct{}{}
			gate.Lock()
			gate.Unlock()
		}
	})
	b := newBrowser(t, 1000, 800)
	// The demo's job: a held-out essay's verdict, as the demo model was trained to write it.
	ex := domain.Generate(demo.HeldOutSeed, 1)[0]
	text := ex.Completion

	// Tokens: the page shows /tokenize's ids, and the second tokenizer's.
	b.run(t, chromedp.Navigate(ts.url+"/"), chromedp.WaitVisible(`#tok-model .piece`, chromedp.ByQuery),
		chromedp.WaitVisible(`#tok-compare .piece`, chromedp.ByQuery),
		chromedp.SetValue("#tok-text", text, chromedp.ByQuery), chromedp.Click("#tok-go", chromedp.ByQuery),
		chromedp.Poll(`document.body.dataset.tokenized === "2"`, nil))
	var tz struct{ Tokens []int }
	postAPI(t, ts, "", "/tokenize", map[string]any{"prompt": text}, &tz)
	if got := b.pageIDs(t, "#tok-model"); fmt.Sprint(got) != fmt.Sprint(tz.Tokens) {
		t.Errorf("tokens panel ids %v, POST /tokenize %v", got, tz.Tokens)
	}
	if got, want := b.pageIDs(t, "#tok-compare"), cmp.Encode(text, true); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("second tokenizer's ids %v, its Encode %v", got, want)
	}
	var marked, want int
	b.eval(t, `document.querySelectorAll("#tok-model .piece.domain").length`, &marked)
	for _, id := range tz.Tokens {
		if ts.domain[id] {
			want++
		}
	}
	if marked != want || want == 0 {
		t.Errorf("tokens panel marks %d domain tokens; the text has %d", marked, want)
	}
	if s := b.text(t, "#tok-model .stats"); !strings.HasPrefix(s, strconv.Itoa(len(tz.Tokens))+" tokens · "+strconv.Itoa(len(text))+" bytes") {
		t.Errorf("tokens stats %q, want %d tokens of %d bytes", s, len(tz.Tokens), len(text))
	}
	b.shot(t, "tokens", "body")

	// Keyboard: the arrow key moves from the Tokens tab to the Chat tab.
	var selected string
	b.run(t, chromedp.Focus("#tab-tokens", chromedp.ByQuery), chromedp.KeyEvent(kb.ArrowRight),
		chromedp.AttributeValue("#tab-chat", "aria-selected", &selected, nil, chromedp.ByQuery))
	if selected != "true" {
		t.Fatalf("ArrowRight on the Tokens tab: Chat tab aria-selected %q", selected)
	}

	// Chat: a greedy streamed answer; the page's counts are the API's usage for the same request.
	prompt := ex.Prompt
	b.run(t, chromedp.SetValue("#chat-prompt", prompt, chromedp.ByQuery), chromedp.SetValue("#chat-max", "40", chromedp.ByQuery),
		chromedp.Click("#chat-go", chromedp.ByQuery), waitDone(`#chat-out[data-done="1"]`), chromedp.WaitVisible(`#chat-cost td`, chromedp.ByQuery))
	var api struct {
		Choices []struct{ Message struct{ Content string } }
		Usage   Usage
	}
	postAPI(t, ts, "", "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}},
		"temperature": 0, "max_tokens": 40}, &api)
	var answer string
	b.eval(t, `[...document.querySelectorAll("#chat-out .tok:not(.special)")].map(t => t.textContent).join("")`, &answer)
	if answer != api.Choices[0].Message.Content {
		t.Errorf("page's answer %q, API's %q", answer, api.Choices[0].Message.Content)
	}
	u := api.Usage
	for k, want := range map[string]int{"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
		"prefill_steps": u.PrefillSteps, "decode_steps": u.DecodeSteps, "timeline_prefill": u.PrefillSteps, "timeline_decode": u.DecodeSteps} {
		if got := b.text(t, `#chat-usage td[data-k=`+k+`]`); got != strconv.Itoa(want) {
			t.Errorf("chat panel %s = %s, API usage %d", k, got, want)
		}
	}
	var segs int
	b.eval(t, `document.querySelectorAll("#chat-timeline .seg.decode").length`, &segs)
	if segs != u.DecodeSteps {
		t.Errorf("timeline draws %d decode steps, usage has %d", segs, u.DecodeSteps)
	}
	b.shot(t, "chat", "#panel-chat")

	// Schema: the grammar forces tokens, and the page draws as many as usage counts. The
	// demo's verdict schema, its strings bounded so that the answer ends within max_tokens.
	schema := strings.ReplaceAll(domain.Schema, `{"type":"string"}`, `{"type":"string","maxLength":48}`)
	b.run(t, chromedp.Click("#chat-use-schema", chromedp.ByQuery), chromedp.SetValue("#chat-schema", schema, chromedp.ByQuery),
		chromedp.SetValue("#chat-max", "200", chromedp.ByQuery),
		chromedp.Click("#chat-go", chromedp.ByQuery), waitDone(`#chat-out[data-done="1"]`))
	var forced, jumped int
	b.eval(t, `document.querySelectorAll('#chat-out .tok[data-source="forced"]').length`, &forced)
	b.eval(t, `document.querySelectorAll('#chat-out .tok[data-source="jump-forward"]').length`, &jumped)
	if forced+jumped == 0 {
		t.Error("a json_schema answer shows no forced token")
	}
	if got := b.text(t, `#chat-usage td[data-k=forced_tokens]`); got != fmt.Sprintf("%d / %d", forced+jumped, jumped) {
		t.Errorf("usage forced / jump-forward %q; the page drew %d forced and %d jump-forward tokens", got, forced, jumped)
	}
	var out string
	b.eval(t, `[...document.querySelectorAll("#chat-out .tok:not(.special)")].map(t => t.textContent).join("")`, &out)
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Errorf("the schema answer %q is not JSON: %v", out, err)
	}
	b.shot(t, "schema", "#panel-chat")

	// Server: the status shows the two finished requests of the page and the one of the test.
	b.run(t, chromedp.Click("#tab-server", chromedp.ByQuery), chromedp.WaitVisible(`#srv td[data-k=total]`, chromedp.ByQuery),
		chromedp.Sleep(1200*time.Millisecond))
	if got := b.text(t, `#srv td[data-k=total]`); !strings.HasSuffix(got, " / 3") {
		t.Errorf("server panel: tokens / requests %q, want 3 requests finished", got)
	}
	// Three requests in flight, held between two steps: the panel shows them running and
	// their KV blocks, as the status says.
	status := func() map[string]any {
		resp, err := http.Get(ts.url + "/v1/tokenwise/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var st map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Fatal(err)
		}
		return st
	}
	gate.Lock()
	holdAt3.Store(true)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, _ := json.Marshal(map[string]any{"prompt": fmt.Sprintf("%d %s", i, ex.Prompt), "max_tokens": 40, "ignore_eos": true, "temperature": 0})
			resp, err := http.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("completion: %s", resp.Status)
			}
		}()
	}
	select {
	case <-parked:
	case <-time.After(30 * time.Second):
		t.Fatalf("the three requests were never decoded in one step: %v", status())
	}
	st := status() // the runner's state now it is held
	if st["running"] != 3.0 {
		t.Fatalf("held at a step decoding three sequences, status says %v running", st["running"])
	}
	b.run(t, chromedp.Poll(`document.querySelector("#srv td[data-k=running]").textContent.startsWith("3 of")`, nil),
		chromedp.Sleep(1100*time.Millisecond)) // one more poll: tokens/s falls to 0 while held
	if got, want := b.text(t, `#srv td[data-k=kv]`), fmt.Sprintf("%v of %v", st["kv_blocks_used"], st["kv_blocks"]); !strings.HasPrefix(got, want) || st["kv_blocks_used"] == 0.0 {
		t.Errorf("server panel KV %q, status %s", got, want)
	}
	b.shot(t, "server", "#panel-server")
	held.Store(false)
	gate.Unlock()
	wg.Wait()

	// Cost: the page's ratio is the cost model's for the served model on the chosen profile.
	b.run(t, chromedp.Click("#tab-cost", chromedp.ByQuery), chromedp.WaitVisible(`#cost-plot svg`, chromedp.ByQuery))
	shape := cost.FromModelConfig(ts.m.Config())
	hw, _ := cost.LoadProfile("h100-sxm")
	bf16, _ := cost.ParsePrecision("bf16")
	est, err := shape.Estimate(hw, cost.Workload{Prompt: 512, Output: 128, Batch: 1, DType: bf16, KV: bf16})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.text(t, `#cost-table td[data-k=ratio]`), fmt.Sprintf("%.1f×", est.OutputOverInput); !strings.HasPrefix(got, want) {
		t.Errorf("cost panel ratio %q, the cost model's %s", got, want)
	}
	b.shot(t, "cost", "#panel-cost")
	b.check(t, ts.url)

	// A phone's width: nothing wider than the screen.
	var overflow bool
	b.run(t, chromedp.EmulateViewport(390, 800), chromedp.Click("#tab-tokens", chromedp.ByQuery), chromedp.Sleep(200*time.Millisecond))
	b.eval(t, `document.documentElement.scrollWidth > window.innerWidth`, &overflow)
	if overflow {
		t.Error("at 390 px the page is wider than the screen")
	}
	b.shot(t, "phone", "body")
}

// TestWebPageAPIKey: the page asks for the key, uses it, and keeps it while the tab is open.
func TestWebPageAPIKey(t *testing.T) {
	ts, _ := demoServer(t, "sekrit")
	b := newBrowser(t, 1000, 700)
	b.run(t, chromedp.Navigate(ts.url+"/"), chromedp.WaitVisible(`#model-name`, chromedp.ByQuery), chromedp.Sleep(300*time.Millisecond))
	if s := b.text(t, "#key-state"); s != "this server needs an API key" {
		t.Errorf("key state %q before the key is given", s)
	}
	var n int
	b.eval(t, `document.querySelectorAll("#tok-model .piece").length`, &n)
	if n != 0 {
		t.Errorf("%d tokens shown before the key is given", n)
	}
	b.run(t, chromedp.SendKeys("#api-key", "sekrit", chromedp.ByQuery), chromedp.Click("#key-save", chromedp.ByQuery),
		chromedp.WaitVisible(`#tok-model .piece`, chromedp.ByQuery))
	var tz struct{ Tokens []int }
	var text string
	b.eval(t, `document.querySelector("#tok-text").value`, &text)
	postAPI(t, ts, "sekrit", "/tokenize", map[string]any{"prompt": text}, &tz)
	if got := b.pageIDs(t, "#tok-model"); fmt.Sprint(got) != fmt.Sprint(tz.Tokens) {
		t.Errorf("with the key: ids %v, /tokenize %v", got, tz.Tokens)
	}
	// A streamed chat with the key.
	b.run(t, chromedp.Click("#tab-chat", chromedp.ByQuery), chromedp.SetValue("#chat-max", "8", chromedp.ByQuery),
		chromedp.Click("#chat-go", chromedp.ByQuery), waitDone(`#chat-out[data-done="1"]`))
	if got, _ := strconv.Atoi(b.text(t, `#chat-usage td[data-k=completion_tokens]`)); got < 1 {
		t.Errorf("chat with the key: %d completion tokens", got)
	}
	// Reloading the tab keeps the key (sessionStorage).
	b.run(t, chromedp.Reload(), chromedp.WaitReady(`#tok-model[data-count]`, chromedp.ByQuery)) // the tokens filled in (the Chat tab is shown)
	if s := b.text(t, "#key-state"); s != "key in use" {
		t.Errorf("after a reload: key state %q", s)
	}
	b.check(t, ts.url)
}

// streamChunks posts a streamed request and returns its data: payloads.
func streamChunks(t *testing.T, ts *testServer, path string, body map[string]any) []map[string]json.RawMessage {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(ts.url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s: %s", path, resp.Status)
	}
	var all bytes.Buffer
	if _, err := all.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	var out []map[string]json.RawMessage
	for _, line := range strings.Split(all.String(), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		out = append(out, m)
	}
	return out
}

// TestStreamIncludeTokens: with stream_options.include_tokens every output token is in the
// chunks with its source, the tokens' texts are the content, and the usage chunk's steps are
// the usage's: as many prefill and decode steps, their shares adding up to its ms.
func TestStreamIncludeTokens(t *testing.T) {
	ts, _ := demoServer(t, "")
	schema := json.RawMessage(`{"type":"object","properties":{"decision":{"enum":["approve","deny","escalate"]}},"required":["decision"],"additionalProperties":false}`)
	for _, tc := range []struct {
		name   string
		path   string
		schema bool
	}{{"chat", "/v1/chat/completions", false}, {"chat-schema", "/v1/chat/completions", true}, {"completion", "/v1/completions", false}} {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"temperature": 0, "max_tokens": 20, "stream": true,
				"stream_options": map[string]bool{"include_usage": true, "include_tokens": true}}
			if tc.path == "/v1/completions" {
				body["prompt"] = "Refund request: order 1042"
			} else {
				body["messages"] = []map[string]string{{"role": "user", "content": "Refund request: order 1042"}}
			}
			if tc.schema {
				body["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "v", "schema": schema}}
			}
			var content, tokText strings.Builder
			var toks []streamToken
			var usage *Usage
			var steps *chunkSteps
			for _, c := range streamChunks(t, ts, tc.path, body) {
				var choices []struct {
					Text      string
					Delta     struct{ Content string }
					Tokenwise *chunkTokens
				}
				json.Unmarshal(c["choices"], &choices)
				for _, ch := range choices {
					content.WriteString(ch.Text + ch.Delta.Content)
					if ch.Tokenwise != nil {
						toks = append(toks, ch.Tokenwise.Tokens...)
					}
				}
				if raw, ok := c["usage"]; ok {
					json.Unmarshal(raw, &usage)
					json.Unmarshal(c["tokenwise"], &steps)
				}
			}
			if usage == nil || steps == nil {
				t.Fatal("no usage chunk with tokenwise steps")
			}
			if len(toks) != usage.CompletionTokens {
				t.Errorf("%d tokens in the chunks, usage has %d", len(toks), usage.CompletionTokens)
			}
			forced, jumped := 0, 0
			for _, tk := range toks {
				switch tk.Source {
				case "forced":
					forced++
				case "jump-forward":
					jumped++
				case "sampled", "draft":
				default:
					t.Errorf("token %d: source %q", tk.ID, tk.Source)
				}
				if !tk.Special {
					tokText.WriteString(tk.Text)
				}
			}
			if tokText.String() != content.String() {
				t.Errorf("the tokens' texts %q, the content %q", tokText.String(), content.String())
			}
			if forced+jumped != usage.ForcedTokens || jumped != usage.JumpedTokens {
				t.Errorf("chunks: %d forced + %d jump-forward; usage forced %d, jumped %d", forced, jumped, usage.ForcedTokens, usage.JumpedTokens)
			}
			if tc.schema && forced+jumped == 0 {
				t.Error("a schema answer with no forced token")
			}
			np, nd := 0, 0
			var pms, dms float64
			for _, s := range steps.Steps {
				if s.Prefill {
					np, pms = np+1, pms+s.ShareMs
				} else {
					nd, dms = nd+1, dms+s.ShareMs
				}
			}
			if np != usage.PrefillSteps || nd != usage.DecodeSteps {
				t.Errorf("steps: %d prefill, %d decode; usage %d, %d", np, nd, usage.PrefillSteps, usage.DecodeSteps)
			}
			// engine.charge rounds each share to a nanosecond.
			if d := pms - usage.PrefillMs; d > 1e-3*float64(np) || d < -1e-3*float64(np) {
				t.Errorf("prefill shares add up to %v ms, usage %v", pms, usage.PrefillMs)
			}
			if d := dms - usage.DecodeMs; d > 1e-3*float64(nd) || d < -1e-3*float64(nd) {
				t.Errorf("decode shares add up to %v ms, usage %v", dms, usage.DecodeMs)
			}
		})
	}
	// Without the option the chunks are OpenAI's, with no tokenwise field.
	for _, c := range streamChunks(t, ts, "/v1/chat/completions", map[string]any{"max_tokens": 4, "stream": true,
		"messages": []map[string]string{{"role": "user", "content": "hi"}}, "stream_options": map[string]bool{"include_usage": true}}) {
		if _, ok := c["tokenwise"]; ok || strings.Contains(string(c["choices"]), "tokenwise") {
			t.Errorf("a chunk without include_tokens has the tokenwise field: %v", c)
		}
	}
}

// TestWebEndpoints: the page and the status are open under --api-key, the rest is not; the
// cost endpoint names only shipped profiles.
func TestWebEndpoints(t *testing.T) {
	ts, _ := demoServer(t, "k")
	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/", "", 200}, {"GET", "/app.js", "", 200}, {"GET", "/app.css", "", 200}, {"GET", "/v1/tokenwise/status", "", 200},
		{"POST", "/v1/tokenwise/tokenize", `{"prompt":"x"}`, 401}, {"GET", "/v1/tokenwise/cost", "", 401},
		{"GET", "/nothing.js", "", 401},
	} {
		req, _ := http.NewRequest(tc.method, ts.url+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s without the key: %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}
	get := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", ts.url+path, nil)
		req.Header.Set("Authorization", "Bearer k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	if code, body := get("/v1/tokenwise/cost?hardware=/etc/passwd"); code != 400 || !strings.Contains(body, "not a shipped profile") {
		t.Errorf("cost with a file path: %d %s", code, body)
	}
	if code, body := get("/v1/tokenwise/cost?prompt=0"); code != 400 || !strings.Contains(body, "prompt") {
		t.Errorf("cost with prompt=0: %d %s", code, body)
	}
	code, body := get("/v1/tokenwise/cost?hardware=l4&prompt=256&output=64&batch=4")
	var r struct {
		Estimate cost.Estimate
		Sweep    []cost.SweepPoint
		SVG      string
	}
	if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil {
		t.Fatalf("cost: %d %v %s", code, err, body)
	}
	if r.Estimate.Hardware == "" || len(r.Sweep) != 13 || !strings.HasPrefix(r.SVG, "<svg") {
		t.Errorf("cost: hardware %q, %d sweep points, svg %.20q", r.Estimate.Hardware, len(r.Sweep), r.SVG)
	}
}
