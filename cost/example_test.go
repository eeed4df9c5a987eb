package cost_test

import (
	"fmt"

	"github.com/tokenwise/tokenwise/cost"
)

// The seeds' question for Qwen3-4B on an H100: how much dearer is an output token than an
// input token, alone and in a batch of 64?
func ExampleShape_Estimate() {
	s, _ := cost.LoadShape("testdata/qwen3-4b.json")
	h100, _ := cost.LoadProfile("h100-sxm")
	bf16, _ := cost.ParsePrecision("bf16")
	for _, batch := range []int{1, 64} {
		e, _ := s.Estimate(h100, cost.Workload{Prompt: 1024, Output: 256, Batch: batch, DType: bf16, KV: bf16})
		fmt.Printf("batch %2d: prefill %6.0f tok/s, decode %5.0f tok/s, output/input %5.1f×, decode %s-bound\n",
			batch, e.PrefillTokS, e.DecodeTokS, e.OutputOverInput, e.Decode.Bound)
	}
	// Output:
	// batch  1: prefill  78431 tok/s, decode   326 tok/s, output/input 240.5×, decode memory-bound
	// batch 64: prefill  78431 tok/s, decode  8926 tok/s, output/input   8.8×, decode memory-bound
}

// Parameters of a mixture-of-experts model: what it must hold against what a token uses.
func ExampleShape_Params() {
	s, _ := cost.LoadShape("testdata/qwen3-30b-a3b.json")
	p := s.Params()
	fmt.Printf("total %.2fB, active per token %.2fB (+%.2fB embedding)\n", float64(p.Total)/1e9, float64(p.Active)/1e9, float64(p.Embedding)/1e9)
	// Output:
	// total 30.53B, active per token 3.04B (+0.31B embedding)
}
