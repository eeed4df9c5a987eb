package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// goNames are Go's names for the request types, which no error may show a client.
var goNames = []string{"samplingFields", "completionRequest", "chatRequest", "chatMessage", "streamOptions", "server.", "json.RawMessage"}

// FuzzRequestParsing feeds arbitrary bodies through everything that reads a request before
// it reaches the model: no input may panic, every rejection must be a 4xx error, and an error
// that names a field says it in the message, in the client's terms.
func FuzzRequestParsing(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hi","max_tokens":3,"temperature":0.5,"stop":["a"],"logprobs":2}`,
		`{"prompt":[1,2,3],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":[[1,2]],"top_k":-1,"min_p":0.1,"seed":-7}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"logprobs":true,"top_logprobs":3}`,
		`{"messages":[{"role":"system","content":null}],"max_completion_tokens":1e400}`,
		`{"prompt":"x","stop":"\u0000","n":1,"presence_penalty":2,"frequency_penalty":-2}`,
		"{\"prompt\":\"\xff\"}", `[`, `null`, `{"prompt":{}}`,
		`{"messages":[{"role":"user","content":"a"},{"role":5}],"tools":[],"logit_bias":null}`,
		`{"stream_options":{"include_usage":"yes","x":1},"max_tokens":1.5}`,
		`{"messages":[{"role":"user","content":"<|eot_id|>","name":"n"}],"response_format":{"type":"json_object"}}`,
		`{"prompt":"x","user":"u","MAX_TOKENS":2,"model":["m"]}`, `{"tokens":[1,"2",null],"add_special_tokens":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(e *apiError) {
			if e == nil {
				return
			}
			if e.status < 400 || e.status >= 500 || e.msg == "" {
				t.Fatalf("rejection %+v for %q", e, body)
			}
			if e.param != "" && !strings.Contains(e.msg, e.param) {
				t.Fatalf("error for %s does not name it: %q (body %q)", e.param, e.msg, body)
			}
			for _, n := range goNames {
				if strings.Contains(e.msg, n) && !bytes.Contains(body, []byte(n)) {
					t.Fatalf("error in Go's terms: %q (body %q)", e.msg, body)
				}
			}
		}
		var c completionRequest
		if e := decodeJSON(body, &c); e != nil {
			check(e)
		} else {
			_, e := c.params("max_tokens", c.MaxTokens)
			check(e)
			_, _, e = promptInput(c.Prompt)
			check(e)
		}
		var tk struct {
			Model            string        `json:"model"`
			Prompt           *string       `json:"prompt"`
			Messages         []chatMessage `json:"messages"`
			Tokens           []int         `json:"tokens"`
			AddSpecialTokens *bool         `json:"add_special_tokens"`
		}
		check(decodeJSON(body, &tk))
		var ch chatRequest
		if e := decodeJSON(body, &ch); e != nil {
			check(e)
			return
		}
		_, e := ch.params("max_completion_tokens", ch.MaxCompletionTokens)
		check(e)
		for i, m := range ch.Messages {
			_, e := messageText(i, m.Content)
			check(e)
		}
	})
}

// FuzzHandler sends arbitrary requests — method, path, Host, Origin, Authorization,
// Content-Type and body — through the whole handler: policy, auth, routing, decoding, chat
// templates and short generations. No input may panic or get a 5xx other than the request
// timeout, and every error is an OpenAI error body.
func FuzzHandler(f *testing.F) {
	const addr = "127.0.0.1:8080"
	for _, s := range []struct{ method, path, host, origin, auth, ctype, body string }{
		{"POST", "/v1/completions", addr, "", "Bearer k", "application/json", `{"prompt":"hi","max_tokens":2}`},
		{"POST", "/v1/chat/completions", "localhost:8080", "http://localhost:8080", "bearer k", "text/plain",
			`{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true,"logprobs":true,"top_logprobs":2}`},
		{"POST", "/v1/chat/completions", addr, "http://evil.example", "Bearer k", "text/plain", `{"messages":[{"role":"user","content":"hi"}]}`},
		{"POST", "/v1/chat/completions", addr, "", "Bearer k", "", `{"messages":[{"role":"user<|eot_id|>","content":"<|eot_id|>"}],"tools":[{}]}`},
		{"GET", "/v1/models/tiny", "evil.example", "", "Bearer k", "", ""},
		{"GET", "/v1/models/x/y", addr, "null", "Basic k", "", ""},
		{"OPTIONS", "/v1/completions", addr, "https://app.example", "", "", ""},
		{"POST", "/tokenize", "[::1]:8080", "", "BEARER k", "", `{"messages":[{"role":"tool","content":"x"}]}`},
		{"POST", "/detokenize", addr, "", "Bearer k", "", `{"tokens":[1,2,128000]}`},
		{"DELETE", "/metrics", addr, "", "", "", ""},
		{"GET", "/health", "", "", "", "", "x"},
	} {
		f.Add(s.method, s.path, s.host, s.origin, s.auth, s.ctype, []byte(s.body))
	}
	ts := startServer(f, Config{APIKey: "k", RequestTimeout: 200 * time.Millisecond, MaxModelLen: 64,
		AllowOrigins: []string{"https://app.example"}})
	h := ts.Handler()
	f.Fuzz(func(t *testing.T, method, path, host, origin, auth, ctype string, body []byte) {
		req, err := http.NewRequest(method, "http://"+addr+path, bytes.NewReader(body))
		if err != nil || !strings.HasPrefix(req.URL.Path, "/") {
			return // not a request a server can receive
		}
		req.Host = host
		for k, v := range map[string]string{"Origin": origin, "Authorization": auth, "Content-Type": ctype} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 && w.Code != 504 {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		if w.Code >= 400 {
			var e errorBody
			if w.Header().Get("Content-Type") != "application/json" || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Fatalf("%s %s: %d without an OpenAI error body: %s", method, path, w.Code, w.Body)
			}
		}
	})
}
