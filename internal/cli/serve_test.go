package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeDemoModel: without --model, serve answers with the embedded demo model, and its
// model list names it.
func TestServeDemoModel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	var stderr strings.Builder
	go func() {
		done <- runServe(ctx, serveFlags{host: "127.0.0.1", port: 0, maxSeqs: 2, maxBatched: 64,
			kvMem: "4MiB", timeout: time.Minute, grace: 5 * time.Second}, &stderr, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	resp, err := http.Get("http://" + addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"tokenwise-demo"`) {
		t.Fatalf("models: %s", b)
	}
	resp, err = http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"Essay:","max_tokens":3,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"completion_tokens":3`) {
		t.Fatalf("completion: %d %s", resp.StatusCode, b)
	}
	// The web page, and its second tokenizer: the demo's specialized one, merged tokens marked.
	resp, err = http.Get("http://" + addr + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `<script src="app.js"`) {
		t.Fatalf("GET /: %d %.200s", resp.StatusCode, b)
	}
	resp, err = http.Post("http://"+addr+"/v1/tokenwise/tokenize", "application/json", strings.NewReader(`{"prompt":"{\"score\": 3, \"grammar\": 2","tokenizer":"compare"}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"tokenizer":"tokenwise-demo, specialized"`) || !strings.Contains(string(b), `"domain":true`) {
		t.Fatalf("second tokenizer: %d %s", resp.StatusCode, b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("shutdown returned %v", err)
	}
	if !strings.Contains(stderr.String(), "embedded demo model") {
		t.Errorf("stderr does not say which model is served: %s", stderr.String())
	}
}

func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"512MiB": 512 << 20, "2GiB": 2 << 30, "1e9": 1e9, "800M": 800e6, "64KiB": 64 << 10, "1.5G": 1.5e9, "4096": 4096} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1G", "lots", "0", "1e30"} {
		if _, err := parseByteSize(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// TestServeGracefulShutdown serves a synth model, answers a request, and returns nil (exit
// 0) once its context is cancelled, as SIGTERM does.
func TestServeGracefulShutdown(t *testing.T) {
	dir := synthFolder(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	var stderr strings.Builder
	go func() {
		done <- runServe(ctx, serveFlags{model: dir, host: "127.0.0.1", port: 0, maxSeqs: 2, maxBatched: 64,
			kvMem: "4MiB", timeout: time.Minute, grace: 5 * time.Second}, &stderr, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp, err = http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(`{"prompt":"hi","max_tokens":4,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"completion_tokens":4`) {
		t.Fatalf("completion: %d %s", resp.StatusCode, b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop")
	}
	if !strings.Contains(stderr.String(), "shutting down") {
		t.Fatalf("stderr: %s", stderr.String())
	}
}

// A model path that cannot be used fails each command with one line that starts with that
// command's own name (the shared tokenizer loader once prefixed them all "generate:").
func TestModelErrorsNameTheCommand(t *testing.T) {
	dir := t.TempDir()
	notModel := filepath.Join(dir, "weights.bin")
	badGGUF := filepath.Join(dir, "broken.gguf")
	for p, data := range map[string]string{notModel: "x", badGGUF: "not a gguf file"} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"generate", "bench", "serve"} {
		for _, tc := range []struct{ model, want string }{
			{filepath.Join(dir, "missing"), "missing"},
			{notModel, "weights.bin: not a model folder or .gguf file"},
			{badGGUF, "broken.gguf"},
			{empty, "empty: tokenizer"},
		} {
			args := []string{cmd, "--model", tc.model}
			if cmd == "generate" {
				args = append(args, "--prompt", "hi")
			}
			_, _, err := runCLI(t, args...)
			if err == nil {
				t.Errorf("%q: no error", args)
				continue
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, cmd+": ") || strings.Contains(strings.TrimPrefix(msg, cmd+": "), "generate:") ||
				!strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("%q: error %q, want one line starting %q and naming %q", args, msg, cmd+": ", tc.want)
			}
		}
	}
}

// The server samples at OpenAI's temperature 1 by default, generate decodes greedily: both
// -h texts say so, and how to get the other behaviour.
func TestTemperatureDefaultsInHelp(t *testing.T) {
	for cmd, want := range map[string][]string{
		"serve":    {`a request without "temperature" samples at temperature 1`, `Send "temperature": 0 for greedy decoding`, "the default of tokenwise generate"},
		"generate": {"--temperature 0 (the default) is greedy decoding", `a request without "temperature" samples at`, `send "temperature": 0`},
	} {
		out, _, err := runCLI(t, cmd, "-h")
		if err != nil {
			t.Fatal(err)
		}
		flat := strings.Join(strings.Fields(out), " ")
		for _, w := range want {
			if !strings.Contains(flat, w) {
				t.Errorf("%s -h lacks %q:\n%s", cmd, w, out)
			}
		}
	}
}

// TestServeShutdownStalledConnection: a client that sent half its headers does not hold up
// SIGTERM: serve returns well within --shutdown-grace, though the header timeout is a minute.
func TestServeShutdownStalledConnection(t *testing.T) {
	dir := synthFolder(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	const grace = 5 * time.Second
	go func() {
		done <- runServe(ctx, serveFlags{model: dir, host: "127.0.0.1", port: 0, maxSeqs: 2, maxBatched: 64,
			kvMem: "4MiB", timeout: time.Minute, grace: grace, readHeader: time.Minute, read: time.Minute, idle: time.Minute},
			io.Discard, func(a string) { addrc <- a })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatalf("serve: %v", err)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Le", addr)
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("shutdown returned %v", err)
		}
	case <-time.After(2 * grace):
		t.Fatal("serve did not stop")
	}
	if el := time.Since(start); el >= grace {
		t.Fatalf("shutdown took %v: it waited on the stalled connection for the whole grace of %v", el, grace)
	}
}
