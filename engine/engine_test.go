package engine

import (
	"context"
	"slices"
	"testing"
)

// oracle proposes what a earlier run of the same request produced after the tokens so far;
// wrong proposes a token that is never it.
type oracle struct {
	prompt, ids []int
	wrong       bool
	vocab       int
}

func (o *oracle) Propose(tokens []int, k int) []int {
	at := len(tokens) - len(o.prompt)
	next := o.ids[min(at, len(o.ids)):]
	next = slices.Clone(next[:min(k, len(next))])
	if o.wrong {
		for i := range next {
			next[i] = (next[i] + 1) % o.vocab
		}
	}
	return next
}

// TestDraftsVerified: drafts verified in one pass leave greedy output unchanged. Right
// drafts are kept (fewer decode steps: up to MaxDraft+1 tokens a step); wrong ones are all
// rejected, and the step still yields its one sampled token.
func TestDraftsVerified(t *testing.T) {
	m, tok := synthModel(t)
	defer m.Close()
	ctx := context.Background()
	prompt := tok.Encode("The quick brown fox", true)
	plain, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: 24, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Timing.DecodeSteps != 23 {
		t.Fatalf("plain run: %d decode steps, want 23", plain.Timing.DecodeSteps)
	}
	for _, c := range []struct {
		name  string
		wrong bool
	}{{"right drafts", false}, {"wrong drafts", true}} {
		t.Run(c.name, func(t *testing.T) {
			o := &oracle{prompt: prompt, ids: plain.IDs, wrong: c.wrong, vocab: tok.VocabSize()}
			res, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: 24, IgnoreEOS: true, Proposer: o, MaxDraft: 4})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.IDs, plain.IDs) || res.Text != plain.Text {
				t.Fatalf("ids %v\nwithout drafts %v", res.IDs, plain.IDs)
			}
			tm := res.Timing
			if c.wrong {
				if tm.AcceptedDrafts != 0 || tm.DecodeSteps != 23 || tm.DraftedTokens == 0 {
					t.Errorf("wrong drafts: %d drafted, %d kept, %d decode steps; want some, none, 23", tm.DraftedTokens, tm.AcceptedDrafts, tm.DecodeSteps)
				}
				return
			}
			// 24 tokens: the prefill's first, then 5 per step (4 drafts + 1): 5 steps, the
			// last drafting only what MaxTokens leaves.
			if tm.DecodeSteps != 5 || tm.AcceptedDrafts != 23-tm.DecodeSteps || tm.DraftedTokens != tm.AcceptedDrafts {
				t.Errorf("right drafts: %d drafted, %d kept, %d decode steps; want all kept in 5 steps", tm.DraftedTokens, tm.AcceptedDrafts, tm.DecodeSteps)
			}
		})
	}
}
