package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startHTTP serves the fixture with the http.Server that HTTPServer makes, as serve does.
func startHTTP(t *testing.T, cfg Config) *testServer {
	t.Helper()
	return serveFixture(t, cfg, (*Server).HTTPServer)
}

func (ts *testServer) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ts.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitClosed reads c until the server closes it (or limit passes), returning how long that
// took.
func waitClosed(t *testing.T, name string, c net.Conn, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s connection still open after %v", name, limit)
	}
	return time.Since(start)
}

// TestReadTimeoutTrickledBody: a body sent a byte at a time is cut off at ReadTimeout with a
// 408 error body, long before it would have arrived.
func TestReadTimeoutTrickledBody(t *testing.T) {
	const readTimeout = 300 * time.Millisecond
	ts := startHTTP(t, Config{ReadTimeout: readTimeout})
	// net/http counts the timeout from when it starts reading the connection's first request,
	// right after accepting it: before the client's first byte, so time from before the dial.
	start := time.Now()
	c := ts.dial(t)
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n", ts.ln.Addr())
	stop := make(chan struct{})
	defer close(stop)
	go func() { // 1000 bytes at 50 ms each: 50 s
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if _, err := c.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	elapsed := time.Since(start)
	if resp.StatusCode != 408 {
		t.Fatalf("status %d, want 408", resp.StatusCode)
	}
	checkErrorBody(t, resp.Body)
	if elapsed < readTimeout {
		t.Fatalf("cut off after %v, before the read timeout of %v", elapsed, readTimeout)
	}
}

// TestIdleTimeout: a keep-alive connection is closed IdleTimeout after its last response, and
// one that never sends a request is closed at ReadHeaderTimeout.
func TestIdleTimeout(t *testing.T) {
	const idle, header = 300 * time.Millisecond, 400 * time.Millisecond
	ts := startHTTP(t, Config{IdleTimeout: idle, ReadHeaderTimeout: header})

	c := ts.dial(t)
	fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", ts.ln.Addr())
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 || resp.Close {
		t.Fatalf("health: %v %v", resp, err)
	}
	resp.Body.Close()
	if d := waitClosed(t, "idle", c, 20*time.Second); d < idle-50*time.Millisecond {
		t.Fatalf("idle connection closed after %v, before the idle timeout of %v", d, idle)
	}

	silent := ts.dial(t)
	if d := waitClosed(t, "silent", silent, 20*time.Second); d < header-50*time.Millisecond {
		t.Fatalf("silent connection closed after %v, before the header timeout of %v", d, header)
	}
}

// TestLongStreamOutlivesTimeouts: a stream that the client keeps reading runs far past the
// read and write timeouts and ends with [DONE].
func TestLongStreamOutlivesTimeouts(t *testing.T) {
	const d = 150 * time.Millisecond
	ts := startHTTP(t, Config{ReadTimeout: d, WriteTimeout: d, ReadHeaderTimeout: d})
	start := time.Now()
	resp, err := http.Post(ts.url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"go on","max_tokens":100,"ignore_eos":true,"stream":true,"seed":3}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var last string
	chunks := 0
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			last = line
			chunks++
			time.Sleep(10 * time.Millisecond) // a slow reader, still reading
		}
	}
	if last != "data: [DONE]" {
		t.Fatalf("stream ended after %d chunks and %v with %q (err %v), not [DONE]", chunks, time.Since(start), last, sc.Err())
	}
	if el := time.Since(start); el < 3*d {
		t.Fatalf("the stream took only %v: it did not outlive the %v timeouts", el, d)
	}
}

// TestWriteTimeoutStalledReader: a client that stops reading a stream is cut off once a write
// blocks for WriteTimeout: its request is aborted (blocks freed) and the stream it reads
// afterwards ends without [DONE]. The socket buffers are shrunk so that they fill.
func TestWriteTimeoutStalledReader(t *testing.T) {
	ts := serveFixture(t, Config{WriteTimeout: 100 * time.Millisecond}, func(s *Server) *http.Server {
		hs := s.HTTPServer()
		track := hs.ConnContext
		hs.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			c.(*net.TCPConn).SetWriteBuffer(4096)
			return track(ctx, c)
		}
		return hs
	})
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	c, err := d.Dial("tcp", ts.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	body := `{"prompt":"stall","max_tokens":250,"ignore_eos":true,"stream":true,"logprobs":20,"seed":5}`
	fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", ts.ln.Addr(), len(body), body)
	// Read nothing until the server has given up on this client.
	deadline := time.Now().Add(20 * time.Second)
	for ts.metric(t, "tokenwise:request_aborted_total") == 0 {
		if ts.metric(t, "tokenwise:request_success_total") > 0 {
			t.Fatal("the request ran to completion: the stalled client was never cut off")
		}
		if time.Now().After(deadline) {
			t.Fatal("the stalled client's request is still running")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, _ := io.ReadAll(c) // what was buffered, then EOF or a reset
	if strings.Contains(string(got), "[DONE]") {
		t.Fatal("the stalled stream was completed after all")
	}
	ts.waitMetric(t, "tokenwise:kv_cache_usage_perc", func(v float64) bool { return v == 0 })
}

// TestShutdownClosesStalledConnections: Shutdown does not wait for connections with no
// request in flight — idle, half-sent headers, a body still arriving, nothing sent yet — and
// returns within its grace period, once the stream that is in flight has finished.
func TestShutdownClosesStalledConnections(t *testing.T) {
	ts := startHTTP(t, Config{ReadHeaderTimeout: time.Minute, ReadTimeout: time.Minute, IdleTimeout: time.Minute})
	idle := ts.dial(t)
	fmt.Fprintf(idle, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", ts.ln.Addr())
	if resp, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	halfHeaders := ts.dial(t)
	fmt.Fprintf(halfHeaders, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Le", ts.ln.Addr())
	halfBody := ts.dial(t)
	fmt.Fprintf(halfBody, "POST /v1/completions HTTP/1.1\r\nHost: %s\r\nContent-Length: 100\r\n\r\n{\"prompt\":", ts.ln.Addr())
	silent := ts.dial(t)
	// And one request in flight, which must be let finish.
	resp, err := http.Post(ts.url+"/v1/completions", "application/json",
		strings.NewReader(`{"prompt":"in flight","max_tokens":60,"ignore_eos":true,"stream":true,"seed":1}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	streamed := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		last := ""
		for sc.Scan() {
			if sc.Text() != "" {
				last = sc.Text()
				time.Sleep(5 * time.Millisecond)
			}
		}
		streamed <- last
	}()
	time.Sleep(100 * time.Millisecond) // let the server take them in

	const grace = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	start := time.Now()
	if err := ts.Shutdown(ctx, ts.hs); err != nil {
		t.Fatalf("Shutdown after %v: %v", time.Since(start), err)
	}
	if last := <-streamed; last != "data: [DONE]" {
		t.Fatalf("the stream in flight ended with %q, not [DONE]", last)
	}
	for name, c := range map[string]net.Conn{"idle": idle, "half headers": halfHeaders, "half body": halfBody, "silent": silent} {
		waitClosed(t, name, c, time.Second)
	}
}
