package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// TestServeEqualsGenerateEqualsLlamaCpp: on the real SmolLM2-135M-Instruct Q4_1 file with an
// f16 KV cache (llama.cpp's default), the greedy text of four prompts served at once
// (batched decode steps) equals engine.Generate's for each prompt alone, whose ids equal
// llama.cpp's (node-llama-cpp, the same prompt ids). The quantized products are batch
// invariant (each token's row the same bits in a batched product as alone), and attention
// is per sequence, so batching changes no logit.
func TestServeEqualsGenerateEqualsLlamaCpp(t *testing.T) {
	testref.Path(t, "node_modules", "node-llama-cpp", "dist", "index.js")
	path := testref.Path(t, "smollm2", "smollm2-135m-instruct-q4_1.gguf")
	if testing.Short() {
		t.Skip("runs llama.cpp on a real model")
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(path, model.Options{Threads: 2, KVCache: tensor.F16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() }) // after the server stops (cleanups run last first)
	const n = 24
	texts := []string{"The capital of France is", "Once upon a time", "def fibonacci(n):", "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n"}
	var prompts [][]int
	for _, s := range texts {
		prompts = append(prompts, tok.Encode(s, false))
	}

	var ref struct {
		Prompts []struct {
			IDs []int `json:"ids"`
		} `json:"prompts"`
	}
	var ps []map[string]any
	for _, p := range prompts {
		ps = append(ps, map[string]any{"ids": p, "n": n, "topk": 1})
	}
	testref.LlamaCpp(t, map[string]any{"model": path, "threads": 1, "prompts": ps}, &ref)

	gen := make([][]int, len(prompts))
	genText := make([]string, len(prompts))
	for i, p := range prompts {
		res, err := engine.Generate(context.Background(), m, tok, p, engine.Options{MaxTokens: n, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		gen[i], genText[i] = res.IDs, res.Text
		if !slices.Equal(gen[i], ref.Prompts[i].IDs) {
			t.Errorf("prompt %d: generate %v\nllama.cpp %v", i, gen[i], ref.Prompts[i].IDs)
		}
	}

	// All four at once: held until every request is queued, so they share their steps.
	cfg, release := holdSteps(0)
	cfg.Model, cfg.Tokenizer, cfg.ModelName, cfg.KVCacheBytes = m, tok, "smollm2", 64<<20
	ts := serve(t, cfg, func(s *Server) *http.Server { return &http.Server{Handler: s.Handler()} })
	t.Cleanup(release) // before the server closes
	served := make([]string, len(prompts))
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Go(func() {
			body, _ := json.Marshal(map[string]any{"prompt": p, "max_tokens": n, "temperature": 0, "ignore_eos": true})
			resp, err := http.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			var out completionResponse
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
				errs[i] = fmt.Errorf("status %d: %v", resp.StatusCode, err)
				return
			}
			served[i] = out.Choices[0].Text
		})
	}
	// The first step is held until every request is in: running or waiting behind it.
	inFlight := func() float64 { return testutil.ToFloat64(ts.met.waiting) + testutil.ToFloat64(ts.met.running) }
	for deadline := time.Now().Add(30 * time.Second); inFlight() != float64(len(prompts)); {
		if time.Now().After(deadline) {
			t.Fatalf("%g requests running or waiting, want %d", inFlight(), len(prompts))
		}
		time.Sleep(5 * time.Millisecond)
	}
	release()
	wg.Wait()
	for i := range prompts {
		if errs[i] != nil {
			t.Fatalf("prompt %d: %v", i, errs[i])
		}
		if served[i] != genText[i] {
			t.Errorf("prompt %d: served beside %d others %q\ngenerate alone %q", i, len(prompts)-1, served[i], genText[i])
		}
	}
}
