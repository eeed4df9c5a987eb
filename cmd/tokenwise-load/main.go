// Command tokenwise-load measures a running `tokenwise serve` on loopback: it sweeps
// concurrency levels, streaming completions at each, and reports aggregate tokens/s, p50/p99
// time to first token and inter-token latency, peak KV-cache usage and the server's RSS. It
// checks that no request fails and that every KV block returns once a level is over, then
// runs a cancellation storm (streams dropped mid-generation) and checks the same.
//
// It only talks to loopback addresses and is bounded: a fixed number of requests per level
// and a deadline per level.
//
// A SmolLM2-135M-shaped run (the tokenizer comes out of the SmolLM2 GGUF in the references):
//
//	tokenwise export --model .cache/refs/smollm2/smollm2-135m-instruct-q4_1.gguf --format hf --out /tmp/smol-hf
//	tokenwise synth --config configs/smollm2-135m.json --tokenizer /tmp/smol-hf/tokenizer.json --dtype bf16 --out /tmp/smol-synth
//	tokenwise serve --model /tmp/smol-synth --port 18080 --max-seqs 64 --kv-cache-mem 1GiB &
//	go run ./cmd/tokenwise-load --url http://127.0.0.1:18080 --levels 1,4,16,64 --max-tokens 16 --prompt-words 8
//
// It exits 1 when a request failed, a block leaked or the storm did not return every block.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokenwise/tokenwise/server"
)

type options struct {
	base         string
	levels       []int
	requests     int // per level; 0: 2 × concurrency (at least 8)
	maxTokens    int
	promptWords  int
	levelTimeout time.Duration
	storm        int
	stormConc    int
	jsonOut      bool
}

// result is one streamed request.
type result struct {
	ttft   time.Duration
	gaps   []time.Duration
	tokens int
	err    error
}

// levelReport is one concurrency level's numbers.
type levelReport struct {
	Concurrency int     `json:"concurrency"`
	Requests    int     `json:"requests"`
	Failed      int     `json:"failed"`
	Tokens      int     `json:"tokens"`
	Seconds     float64 `json:"seconds"`
	TokPerSec   float64 `json:"tok_per_s"`
	TTFTp50     float64 `json:"ttft_p50_ms"`
	TTFTp99     float64 `json:"ttft_p99_ms"`
	ITLp50      float64 `json:"itl_p50_ms"`
	ITLp99      float64 `json:"itl_p99_ms"`
	KVPeak      float64 `json:"kv_usage_peak"`
	RSSMiB      float64 `json:"rss_mib"`
	Leaked      bool    `json:"blocks_leaked"`
}

func main() {
	var o options
	var levels string
	flag.StringVar(&o.base, "url", "http://127.0.0.1:8080", "server base URL (loopback only)")
	flag.StringVar(&levels, "levels", "1,4,16,64", "concurrency levels")
	flag.IntVar(&o.requests, "requests", 0, "requests per level (0: one per stream, at least 4)")
	flag.IntVar(&o.maxTokens, "max-tokens", 64, "tokens generated per request (EOS ignored)")
	flag.IntVar(&o.promptWords, "prompt-words", 40, "words per prompt (each prompt differs)")
	flag.DurationVar(&o.levelTimeout, "level-timeout", 10*time.Minute, "deadline per level")
	flag.IntVar(&o.storm, "storm", 200, "cancellation storm: streams dropped mid-generation (0: skip)")
	flag.IntVar(&o.stormConc, "storm-concurrency", 32, "streams open at once during the storm")
	flag.BoolVar(&o.jsonOut, "json", false, "print the reports as JSON")
	flag.Parse()
	for _, f := range strings.Split(levels, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fatalf("--levels %q: want positive integers", levels)
		}
		o.levels = append(o.levels, n)
	}
	if err := checkLoopback(o.base); err != nil {
		fatalf("%v", err)
	}
	if err := run(o); err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "tokenwise-load: "+format+"\n", args...)
	os.Exit(1)
}

// checkLoopback refuses anything but 127.0.0.0/8, ::1 and localhost: this program sends
// bursts of requests and must not be pointed at someone else's server.
func checkLoopback(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" {
		return fmt.Errorf("--url %q: want http://HOST:PORT", base)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--url %q: only loopback addresses are allowed", base)
}

func run(o options) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0}}
	if err := waitHealthy(client, o.base); err != nil {
		return err
	}
	var reports []levelReport
	failed := 0
	for _, c := range o.levels {
		rep, err := runLevel(client, o, c)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
		failed += rep.Failed
		if !o.jsonOut {
			printReport(rep, len(reports) == 1)
		}
	}
	var storm *stormReport
	if o.storm > 0 {
		s, err := runStorm(client, o)
		if err != nil {
			return err
		}
		storm = &s
	}
	if o.jsonOut {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(map[string]any{"levels": reports, "storm": storm})
	} else {
		if len(reports) > 1 && reports[0].Concurrency == 1 {
			for _, r := range reports[1:] {
				fmt.Printf("speedup at %d streams: %.2f× the tok/s of one stream\n", r.Concurrency, r.TokPerSec/reports[0].TokPerSec)
			}
		}
		if storm != nil {
			fmt.Printf("cancellation storm: %d streams dropped after their first tokens (%d refused with 429, %d errors); KV usage back to %.4f in %v; blocks returned: %v\n",
				storm.Dropped, storm.Rejected, storm.Errors, storm.KVAfter, storm.Settle.Round(time.Millisecond), storm.KVAfter == 0)
		}
	}
	leaked := slices.ContainsFunc(reports, func(r levelReport) bool { return r.Leaked })
	if failed > 0 || leaked || (storm != nil && (storm.KVAfter != 0 || storm.Errors > 0)) {
		return fmt.Errorf("FAILED: %d failed requests, leaked blocks %v, storm %+v", failed, leaked, storm)
	}
	return nil
}

func waitHealthy(c *http.Client, base string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s/health: not ready after 30s (%v)", base, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var words = strings.Fields(`the a model token cache block batch stream server request prefill decode weight matrix
vector memory latency throughput queue step sequence prompt answer question river mountain city light dark
quick slow green blue red number seven forty hundred engine paper story garden window music winter summer`)

// prompt is a distinct prompt: a seeded random word sequence, so the prefix cache does not
// serve one request from another.
func prompt(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 99))
	var b strings.Builder
	fmt.Fprintf(&b, "Request %d:", seed)
	for range n {
		b.WriteByte(' ')
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

var seedCounter atomic.Uint64

// stream sends one streamed completion and times its chunks. stopAfter > 0 drops the
// connection after that many content chunks.
func stream(ctx context.Context, c *http.Client, o options, stopAfter int) result {
	body, _ := json.Marshal(map[string]any{
		"prompt": prompt(seedCounter.Add(1), o.promptWords), "max_tokens": o.maxTokens, "temperature": 0,
		"ignore_eos": true, "stream": true, "stream_options": map[string]bool{"include_usage": true},
	})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", o.base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return result{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return result{err: &statusError{resp.StatusCode, strings.TrimSpace(string(b))}}
	}
	var res result
	last := start
	chunks := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return res
		}
		var ch struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			res.err = fmt.Errorf("chunk %q: %w", data, err)
			return res
		}
		if ch.Error != nil {
			res.err = errors.New(ch.Error.Message)
			return res
		}
		if ch.Usage != nil {
			res.tokens = ch.Usage.CompletionTokens
		}
		if len(ch.Choices) == 0 {
			continue
		}
		now := time.Now()
		if chunks == 0 {
			res.ttft = now.Sub(start)
		} else {
			res.gaps = append(res.gaps, now.Sub(last))
		}
		last = now
		chunks++
		if stopAfter > 0 && chunks >= stopAfter {
			return res // the deferred cancel drops the connection mid-stream
		}
	}
	if err := sc.Err(); err != nil {
		res.err = err
	} else {
		res.err = errors.New("stream ended without [DONE]")
	}
	return res
}

type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.body) }

// metrics reads the named metrics from /metrics.
func metrics(c *http.Client, base string, names ...string) (map[string]float64, error) {
	resp, err := c.Get(base + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, n := range names {
		v, _ := server.MetricValue(bytes.NewReader(b), n)
		out[n] = v
	}
	return out, nil
}

const (
	mKV      = "tokenwise:kv_cache_usage_perc"
	mRunning = "tokenwise:num_requests_running"
	mWaiting = "tokenwise:num_requests_waiting"
	mRSS     = "process_resident_memory_bytes"
)

// settle waits until no request runs or waits and returns the KV usage then.
func settle(c *http.Client, base string) (float64, time.Duration, error) {
	start := time.Now()
	for {
		m, err := metrics(c, base, mKV, mRunning, mWaiting)
		if err != nil {
			return 0, 0, err
		}
		if (m[mRunning] == 0 && m[mWaiting] == 0 && m[mKV] == 0) || time.Since(start) > 30*time.Second {
			return m[mKV], time.Since(start), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func runLevel(c *http.Client, o options, conc int) (levelReport, error) {
	n := o.requests
	if n <= 0 {
		n = max(conc, 4)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.levelTimeout)
	defer cancel()
	results := make([]result, n)
	var next atomic.Int64
	var peak atomic.Uint64 // float64 bits of the highest KV usage seen
	stopPoll := make(chan struct{})
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		for {
			if m, err := metrics(c, o.base, mKV); err == nil {
				for {
					old := peak.Load()
					if m[mKV] <= floatFrom(old) || peak.CompareAndSwap(old, floatBits(m[mKV])) {
						break
					}
				}
			}
			select {
			case <-stopPoll:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				results[i] = stream(ctx, c, o, 0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stopPoll)
	<-pollDone

	rep := levelReport{Concurrency: conc, Requests: n, Seconds: elapsed.Seconds(), KVPeak: floatFrom(peak.Load())}
	var ttft, gaps []time.Duration
	for _, r := range results {
		if r.err != nil {
			rep.Failed++
			fmt.Fprintf(os.Stderr, "tokenwise-load: concurrency %d: %v\n", conc, r.err)
			continue
		}
		rep.Tokens += r.tokens
		ttft = append(ttft, r.ttft)
		gaps = append(gaps, r.gaps...)
	}
	rep.TokPerSec = float64(rep.Tokens) / elapsed.Seconds()
	rep.TTFTp50, rep.TTFTp99 = pct(ttft, 50), pct(ttft, 99)
	rep.ITLp50, rep.ITLp99 = pct(gaps, 50), pct(gaps, 99)
	kv, _, err := settle(c, o.base)
	if err != nil {
		return rep, err
	}
	rep.Leaked = kv != 0
	if m, err := metrics(c, o.base, mRSS); err == nil {
		rep.RSSMiB = m[mRSS] / (1 << 20)
	}
	return rep, nil
}

type stormReport struct {
	Dropped, Rejected, Errors int
	KVAfter                   float64
	Settle                    time.Duration
}

// runStorm opens o.storm streams, o.stormConc at a time, and drops each after its first
// two chunks; then every block must come back.
func runStorm(c *http.Client, o options) (stormReport, error) {
	var rep stormReport
	var mu sync.Mutex
	var next atomic.Int64
	var wg sync.WaitGroup
	so := o
	so.maxTokens = 512
	for range o.stormConc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for int(next.Add(1)) <= o.storm {
				r := stream(context.Background(), c, so, 2)
				mu.Lock()
				var se *statusError
				switch {
				case errors.As(r.err, &se) && se.code == 429:
					rep.Rejected++
				case r.err != nil:
					rep.Errors++
					fmt.Fprintf(os.Stderr, "tokenwise-load: storm: %v\n", r.err)
				default:
					rep.Dropped++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	kv, d, err := settle(c, o.base)
	rep.KVAfter, rep.Settle = kv, d
	return rep, err
}

func pct(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := min(len(d)-1, (len(d)*p+99)/100-1)
	return float64(d[max(i, 0)].Microseconds()) / 1000
}

func printReport(r levelReport, header bool) {
	if header {
		fmt.Printf("%5s %5s %6s %7s %8s %9s %9s %9s %9s %7s %7s %6s\n",
			"conc", "reqs", "failed", "tokens", "tok/s", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "KV peak", "RSS MiB", "leaked")
	}
	fmt.Printf("%5d %5d %6d %7d %8.1f %7.0fms %7.0fms %7.1fms %7.1fms %6.1f%% %7.0f %6v\n",
		r.Concurrency, r.Requests, r.Failed, r.Tokens, r.TokPerSec, r.TTFTp50, r.TTFTp99, r.ITLp50, r.ITLp99, 100*r.KVPeak, r.RSSMiB, r.Leaked)
}

func floatBits(f float64) uint64 { return math.Float64bits(f) }
func floatFrom(b uint64) float64 { return math.Float64frombits(b) }
