package model

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/tensor"
)

// TestVerifyPassEqualsDecode: speculative decoding verifies a sequence's last token and its
// drafts in one pass, with the logits after each. In the batch-invariant mode (the default)
// those logits are the ones one-token decode passes give, bit for bit — for every
// architecture, weight dtype and KV-cache dtype, alone in the pass or beside other sequences
// (a prefill chunk and a decode) — so a greedy choice is the same with drafts as without,
// not merely close. That is what makes speculation lossless here: nothing is left to a
// tolerance.
func TestVerifyPassEqualsDecode(t *testing.T) {
	if !kernels.BatchInvariant() {
		t.Fatal("the batch-invariant mode is off by default")
	}
	for name := range testConfigs {
		for _, dt := range []tensor.DType{tensor.F32, tensor.BF16, tensor.F16} {
			for _, kv := range []tensor.DType{tensor.F32, tensor.F16} {
				t.Run(fmt.Sprintf("%s/%v/kv=%v", name, dt, kv), func(t *testing.T) {
					m, _, _ := testModelOpts(t, name, dt, Options{Threads: 2, KVCache: kv})
					verifyEqualsDecode(t, m)
				})
			}
		}
	}
	// The quantized products (ggml's integer arithmetic) on shapes every kernel takes.
	for name := range isaConfigs {
		for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_1} {
			t.Run(fmt.Sprintf("%s/%v/kv=f16", name, dt), func(t *testing.T) {
				m, _ := isaModel(t, name, dt, tensor.F16)
				verifyEqualsDecode(t, m)
			})
		}
	}
}

func verifyEqualsDecode(t *testing.T, m *Model) {
	const bs = 4
	pc, err := m.NewPagedCache(160, bs)
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	blocks := func(n int) []int {
		b := make([]int, (n+bs-1)/bs)
		for i := range b {
			b[i] = next
			next++
		}
		return b
	}
	prompt := longPrompt(70) // long enough to be attended in tiles when prefilled at once
	drafts := []int{9, 4, 33, 4, 9, 12}
	// Decode: the prompt, then each draft in a pass of its own.
	dec := blocks(len(prompt) + len(drafts))
	if _, err := pc.Forward([]Chunk{{Tokens: prompt, Blocks: dec, Logits: true, Prompt: len(prompt)}}); err != nil {
		t.Fatal(err)
	}
	var want [][]float32
	for i, id := range drafts {
		out, err := pc.Forward([]Chunk{{Tokens: []int{id}, Start: len(prompt) + i, Blocks: dec, Logits: true, Prompt: len(prompt)}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, slices.Clone(out[0]))
	}
	// Verify: the same prompt, then all drafts in one chunk with the logits after each,
	// once alone and once beside another sequence's prefill chunk and a decode token; then
	// batched with a grammar's allowed tokens on some rows (the LM head computes only those:
	// they keep their bits, the rest are -Inf), the others whole.
	vocab := m.Config().VocabSize
	allowed := make([][]int32, len(drafts))
	for i := range allowed {
		if i%2 == 1 {
			allowed[i] = []int32{0, int32(i), int32(vocab/2 + i), int32(vocab - 1)}
		}
	}
	for _, mode := range []string{"alone", "batched", "allowed"} {
		batched := mode != "alone"
		ver := blocks(len(prompt) + len(drafts))
		if _, err := pc.Forward([]Chunk{{Tokens: prompt, Blocks: ver, Logits: true, Prompt: len(prompt)}}); err != nil {
			t.Fatal(err)
		}
		at := make([]int, len(drafts))
		for i := range at {
			at[i] = i
		}
		chunks := []Chunk{{Tokens: drafts, Start: len(prompt), Blocks: ver, LogitsAt: at, Prompt: len(prompt)}}
		if mode == "allowed" {
			chunks[0].Allowed = allowed
		}
		if batched {
			other := blocks(40)
			if _, err := pc.Forward([]Chunk{{Tokens: longPrompt(20), Blocks: other, Prompt: 20}}); err != nil {
				t.Fatal(err)
			}
			chunks = append([]Chunk{{Tokens: longPrompt(13), Blocks: blocks(13), Logits: true, Prompt: 13}}, chunks...)
			chunks = append(chunks, Chunk{Tokens: []int{5}, Start: 20, Blocks: other, Logits: true, Prompt: 20})
		}
		out, err := pc.Forward(chunks)
		if err != nil {
			t.Fatal(err)
		}
		got := out[0]
		if batched {
			got = out[1]
		}
		if len(got) != len(drafts)*vocab {
			t.Fatalf("verify pass: %d logits, want %d rows of %d", len(got), len(drafts), vocab)
		}
		for i := range drafts {
			row := got[i*vocab : (i+1)*vocab]
			for j := range row {
				if mode == "allowed" && allowed[i] != nil && !slices.Contains(allowed[i], int32(j)) {
					if !math.IsInf(float64(row[j]), -1) {
						t.Fatalf("%s: after draft %d, logit %d not allowed: %v, want -Inf", mode, i, j, row[j])
					}
					continue
				}
				if math.Float32bits(row[j]) != math.Float32bits(want[i][j]) {
					t.Fatalf("%s: after draft %d, logit %d: verify pass %v, decode pass %v", mode, i, j, row[j], want[i][j])
				}
			}
		}
	}
}
