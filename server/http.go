package server

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Timeouts. Reading a request — headers (Config.ReadHeaderTimeout), then the whole request
// with its body (Config.ReadTimeout) — and waiting for the next one on a keep-alive
// connection (Config.IdleTimeout) use net/http's deadlines: they end when the body is in
// (net/http clears the read deadline when it starts its background read), so they never
// touch a running generation. Writing does not: net/http's WriteTimeout is one deadline for
// the whole response and would cut any stream that runs longer, however fast it makes
// progress. Here each write gets its own deadline, Config.WriteTimeout from the moment of
// the write, so only a client that stops reading is cut off.

// HTTPServer returns the http.Server that serves s's Handler with the configured header and
// idle timeouts, tracking its connections so that Shutdown need not wait for those with no
// request in flight.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ConnContext:       s.conns.connContext,
		ConnState:         s.conns.connState,
	}
}

// Shutdown stops hs (from HTTPServer) gracefully: new generations get 503 and /health
// reports 503; connections with no request in flight — idle, half-sent headers, a body
// still arriving — are closed at once; requests in flight may finish until ctx ends. Then
// they are cancelled (each client gets an error) and the connections closed, and Shutdown
// returns ctx's error.
func (s *Server) Shutdown(ctx context.Context, hs *http.Server) error {
	s.Drain()
	err := s.shutdownHTTP(ctx, hs)
	if err == nil {
		return nil
	}
	s.Close() // the handlers still waiting get errShutdown and answer with it
	cctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if s.shutdownHTTP(cctx, hs) != nil {
		hs.Close()
	}
	return err
}

// shutdownHTTP runs hs.Shutdown, closing the connections that carry no request in flight
// meanwhile: net/http closes idle keep-alive connections itself but waits for "active" ones,
// and a client that sent half its headers stays active until its read times out.
func (s *Server) shutdownHTTP(ctx context.Context, hs *http.Server) error {
	done := make(chan error, 1)
	go func() { done <- hs.Shutdown(ctx) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		s.conns.closeStalled()
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
	}
}

// connTracker knows, for each connection of the http.Server from HTTPServer, whether a
// request on it is in flight: read whole and being answered.
type connTracker struct {
	mu    sync.Mutex
	conns map[net.Conn]*connInfo
}

type connInfo struct {
	conn  net.Conn
	state http.ConnState
	busy  bool // guarded by connTracker.mu
}

type connKey struct{}

func (t *connTracker) connContext(ctx context.Context, c net.Conn) context.Context {
	ci := &connInfo{conn: c, state: http.StateNew}
	t.mu.Lock()
	if t.conns == nil {
		t.conns = map[net.Conn]*connInfo{}
	}
	t.conns[c] = ci
	t.mu.Unlock()
	return context.WithValue(ctx, connKey{}, ci)
}

func (t *connTracker) connState(c net.Conn, st http.ConnState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ci := t.conns[c]
	if ci == nil {
		return
	}
	switch st {
	case http.StateClosed, http.StateHijacked:
		delete(t.conns, c)
	case http.StateIdle:
		ci.busy = false
	}
	ci.state = st
}

// markBusy records that r has been read whole: from now on its connection carries a request
// in flight until it goes idle. A no-op for a request not served by HTTPServer's server.
func (t *connTracker) markBusy(r *http.Request) {
	ci, _ := r.Context().Value(connKey{}).(*connInfo)
	if ci == nil {
		return
	}
	t.mu.Lock()
	ci.busy = true
	t.mu.Unlock()
}

// closeStalled closes the connections that are new or active with no request in flight.
func (t *connTracker) closeStalled() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c, ci := range t.conns {
		if !ci.busy && (ci.state == http.StateNew || ci.state == http.StateActive) {
			c.Close()
			delete(t.conns, c)
		}
	}
}

// deadlines bounds each write of a response: Config.WriteTimeout from the moment of the
// write. A request without a body is in flight from here; one with a body once readBody has
// it.
func (s *Server) deadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			s.conns.markBusy(r)
		}
		dw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: s.cfg.WriteTimeout}
		dw.extend()
		defer dw.extend() // net/http flushes what is buffered after the handler returns
		next.ServeHTTP(dw, r)
	})
}

// deadlineWriter moves the connection's write deadline to d from now before each write and
// flush, so a response is cut only when one write makes no progress for d.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) Write(b []byte) (int, error) {
	w.extend()
	return w.ResponseWriter.Write(b)
}

func (w *deadlineWriter) FlushError() error {
	w.extend()
	return w.rc.Flush()
}

func (w *deadlineWriter) Flush() { _ = w.FlushError() }

// Unwrap lets http.ResponseController reach the connection.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
