package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestHostOriginPolicy: cross-origin browser requests and foreign Host names are refused
// with an OpenAI-style 403; same-origin requests, loopback names and the names and origins
// allowed by the configuration are answered.
func TestHostOriginPolicy(t *testing.T) {
	ts := startServer(t, Config{AllowHosts: []string{"tokenwise.internal"}, AllowOrigins: []string{"https://app.example"}})
	addr := strings.TrimPrefix(ts.url, "http://")
	port := addr[strings.LastIndex(addr, ":")+1:]
	const body = `{"prompt":"hi","max_tokens":1}`
	cases := []struct {
		name, method, path, host, origin, ctype string
		status                                  int
		code                                    string
	}{
		{"cross-origin text/plain POST", "POST", "/v1/completions", "", "http://evil.example", "text/plain", 403, "origin_not_allowed"},
		{"cross-origin null origin", "POST", "/v1/completions", "", "null", "text/plain", 403, "origin_not_allowed"},
		{"cross-origin other port", "POST", "/v1/completions", "", "http://127.0.0.1:1", "application/json", 403, "origin_not_allowed"},
		{"same origin", "POST", "/v1/completions", "", "http://" + addr, "application/json", 200, ""},
		{"same origin localhost", "POST", "/v1/completions", "localhost:" + port, "http://localhost:" + port, "text/plain", 200, ""},
		{"no origin", "POST", "/v1/completions", "", "", "application/json", 200, ""},
		{"allowed origin", "POST", "/v1/completions", "", "https://app.example", "application/json", 200, ""},
		{"foreign host", "POST", "/v1/completions", "evil.example:" + port, "", "application/json", 403, "host_not_allowed"},
		{"rebinding host", "GET", "/v1/models", "attacker.example", "", "", 403, "host_not_allowed"},
		{"foreign host, metrics", "GET", "/metrics", "attacker.example:" + port, "", "", 403, "host_not_allowed"},
		{"loopback name, wrong port", "GET", "/health", "localhost:1", "", "", 403, "host_not_allowed"},
		{"localhost", "GET", "/health", "localhost:" + port, "", "", 200, ""},
		{"ipv6 loopback", "GET", "/health", "[::1]:" + port, "", "", 200, ""},
		{"allowed host", "GET", "/health", "tokenwise.internal", "", "", 200, ""},
		{"allowed host with port", "GET", "/health", "TokenWise.Internal:443", "", "", 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var rd io.Reader
			if tc.method == "POST" {
				rd = strings.NewReader(body)
			}
			req, _ := http.NewRequest(tc.method, ts.url+tc.path, rd)
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			if tc.ctype != "" {
				req.Header.Set("Content-Type", tc.ctype)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			if tc.status == 403 {
				var e errorBody
				if err := json.Unmarshal(b, &e); err != nil || e.Error.Message == "" || e.Error.Code != tc.code {
					t.Fatalf("not an OpenAI error body with code %q: %s", tc.code, b)
				}
				if ts.metric(t, "tokenwise:num_requests_running") != 0 {
					t.Fatal("a refused request is running")
				}
			}
			if tc.origin == "https://app.example" && resp.Header.Get("Access-Control-Allow-Origin") != tc.origin {
				t.Fatalf("allowed origin without CORS header: %v", resp.Header)
			}
		})
	}

	t.Run("preflight", func(t *testing.T) {
		req, _ := http.NewRequest("OPTIONS", ts.url+"/v1/chat/completions", nil)
		req.Header.Set("Origin", "https://app.example")
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
			!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
			t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
		}
	})
}
