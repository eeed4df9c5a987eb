package sched

import (
	"errors"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/engine/kvcache"
)

// harness drives a scheduler with a fake runner: every sampled token is 1000+step, and a
// sequence is done after gen[id] tokens.
type harness struct {
	t     *testing.T
	s     *Scheduler
	gen   map[SeqID]int
	got   map[SeqID][]int
	steps int
}

func newHarness(t *testing.T, cfg Config, blocks, blockSize int) *harness {
	kv, err := kvcache.New(blocks, blockSize)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, kv)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, s: s, gen: map[SeqID]int{}, got: map[SeqID][]int{}}
}

func (h *harness) add(id SeqID, prompt []int, maxTokens int) {
	h.t.Helper()
	if err := h.s.Add(Request{ID: id, Prompt: prompt, MaxTokens: maxTokens}); err != nil {
		h.t.Fatal(err)
	}
	h.gen[id] = maxTokens
}

// step schedules and "executes" one step, returning its trace.
func (h *harness) step() string {
	st := h.s.Schedule()
	var outs []Output
	for _, w := range st.Work {
		if !w.Sample {
			continue
		}
		tok := 1000 + h.steps
		h.got[w.Seq] = append(h.got[w.Seq], tok)
		outs = append(outs, Output{Seq: w.Seq, Token: tok, Done: len(h.got[w.Seq]) >= h.gen[w.Seq]})
	}
	h.s.Update(st, outs)
	h.steps++
	return st.String()
}

func (h *harness) expect(want ...string) {
	h.t.Helper()
	for i, w := range want {
		if got := h.step(); got != w {
			h.t.Fatalf("step %d:\n got  %q\n want %q", h.steps-1, got, w)
		}
		_ = i
	}
}

func toks(n, from int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

func TestAdmissionAndDecodeBatching(t *testing.T) {
	h := newHarness(t, Config{MaxSeqs: 2, MaxBatchedTokens: 16, MaxWaiting: 4, MaxModelLen: 64}, 8, 4)
	h.add(1, toks(3, 1), 2)
	h.add(2, toks(5, 10), 3)
	h.add(3, toks(2, 20), 1)
	h.expect(
		// Both prompts fit the budget; seq 3 waits for a slot (MaxSeqs 2).
		"1:prefill[0,3)b[0]* 2:prefill[0,5)b[1 2]*",
		// Decodes of both, batched; seq 1's first decode fills its block.
		"1:decode[3,4)b[0]* 2:decode[5,6)b[1 2]*",
		// Seq 1 finished after 2 tokens: seq 3 joins the batch while seq 2 decodes.
		"2:decode[6,7)b[1 2]* 3:prefill[0,2)b[3]*",
		"",
	)
	if !h.s.Idle() || h.s.KV().NumFree() != 8 {
		t.Fatalf("after all finished: idle %v, %d free blocks", h.s.Idle(), h.s.KV().NumFree())
	}
}

func TestChunkedPrefillMixedWithDecode(t *testing.T) {
	h := newHarness(t, Config{MaxSeqs: 4, MaxBatchedTokens: 6, MaxWaiting: 4, MaxModelLen: 64}, 16, 4)
	h.add(1, toks(2, 1), 4)
	h.expect("1:prefill[0,2)b[0]*")
	h.add(2, toks(13, 50), 1)
	h.expect(
		// Seq 1 decodes (1 token); seq 2's 13-token prompt gets the other 5 of the budget.
		"1:decode[2,3)b[0]* 2:prefill[0,5)b[1 2]",
		"1:decode[3,4)b[0]* 2:prefill[5,10)b[1 2 3]",
		// The last chunk samples.
		"1:decode[4,5)b[0 4]* 2:prefill[10,13)b[1 2 3 5]*",
		"",
	)
	if h.s.KV().NumFree() != 16 {
		t.Fatalf("%d blocks free, want 16", h.s.KV().NumFree())
	}
}

func TestPreemptionByRecompute(t *testing.T) {
	// 3 blocks of 2 tokens: two sequences of 2-token prompts fill 2 blocks; growing both
	// needs 4.
	h := newHarness(t, Config{MaxSeqs: 4, MaxBatchedTokens: 16, MaxWaiting: 4, MaxModelLen: 64}, 3, 2)
	h.add(1, toks(2, 1), 4)
	h.add(2, toks(2, 10), 2)
	h.expect(
		"1:prefill[0,2)b[0]* 2:prefill[0,2)b[1]*",
		// Seq 1 takes the last free block; seq 2 needs one too: it is preempted.
		"1:decode[2,3)b[0 2]* preempt 2",
		// Seq 2 cannot come back while seq 1 holds all blocks but one... it needs 2 for its
		// 3 tokens (prompt + the token sampled before preemption), and only 0 are free.
		"1:decode[3,4)b[0 2]*",
		"1:decode[4,5)b[0 2 1]*",
	)
	// Seq 1 done (4 tokens). Seq 2 recomputes prompt + its sampled token from scratch: its
	// cached prompt block was evicted when seq 1 took block 1.
	h.expect(
		"2:prefill[0,3)b[1 2]*",
		"",
	)
	if h.s.Preemptions != 1 {
		t.Fatalf("preemptions %d", h.s.Preemptions)
	}
	if got := h.got[2]; len(got) != 2 || got[0] != 1000 {
		t.Fatalf("seq 2 tokens %v: its first token must survive the preemption", got)
	}
	if h.s.KV().NumFree() != 3 {
		t.Fatalf("%d blocks free, want 3", h.s.KV().NumFree())
	}
}

func TestPrefixCacheHit(t *testing.T) {
	h := newHarness(t, Config{MaxSeqs: 4, MaxBatchedTokens: 32, MaxWaiting: 4, MaxModelLen: 64}, 8, 4)
	shared := toks(8, 100)
	h.add(1, append(shared, 1, 2), 1)
	h.expect("1:prefill[0,10)b[0 1 2]*", "")
	// Same 8-token prefix: two full blocks come from the cache, only the rest is computed.
	h.add(2, append(shared, 3), 1)
	h.expect("2:prefill[8,9)b[0 1 3]*", "")
	kv := h.s.KV()
	if kv.Hits != 8 {
		t.Fatalf("prefix hits %d tokens, want 8", kv.Hits)
	}
	// A block-aligned identical prompt still computes its last token (for logits): only the
	// first block is reused.
	h.add(3, shared, 1)
	if got := h.step(); !strings.HasPrefix(got, "3:prefill[4,8)") {
		t.Fatalf("aligned prompt: %q", got)
	}
}

func TestCancellationFreesBlocks(t *testing.T) {
	h := newHarness(t, Config{MaxSeqs: 4, MaxBatchedTokens: 32, MaxWaiting: 4, MaxModelLen: 64}, 8, 4)
	h.add(1, toks(9, 1), 10)
	h.add(2, toks(3, 50), 10)
	h.expect("1:prefill[0,9)b[0 1 2]* 2:prefill[0,3)b[3]*")
	if free := h.s.KV().NumFree(); free != 4 {
		t.Fatalf("%d free", free)
	}
	if !h.s.Cancel(1) {
		t.Fatal("cancel of a running sequence reported missing")
	}
	if free := h.s.KV().NumFree(); free != 7 {
		t.Fatalf("after cancel: %d free, want 7", free)
	}
	h.add(3, toks(2, 70), 1)
	if !h.s.Cancel(3) { // still waiting
		t.Fatal("cancel of a waiting sequence reported missing")
	}
	if h.s.Cancel(3) {
		t.Fatal("second cancel reported success")
	}
	h.expect("2:decode[3,4)b[3]*")
	h.s.Cancel(2)
	if !h.s.Idle() || h.s.KV().NumFree() != 8 {
		t.Fatalf("not idle or blocks leaked: %d free", h.s.KV().NumFree())
	}
}

func TestAddErrors(t *testing.T) {
	h := newHarness(t, Config{MaxSeqs: 1, MaxBatchedTokens: 8, MaxWaiting: 1, MaxModelLen: 16}, 2, 4)
	if err := h.s.Add(Request{ID: 1, Prompt: toks(10, 0), MaxTokens: 7}); err == nil {
		t.Fatal("request beyond MaxModelLen accepted")
	}
	if err := h.s.Add(Request{ID: 1, Prompt: toks(6, 0), MaxTokens: 3}); err == nil {
		t.Fatal("request beyond the KV cache (8 tokens) accepted")
	}
	if err := h.s.Add(Request{ID: 1}); err == nil {
		t.Fatal("empty prompt accepted")
	}
	h.add(1, toks(2, 0), 1)
	if err := h.s.Add(Request{ID: 1, Prompt: toks(2, 0)}); err == nil {
		t.Fatal("duplicate id accepted")
	}
	if err := h.s.Add(Request{ID: 2, Prompt: toks(2, 0)}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("full queue: %v", err)
	}
}
