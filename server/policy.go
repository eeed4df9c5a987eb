package server

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Host and Origin policy. A server on localhost is still reachable from any web page the
// user opens: a page may POST a "simple" request (Content-Type text/plain, no preflight)
// cross-origin, and a DNS-rebinding page reaches 127.0.0.1 under its own host name, so the
// browser treats it as same-origin. The server therefore answers only
//   - requests whose Host is the address they came in on, a loopback name (localhost,
//     127.0.0.1, [::1]) with that port, or a name in Config.AllowHosts; and
//   - browser requests (those with an Origin header) from its own origin or from one in
//     Config.AllowOrigins, which also get the CORS headers a browser needs to read the answer.

// policy refuses requests that break the Host or Origin rules with 403.
func (s *Server) policy(next http.Handler) http.Handler {
	allowHosts := lowerSet(s.cfg.AllowHosts)
	allowOrigins := map[string]bool{}
	for _, o := range s.cfg.AllowOrigins {
		allowOrigins[strings.TrimSuffix(strings.ToLower(o), "/")] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r, allowHosts) {
			writeError(w, &apiError{status: 403, typ: "invalid_request_error", code: "host_not_allowed",
				msg: fmt.Sprintf("Host %q is not this server's address; serve it with --allow-host", r.Host)})
			return
		}
		origin := r.Header.Get("Origin")
		if origin == "" || sameOrigin(origin, r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		o := strings.TrimSuffix(strings.ToLower(origin), "/")
		if !allowOrigins[o] && !allowOrigins["*"] {
			writeError(w, &apiError{status: 403, typ: "invalid_request_error", code: "origin_not_allowed",
				msg: fmt.Sprintf("cross-origin request from %q refused; allow the origin with --allow-origin", origin)})
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type")
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func lowerSet(list []string) map[string]bool {
	m := map[string]bool{}
	for _, v := range list {
		m[strings.ToLower(v)] = true
	}
	return m
}

// hostAllowed applies the Host rule. allow holds names (any port) or name:port entries;
// "*" allows every Host.
func hostAllowed(r *http.Request, allow map[string]bool) bool {
	host := strings.ToLower(r.Host)
	if host == "" || allow["*"] || allow[host] {
		return true // no Host at all: HTTP/1.0, not a browser
	}
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = strings.Trim(host, "[]"), "80"
	}
	if allow[name] {
		return true
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return false
	}
	localIP, localPort, err := net.SplitHostPort(local.String())
	if err != nil || port != localPort {
		return false
	}
	if name == "localhost" {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && (ip.IsLoopback() || ip.Equal(net.ParseIP(localIP)))
}

// sameOrigin reports whether origin (scheme://host[:port]) is the origin of the server
// reached as host — http, or https behind a TLS-terminating proxy.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, host)
}
