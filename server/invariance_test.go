package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// TestSeededSameAloneOrBatched is issue #23's proof of batch invariance: 20 seeded requests
// at temperature 1 — prompts of 1 to 230 tokens, many longer than the attention tile
// (kernels.AttnTile) and than the step's token budget — each served alone, then all 20 at
// once with 16 running together, give the same text, the same tokens and the same
// logprobs to the bit (the logits of every sampled position), and so does engine.Generate
// (generate) for each alone. The model has an f16 KV cache, so prompt attention is tiled
// or per token, and float32 weights, whose products are batch-invariant only in the mode.
//
// With the mode off (TOKENWISE_BATCH_INVARIANT=0: ggml's decode order for a lone token's
// products, and attention chosen by the length of the chunk the scheduler cut) it fails.
func TestSeededSameAloneOrBatched(t *testing.T) {
	if !kernels.BatchInvariant() {
		t.Log("batch-invariant mode off (TOKENWISE_BATCH_INVARIANT=0): expect differences")
	}
	dir := fixture(t)
	m, err := model.Load(dir, model.Options{Threads: 2, KVCache: tensor.F16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() }) // after the servers' cleanups
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	const (
		maxTokens = 16
		budget    = 96 // tokens per step: longer prompts are prefilled in chunks
		streams   = 16
	)
	lengths := []int{1, 5, 9, 17, 31, 40, 63, 64, 65, 71, 90, 96, 97, 100, 120, 129, 150, 170, 190, 230}
	rng := rand.New(rand.NewPCG(23, 0))
	prompts := make([][]int, len(lengths))
	for i, n := range lengths {
		for range n {
			prompts[i] = append(prompts[i], 1000+rng.IntN(120000)) // distinct prompts: no shared prefix
		}
	}

	type answer struct {
		text     string
		tokens   []string
		logprobs []float32
		top      []map[string]float32
		prefill  int // prefill steps
		err      error
	}
	ask := func(ts *testServer, i int) (a answer) {
		body, _ := json.Marshal(map[string]any{"prompt": prompts[i], "max_tokens": maxTokens, "temperature": 1,
			"seed": 100 + i, "logprobs": 3, "ignore_eos": true})
		resp, err := http.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			return answer{err: err}
		}
		defer resp.Body.Close()
		var out struct {
			completionResponse
			Usage struct {
				PrefillSteps int `json:"prefill_steps"`
			} `json:"usage"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 || out.Choices[0].Logprobs == nil {
			return answer{err: fmt.Errorf("status %d: %v", resp.StatusCode, err)}
		}
		c := out.Choices[0]
		return answer{text: c.Text, tokens: c.Logprobs.Tokens, logprobs: c.Logprobs.TokenLogprobs, top: c.Logprobs.TopLogprobs,
			prefill: out.Usage.PrefillSteps}
	}
	newServer := func(cfg Config) *testServer {
		cfg.Model, cfg.Tokenizer, cfg.ModelName = m, tok, "tiny"
		cfg.MaxSeqs, cfg.MaxBatchedTokens, cfg.KVCacheBytes = streams, budget, 8<<20
		return serve(t, cfg, func(s *Server) *http.Server { return &http.Server{Handler: s.Handler()} })
	}

	// Each alone: one request at a time.
	alone := make([]answer, len(prompts))
	ts := newServer(Config{})
	for i := range prompts {
		if alone[i] = ask(ts, i); alone[i].err != nil {
			t.Fatalf("prompt %d alone: %v", i, alone[i].err)
		}
		if len(alone[i].tokens) != maxTokens {
			t.Fatalf("prompt %d alone: %d tokens, want %d", i, len(alone[i].tokens), maxTokens)
		}
	}

	// All together, on a server of its own (no prefix cached by the runs alone): the first
	// step is held until all 20 are in, running (16) or waiting (4).
	cfg, release := holdSteps(0)
	tb := newServer(cfg)
	t.Cleanup(release) // before the server closes
	batched := make([]answer, len(prompts))
	var wg sync.WaitGroup
	for i := range prompts {
		wg.Go(func() { batched[i] = ask(tb, i) })
	}
	inFlight := func() float64 { return testutil.ToFloat64(tb.met.waiting) + testutil.ToFloat64(tb.met.running) }
	for deadline := time.Now().Add(30 * time.Second); inFlight() != float64(len(prompts)); {
		if time.Now().After(deadline) {
			t.Fatalf("%g requests running or waiting, want %d", inFlight(), len(prompts))
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	wg.Wait()

	recut := 0 // prompts whose prefill the load cut otherwise
	for i := range prompts {
		a, b := alone[i], batched[i]
		if b.err != nil {
			t.Fatalf("prompt %d batched: %v", i, b.err)
		}
		if a.prefill != b.prefill {
			recut++
		}
		if a.text != b.text || !slices.Equal(a.tokens, b.tokens) {
			t.Errorf("prompt %d (%d tokens): alone %q\nbatched %q", i, len(prompts[i]), a.text, b.text)
			continue
		}
		if !slices.Equal(a.logprobs, b.logprobs) || !slices.EqualFunc(a.top, b.top, func(x, y map[string]float32) bool {
			return fmt.Sprint(x) == fmt.Sprint(y)
		}) {
			t.Errorf("prompt %d (%d tokens): same text, other logprobs: alone %v\nbatched %v", i, len(prompts[i]), a.logprobs, b.logprobs)
		}
	}
	if recut == 0 {
		t.Error("no prompt was prefilled in other chunks batched than alone: the test did not exercise the scheduler's cuts")
	}

	// generate: engine.Generate, a batch of one whose prompt is cut by its own budget.
	for i, p := range prompts {
		res, err := engine.Generate(context.Background(), m, tok, p, engine.Options{MaxTokens: maxTokens, IgnoreEOS: true,
			Sampler: engine.SamplerParams{Temperature: 1, Seed: uint64(100 + i), Logprobs: true}})
		if err != nil {
			t.Fatal(err)
		}
		var lps []float32
		for _, lp := range res.Logprobs {
			lps = append(lps, lp.Logprob)
		}
		if res.Text != alone[i].text || !slices.Equal(lps, alone[i].logprobs) {
			t.Errorf("prompt %d (%d tokens): generate %q %v\nserve %q %v", i, len(p), res.Text, lps, alone[i].text, alone[i].logprobs)
		}
	}
}
