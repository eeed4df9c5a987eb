package server

import (
	"bufio"
	"io"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// MetricPrefix starts every metric name: vLLM's names with "vllm:" replaced by
// "tokenwise:", so that dashboards built for vLLM need only the prefix changed. Counters
// carry the _total suffix that vLLM's Prometheus client adds to them.
const MetricPrefix = "tokenwise:"

type metrics struct {
	reg                                                *prometheus.Registry
	running, waiting, kvUsage                          prometheus.Gauge
	prefixQueries, prefixHits                          prometheus.Counter
	promptTokens, genTokens                            prometheus.Counter
	preemptions, success, aborted, rejected            prometheus.Counter
	ttft, itl, e2e, queueTime, prefillTime, decodeTime prometheus.Histogram
	// Speculative decoding, as vLLM's spec_decode_* counters.
	specDrafts, specDraftTokens, specAccepted prometheus.Counter
	specAcceptedAt                            *prometheus.CounterVec // by draft position, as vLLM's
	specSchemaDraft, specSchemaAccepted       prometheus.Counter     // tokenwise's: drafts of forced text
	// Structured output (tokenwise's own): compile time, mask time, forced and jumped tokens.
	grammarCompile                   prometheus.Histogram
	grammarMaskSeconds, grammarMasks prometheus.Counter
	grammarForced, grammarJumped     prometheus.Counter
}

// Buckets as vLLM's (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets    = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	itlBuckets     = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
	compileBuckets = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5}
	requestBuckets = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680}
)

func newMetrics(modelName string) *metrics {
	labels := prometheus.Labels{"model_name": modelName}
	reg := prometheus.NewRegistry()
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricPrefix + name, Help: help, ConstLabels: labels})
		reg.MustRegister(g)
		return g
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: MetricPrefix + name, Help: help, ConstLabels: labels})
		reg.MustRegister(c)
		return c
	}
	counterVec := func(name, help string, label string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricPrefix + name, Help: help, ConstLabels: labels}, []string{label})
		reg.MustRegister(c)
		return c
	}
	hist := func(name, help string, buckets []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricPrefix + name, Help: help, Buckets: buckets, ConstLabels: labels})
		reg.MustRegister(h)
		return h
	}
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	return &metrics{
		reg:           reg,
		running:       gauge("num_requests_running", "Number of requests in model execution batches."),
		waiting:       gauge("num_requests_waiting", "Number of requests waiting to be processed."),
		kvUsage:       gauge("kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
		prefixQueries: counter("prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens."),
		prefixHits:    counter("prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens."),
		promptTokens:  counter("prompt_tokens_total", "Number of prefill tokens processed."),
		genTokens:     counter("generation_tokens_total", "Number of generation tokens processed."),
		preemptions:   counter("num_preemptions_total", "Cumulative number of preemptions from the engine."),
		success:       counter("request_success_total", "Count of successfully processed requests."),
		aborted:       counter("request_aborted_total", "Requests cancelled by a client disconnect or timeout."),
		rejected:      counter("request_rejected_total", "Requests refused with 429 because the waiting queue was full."),
		ttft:          hist("time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets),
		itl:           hist("inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets),
		e2e:           hist("e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", requestBuckets),
		queueTime:     hist("request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", requestBuckets),
		prefillTime:   hist("request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request (from admission to the first token).", requestBuckets),
		decodeTime:    hist("request_decode_time_seconds", "Histogram of time spent in DECODE phase for request (from the first token to the last).", requestBuckets),

		specDrafts:         counter("spec_decode_num_drafts_total", "Number of spec decoding drafts (a sequence's drafted tokens verified in one step)."),
		specDraftTokens:    counter("spec_decode_num_draft_tokens_total", "Number of draft tokens."),
		specAccepted:       counter("spec_decode_num_accepted_tokens_total", "Number of accepted tokens."),
		specAcceptedAt:     counterVec("spec_decode_num_accepted_tokens_per_pos_total", "Accepted tokens per draft position.", "position"),
		specSchemaDraft:    counter("spec_decode_num_schema_draft_tokens_total", "Draft tokens that were the text the response_format grammar forces (--speculate schema)."),
		specSchemaAccepted: counter("spec_decode_num_schema_accepted_tokens_total", "Accepted draft tokens that were the text the grammar forces."),

		grammarCompile:     hist("grammar_compile_seconds", "Histogram of response_format grammar compile time (schemas compiled, not those found cached).", compileBuckets),
		grammarMaskSeconds: counter("grammar_mask_seconds_total", "Time spent computing grammar token masks."),
		grammarMasks:       counter("grammar_masks_total", "Number of grammar token masks computed."),
		grammarForced:      counter("grammar_forced_tokens_total", "Output tokens the grammar forced (the only token allowed)."),
		grammarJumped:      counter("grammar_jump_forward_tokens_total", "Forced tokens appended by jump-forward without a decode step of their own."),
	}
}

// MetricValue reads Prometheus text exposition from r and returns the sum of the samples
// of the named metric over all label sets (for tests and the load program).
func MetricValue(r io.Reader, name string) (float64, bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var sum float64
	found := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if strings.HasPrefix(rest, "{") {
			i := strings.LastIndexByte(rest, '}')
			if i < 0 {
				continue
			}
			rest = rest[i+1:]
		}
		if !strings.HasPrefix(rest, " ") {
			continue // a longer name with this prefix
		}
		v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}
