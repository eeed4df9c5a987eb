package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// pagedSeq is one sequence of the batched test: its tokens, how many are in the cache, and
// its block table.
type pagedSeq struct {
	tokens   []int
	computed int
	blocks   []int
	logits   [][]float32 // logits returned after each sampled position
}

// TestPagedMatchesSequential runs three sequences through the paged forward in mixed
// batches (a chunked prefill next to decodes, sequences joining late, scattered block
// tables) and checks every logit vector against the per-sequence Prefill/Decode path, and
// the greedy tokens for equality.
func TestPagedMatchesSequential(t *testing.T) {
	for name := range testConfigs {
		for _, kv := range []tensor.DType{tensor.F32, tensor.F16} {
			t.Run(fmt.Sprintf("%s/kv=%v", name, kv), func(t *testing.T) { pagedMatchesSequential(t, name, kv) })
		}
	}
}

func pagedMatchesSequential(t *testing.T, name string, kv tensor.DType) {
	// With an f16 cache, projections summed in another order (see closePaged) can put a key,
	// value or query element on the other side of an f16 rounding boundary: one half-precision
	// unit, the error budget of the f16 cache itself (kvF16Tol).
	tol := logitTol
	if kv == tensor.F16 {
		tol = kvF16Tol
	}
	m, _, _ := testModelOpts(t, name, tensor.F32, Options{Threads: 3, KVCache: kv})
	const bs, nblocks = 4, 64
	pc, err := m.NewPagedCache(nblocks, bs)
	if err != nil {
		t.Fatal(err)
	}
	// Hand out blocks in a shuffled order so that no table is contiguous.
	free := rand.New(rand.NewPCG(1, 2)).Perm(nblocks)
	alloc := func(s *pagedSeq, n int) {
		for len(s.blocks)*bs < n {
			s.blocks = append(s.blocks, free[0])
			free = free[1:]
		}
	}
	prompts := [][]int{
		testPrompt,
		{7, 7, 1, 2, 3, 50, 60, 2, 9, 9, 9, 12, 13, 14, 15, 16, 17, 18, 19}, // prefilled in chunks
		{4},
		longPrompt(70), // one chunk of kernels.AttnTile+ tokens: attended in tiles
	}
	seqs := make([]*pagedSeq, len(prompts))
	for i, p := range prompts {
		seqs[i] = &pagedSeq{tokens: slices.Clone(p)}
	}
	const gen = 12
	// Per step: how many tokens each sequence computes (0: not in this step).
	// Seq 1's prompt goes in chunks of 6, 6, 7; seq 2 joins at step 2.
	plan := func(step, i int) int {
		s := seqs[i]
		left := len(s.tokens) - s.computed
		switch {
		case i == 1 && s.computed < len(prompts[1]):
			return min(6, left)
		case i == 2 && step < 2:
			return 0
		}
		return left
	}
	for step := 0; ; step++ {
		var chunks []Chunk
		var who []int
		for i, s := range seqs {
			if len(s.tokens)-len(prompts[i]) >= gen {
				continue
			}
			k := plan(step, i)
			if k == 0 {
				continue
			}
			alloc(s, s.computed+k)
			chunks = append(chunks, Chunk{Tokens: s.tokens[s.computed : s.computed+k], Start: s.computed,
				Blocks: s.blocks, Logits: s.computed+k == len(s.tokens)})
			who = append(who, i)
		}
		if len(chunks) == 0 {
			break
		}
		out, err := pc.Forward(chunks)
		if err != nil {
			t.Fatal(err)
		}
		for j, i := range who {
			s := seqs[i]
			s.computed += len(chunks[j].Tokens)
			if chunks[j].Logits {
				s.logits = append(s.logits, slices.Clone(out[j]))
				s.tokens = append(s.tokens, argmax(out[j]))
			} else if out[j] != nil {
				t.Fatalf("step %d: logits for a chunk that did not ask", step)
			}
		}
	}
	for i, s := range seqs {
		seq := m.NewSequence(0)
		logits, err := m.Prefill(seq, prompts[i])
		if err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(prompts[i])
		for g := range gen {
			closePaged(t, i, g, s.logits[g], logits, tol)
			id := argmax(logits)
			want = append(want, id)
			if g+1 < gen {
				if logits, err = m.Decode(seq, id); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !slices.Equal(s.tokens, want) {
			t.Fatalf("seq %d: batched greedy %v, sequential %v", i, s.tokens, want)
		}
	}
}

// longPrompt is n token ids of the test models' vocabulary.
func longPrompt(n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = 1 + (i*7)%60
	}
	return p
}

// closePaged: the batched pass sums in a different order (matrix×matrix instead of
// matrix×vector for decode rows), so logits agree to float32 rounding, not bit for bit.
func closePaged(t *testing.T, seq, step int, got, want []float32, tol float64) {
	t.Helper()
	scale := 1.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > tol*scale {
			t.Fatalf("seq %d step %d: logit %d: batched %v, sequential %v", seq, step, i, got[i], want[i])
		}
	}
}

func TestPagedErrors(t *testing.T) {
	m, _, _ := testModel(t, "llama-gqa-tied", tensor.F32, 1)
	if _, err := m.NewPagedCache(0, 16); err == nil {
		t.Fatal("0 blocks accepted")
	}
	pc, err := m.NewPagedCache(4, 4)
	if err != nil {
		t.Fatal(err)
	}
	bad := []Chunk{
		{Tokens: nil, Blocks: []int{0}},
		{Tokens: []int{1, 2, 3, 4, 5}, Blocks: []int{0}},        // 5 tokens in one block of 4
		{Tokens: []int{1}, Blocks: []int{9}},                    // block outside the cache
		{Tokens: []int{1000}, Blocks: []int{0}},                 // token outside the vocabulary
		{Tokens: []int{1}, Start: 200, Blocks: make([]int, 60)}, // beyond the context
	}
	for i, ch := range bad {
		if _, err := pc.Forward([]Chunk{ch}); err == nil {
			t.Errorf("bad chunk %d accepted", i)
		}
	}
	if _, err := pc.Forward(nil); err == nil {
		t.Error("empty batch accepted")
	}
}

// BenchmarkPagedDecode compares one step that decodes 16 sequences together (each weight
// read once) with 16 steps of one sequence each, on SmolLM2-135M's shape (bf16).
//
//	go test ./model -run XXX -bench PagedDecode -benchtime 5x
func BenchmarkPagedDecode(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("..", "configs", "smollm2-135m.json"))
	if err != nil {
		b.Skip(err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		b.Fatal(err)
	}
	ws, err := RandomWeights(cfg, 1, tensor.BF16)
	if err != nil {
		b.Fatal(err)
	}
	m, err := build(cfg, newMemSource(ws), hfNames, false, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	const seqs, ctx, bs = 16, 64, 16
	pc, err := m.NewPagedCache(seqs*ctx/bs, bs)
	if err != nil {
		b.Fatal(err)
	}
	chunks := make([]Chunk, seqs)
	for i := range chunks {
		blocks := make([]int, ctx/bs)
		for j := range blocks {
			blocks[j] = i*ctx/bs + j
		}
		chunks[i] = Chunk{Tokens: []int{100 + i}, Start: ctx / 2, Blocks: blocks, Logits: true}
	}
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("rows=%d", batch), func(b *testing.B) {
			for b.Loop() {
				for i := 0; i < seqs; i += batch {
					if _, err := pc.Forward(chunks[i : i+batch]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(seqs*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
