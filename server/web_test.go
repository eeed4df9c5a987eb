package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/tokenwise/tokenwise/cost"
	"github.com/tokenwise/tokenwise/demo"
	"github.com/tokenwise/tokenwise/model"
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

// demoServer serves the embedded demo model with the specialized demo tokenizer to compare.
func demoServer(t *testing.T, key string) (*testServer, *tokenizer.Tokenizer) {
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
	m, err := model.Load(base, model.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tok, err := tokenizer.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := tokenizer.Load(adapted)
	if err != nil {
		t.Fatal(err)
	}
	ts := serve(t, Config{Model: m, Tokenizer: tok, ModelName: "tokenwise-demo", KVCacheBytes: 8 << 20, APIKey: key,
		TokenizerName: "tokenwise-demo", CompareTokenizer: cmp, CompareName: "tokenwise-demo, specialized", CostHardware: "h100-sxm"},
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
	var png []byte
	b.run(t, chromedp.Screenshot(sel, &png, chromedp.ByQuery))
	path := filepath.Join("..", "docs", "web-"+name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
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
	ts, cmp := demoServer(t, "")
	b := newBrowser(t, 1100, 900)
	text := `{"status": "approved", "amount": 1200, "reason": "within the limit"}`

	// Tokens: the page shows /tokenize's ids, and the second tokenizer's.
	b.run(t, chromedp.Navigate(ts.url+"/"), chromedp.WaitVisible(`#tok-model .piece`, chromedp.ByQuery),
		chromedp.WaitVisible(`#tok-compare .piece`, chromedp.ByQuery))
	var tz struct{ Tokens []int }
	postAPI(t, ts, "", "/tokenize", map[string]any{"prompt": text}, &tz)
	if got := b.pageIDs(t, "#tok-model"); fmt.Sprint(got) != fmt.Sprint(tz.Tokens) {
		t.Errorf("tokens panel ids %v, POST /tokenize %v", got, tz.Tokens)
	}
	if got, want := b.pageIDs(t, "#tok-compare"), cmp.Encode(text, true); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("second tokenizer's ids %v, its Encode %v", got, want)
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
	prompt := "Refund request: order 1042, the parcel arrived damaged."
	b.run(t, chromedp.SetValue("#chat-prompt", prompt, chromedp.ByQuery), chromedp.SetValue("#chat-max", "24", chromedp.ByQuery),
		chromedp.Click("#chat-go", chromedp.ByQuery), waitDone(`#chat-out[data-done="1"]`), chromedp.WaitVisible(`#chat-cost td`, chromedp.ByQuery))
	var api struct {
		Choices []struct{ Message struct{ Content string } }
		Usage   Usage
	}
	postAPI(t, ts, "", "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}},
		"temperature": 0, "max_tokens": 24}, &api)
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

	// Schema: the grammar forces tokens, and the page draws as many as usage counts.
	b.run(t, chromedp.Click("#chat-use-schema", chromedp.ByQuery), chromedp.SetValue("#chat-max", "64", chromedp.ByQuery),
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
	b.shot(t, "server", "#panel-server")

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
