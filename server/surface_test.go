package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// TestModelsRetrieve: GET /v1/models/{id} through the official client, and its 404 parsed as
// an OpenAI error object.
func TestModelsRetrieve(t *testing.T) {
	ts := startServer(t, Config{})
	c := ts.client("")
	ctx := context.Background()
	m, err := c.Models.Get(ctx, "tiny")
	if err != nil || m.ID != "tiny" || m.Object != "model" || m.OwnedBy != "tokenwise" {
		t.Fatalf("retrieve: %+v %v", m, err)
	}
	_, err = c.Models.Get(ctx, "gpt-9")
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Code != "model_not_found" || ae.Param != "model" ||
		ae.Type != "invalid_request_error" || !strings.Contains(ae.Message, `"gpt-9"`) {
		t.Fatalf("unknown model: %#v", err)
	}
	// An unsupported field, parsed by the client as an error object naming it.
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "tiny", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		LogitBias: map[string]int64{"15": 100},
	})
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Param != "logit_bias" || ae.Code != "unsupported_parameter" {
		t.Fatalf("logit_bias: %#v", err)
	}
}

// TestErrorBodies: every refusal, the router's 404 and 405 included, is an OpenAI error body.
func TestErrorBodies(t *testing.T) {
	ts := startServer(t, Config{})
	for _, tc := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/nope", 404},
		{"GET", "/v1/models/gpt-9", 404},
		{"GET", "/v1/models/", 404},
		{"GET", "/v1/chat/completions", 405},
		{"DELETE", "/v1/models", 405},
		{"PUT", "/tokenize", 405},
	} {
		req, _ := http.NewRequest(tc.method, ts.url+tc.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if tc.status == 405 && resp.Header.Get("Allow") == "" {
			t.Fatalf("%s %s: 405 without Allow", tc.method, tc.path)
		}
		checkErrorBody(t, resp.Body)
		resp.Body.Close()
	}
}

// TestResponseIDsAndCreated: ids are random, not sequence numbers, and created is the
// response's own time, not the server's start.
func TestResponseIDsAndCreated(t *testing.T) {
	ts := startServer(t, Config{})
	// Cross a second boundary, so a created frozen at start would be visibly old.
	start := time.Now().Unix()
	for time.Now().Unix() == start {
		time.Sleep(20 * time.Millisecond)
	}
	idPat := regexp.MustCompile(`^(cmpl|chatcmpl)-[A-Za-z0-9]{20,}$`)
	seen := map[string]bool{}
	for i, tc := range []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"a","max_tokens":1}`},
		{"/v1/completions", `{"prompt":"a","max_tokens":1}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":1}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":1,"stream":true}`},
	} {
		before := time.Now().Unix()
		resp, err := http.Post(ts.url+tc.path, "application/json", strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		after := time.Now().Unix()
		body := string(b)
		if strings.HasPrefix(body, "data: ") { // the first chunk
			body = strings.TrimPrefix(strings.SplitN(body, "\n", 2)[0], "data: ")
		}
		var r struct {
			ID      string
			Created int64
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("%d: %v: %s", i, err, b)
		}
		if !idPat.MatchString(r.ID) || seen[r.ID] {
			t.Fatalf("%d: id %q is not a fresh random id", i, r.ID)
		}
		seen[r.ID] = true
		if r.Created < before || r.Created > after {
			t.Fatalf("%d: created %d, the request ran in [%d, %d] (server started at %d)", i, r.Created, before, after, start)
		}
	}
}

// TestBearerScheme: the auth scheme is case-insensitive; the key is not.
func TestBearerScheme(t *testing.T) {
	ts := startServer(t, Config{APIKey: "Sekrit"})
	for auth, want := range map[string]int{
		"Bearer Sekrit": 200, "bearer Sekrit": 200, "BEARER  Sekrit": 200,
		"Bearer sekrit": 401, "Basic Sekrit": 401, "Sekrit": 401, "": 401, "Bearer": 401, "BearerSekrit": 401,
	} {
		req, _ := http.NewRequest("GET", ts.url+"/v1/models", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != want {
			t.Errorf("Authorization %q: %d, want %d", auth, resp.StatusCode, want)
		}
		if want == 401 {
			checkErrorBody(t, resp.Body)
		}
		resp.Body.Close()
	}
}

// TestFieldErrors: unknown and unsupported fields are refused naming the field, and every
// error names fields as the client wrote them, never by Go's names.
func TestFieldErrors(t *testing.T) {
	ts := startServer(t, Config{})
	const user = `{"role":"user","content":"hi"}`
	chat := func(extra string) string {
		return `{"messages":[` + user + `,` + user + `,` + user + `],"max_tokens":1` + extra + `}`
	}
	cases := []struct {
		name, path, body, param, code string
		status                        int
	}{
		{"tools", "/v1/chat/completions", chat(`,"tools":[{"type":"function","function":{"name":"f"}}]`), "tools", "unsupported_parameter", 400},
		{"tool_choice", "/v1/chat/completions", chat(`,"tool_choice":"auto"`), "tool_choice", "unsupported_parameter", 400},
		{"functions", "/v1/chat/completions", chat(`,"functions":[]`), "functions", "unsupported_parameter", 400},
		{"logit_bias", "/v1/completions", `{"prompt":"x","logit_bias":{"1":5}}`, "logit_bias", "unsupported_parameter", 400},
		{"response_format type", "/v1/chat/completions", chat(`,"response_format":{"type":"yaml"}`), "response_format.type", "", 400},
		{"response_format unknown field", "/v1/chat/completions", chat(`,"response_format":{"type":"json_object","schema":{}}`), "response_format.schema", "unknown_parameter", 400},
		{"best_of", "/v1/completions", `{"prompt":"x","best_of":2}`, "best_of", "unsupported_parameter", 400},
		{"message name", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi","name":"bob"}]}`, "messages[0].name", "unsupported_parameter", 400},
		{"misspelt field", "/v1/completions", `{"prompt":"x","max_token":3}`, "max_token", "unknown_parameter", 400},
		{"unknown in stream_options", "/v1/completions", `{"prompt":"x","stream_options":{"include_usage":true,"extra":1}}`, "stream_options.extra", "unknown_parameter", 400},
		{"unknown on tokenize", "/tokenize", `{"prompt":"x","foo":1}`, "foo", "unknown_parameter", 400},
		{"role type", "/v1/chat/completions", `{"messages":[` + user + `,` + user + `,` + user + `,{"role":5,"content":"x"}]}`, "messages[3].role", "", 400},
		{"max_completion_tokens type", "/v1/chat/completions", chat(`,"max_completion_tokens":"ten"`), "max_completion_tokens", "", 400},
		{"max_completion_tokens zero", "/v1/chat/completions", chat(`,"max_completion_tokens":0`), "max_completion_tokens", "", 400},
		{"max_completion_tokens beyond context", "/v1/chat/completions", chat(`,"max_completion_tokens":100000`), "max_completion_tokens", "", 400},
		{"max_tokens type", "/v1/completions", `{"prompt":"x","max_tokens":1.5}`, "max_tokens", "", 400},
		{"include_usage type", "/v1/completions", `{"prompt":"x","stream_options":{"include_usage":"yes"}}`, "stream_options.include_usage", "", 400},
		{"messages type", "/v1/chat/completions", `{"messages":{"role":"user"}}`, "messages", "", 400},
		{"message type", "/v1/chat/completions", `{"messages":["hi"]}`, "messages[0]", "", 400},
		{"tokens type", "/detokenize", `{"tokens":[1,"2"]}`, "tokens[1]", "", 400},
		{"tokenize unknown model", "/tokenize", `{"model":"gpt-9","prompt":"x"}`, "model", "model_not_found", 404},
		{"detokenize unknown model", "/detokenize", `{"model":"gpt-9","tokens":[1]}`, "model", "model_not_found", 404},
	}
	goNames := regexp.MustCompile(`samplingFields|chatRequest|chatMessage|completionRequest|server\.|int64|float64|\bstruct\b|json\.`)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := postJSON(t, ts.url+tc.path, tc.body)
			if r.status != tc.status || r.param() != tc.param {
				t.Fatalf("status %d param %q, want %d naming %s: %s", r.status, r.param(), tc.status, tc.param, r.raw)
			}
			if code, _ := r.body.Error.Code.(string); tc.code != "" && code != tc.code {
				t.Fatalf("code %v, want %s", r.body.Error.Code, tc.code)
			}
			if msg := r.body.Error.Message; goNames.MatchString(msg) || tc.status == 400 && !strings.Contains(msg, tc.param) {
				t.Fatalf("message not in the API's terms (naming %s): %s", tc.param, msg)
			}
		})
	}
	// null is "not given": nothing is ignored.
	if r := postJSON(t, ts.url+"/v1/chat/completions", chat(`,"tools":null,"user":"u1"`)); r.status != 200 {
		t.Fatalf("tools: null refused: %d %s", r.status, r.raw)
	}
}
