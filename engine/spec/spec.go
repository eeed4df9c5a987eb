// Package spec proposes drafts for speculative decoding without a draft model: tokens that
// are likely to come next because they came after the same few tokens before — earlier in
// this sequence (prompt lookup: an extraction answer copies the prompt) or in the domain's
// past answers (an n-gram index: every answer repeats the same JSON skeleton and phrases).
// The engine verifies drafts in one pass and keeps only what the sampler draws anyway
// (engine.Proposer), so a draft can cost a little compute but never change the output.
package spec

import (
	"slices"
	"sync"
)

// PromptLookup proposes what followed the most recent earlier occurrence of the sequence's
// last n tokens, for the longest n from MaxN down to MinN that occurs (vLLM's and
// llama.cpp's prompt-lookup / ngram drafting). The zero value tries n = 3, 2, 1.
type PromptLookup struct {
	MinN, MaxN int // n-gram lengths tried, longest first (defaults 1 and 3)
}

// Propose returns up to k tokens to follow tokens.
//
// The scan is linear in the sequence: the prompts and answers of a narrow job are a few
// thousand tokens, so scanning from the end (the most recent match first) takes a few
// microseconds a step, against milliseconds for the decode step it may save; an index would
// have to be rebuilt as the sequence grows.
func (p PromptLookup) Propose(tokens []int, k int) []int {
	minN, maxN := p.MinN, p.MaxN
	if minN <= 0 {
		minN = 1
	}
	if maxN < minN {
		maxN = max(minN, 3)
	}
	L := len(tokens)
	for n := min(maxN, L-1); n >= minN; n-- {
		suffix := tokens[L-n:]
		// The most recent earlier occurrence whose continuation is known.
		for i := L - n - 1; i >= 0; i-- {
			if tokens[i] == suffix[0] && slices.Equal(tokens[i:i+n], suffix) {
				next := tokens[i+n : min(i+n+k, L)]
				if len(next) > 0 {
					return slices.Clone(next)
				}
			}
		}
	}
	return nil
}

// Index is an n-gram table of a domain's past answers: for the last N tokens (N = Order
// down to 1, backing off), the token that most often came next. Drafts chain it: each
// proposed token extends the context for the next.
//
// Memory is bounded by MaxEntries contexts (each a few words: its key and one counter per
// distinct next token seen, at most maxNext of them). Once full, new contexts are not added;
// those already in the table keep counting — the first answers of a domain set its
// skeleton, which is what repeats. It is safe for concurrent use: the server adds finished
// answers while sequences draft from it.
type Index struct {
	Order      int
	MaxEntries int

	mu    sync.RWMutex
	table map[ngram]*nextCounts
}

// maxNext bounds the distinct next tokens counted per context.
const maxNext = 4

// ngram is a context of up to 4 tokens, the unused slots -1.
type ngram [4]int32

type nextCounts struct {
	ids    [maxNext]int32
	counts [maxNext]uint32
	n      int
}

// NewIndex makes an empty index of contexts up to order tokens (1–4) and at most maxEntries
// contexts.
func NewIndex(order, maxEntries int) *Index {
	order = min(max(order, 1), len(ngram{}))
	return &Index{Order: order, MaxEntries: maxEntries, table: map[ngram]*nextCounts{}}
}

func key(ctx []int) ngram {
	g := ngram{-1, -1, -1, -1}
	for i, t := range ctx {
		g[i] = int32(t)
	}
	return g
}

// Add counts every context and its next token in one answer (the completion's tokens,
// after the prompt).
func (x *Index) Add(tokens []int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for i := 1; i < len(tokens); i++ {
		for n := 1; n <= x.Order && n <= i; n++ {
			g := key(tokens[i-n : i])
			c := x.table[g]
			if c == nil {
				if len(x.table) >= x.MaxEntries {
					continue
				}
				c = &nextCounts{}
				x.table[g] = c
			}
			c.add(int32(tokens[i]))
		}
	}
}

func (c *nextCounts) add(id int32) {
	for j := range c.n {
		if c.ids[j] == id {
			c.counts[j]++
			return
		}
	}
	if c.n < maxNext {
		c.ids[c.n], c.counts[c.n] = id, 1
		c.n++
		return
	}
	// Full: the rarest slot decays, and is taken over once it reaches zero, so a context
	// whose continuation changed follows the change.
	r := 0
	for j := 1; j < maxNext; j++ {
		if c.counts[j] < c.counts[r] {
			r = j
		}
	}
	if c.counts[r]--; c.counts[r] == 0 {
		c.ids[r], c.counts[r] = id, 1
	}
}

// Len is the number of contexts held.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.table)
}

// Propose chains the most frequent next token of the longest known context, up to k
// tokens. A context seen only once proposes nothing for orders below Order: one sighting of
// a single token says little.
func (x *Index) Propose(tokens []int, k int) []int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ctx := slices.Clone(tokens[max(0, len(tokens)-x.Order):])
	var out []int
	for len(out) < k {
		id, ok := x.next(ctx)
		if !ok {
			break
		}
		out = append(out, id)
		ctx = append(ctx, id)
		if len(ctx) > x.Order {
			ctx = ctx[1:]
		}
	}
	return out
}

func (x *Index) next(ctx []int) (int, bool) {
	for n := min(x.Order, len(ctx)); n >= 1; n-- {
		c := x.table[key(ctx[len(ctx)-n:])]
		if c == nil || c.n == 0 {
			continue
		}
		best := 0
		for j := 1; j < c.n; j++ {
			if c.counts[j] > c.counts[best] {
				best = j
			}
		}
		if n < x.Order && c.counts[best] < 2 {
			continue
		}
		return int(c.ids[best]), true
	}
	return 0, false
}

// Chain proposes from the first of ps that has a draft.
type Chain []interface {
	Propose(tokens []int, k int) []int
}

// Propose returns the first non-empty draft of the chain's proposers.
func (c Chain) Propose(tokens []int, k int) []int {
	d, _ := c.ProposeSource(tokens, k)
	return d
}

// ProposeSource is Propose, and which of the chain's proposers drafted (its index; -1:
// none). Drafts from different evidence are kept at different rates, and the engine keeps
// an acceptance estimate per source (engine.Sourced). In the replay of the bench's greedy
// extraction answers through prompt,domain (Proposers), the first draft was kept 78% of the
// time after a prompt match of two or three tokens, 71% from the domain index, and 29%
// after a one-token prompt match.
func (c Chain) ProposeSource(tokens []int, k int) ([]int, int) {
	for i, p := range c {
		if d := p.Propose(tokens, k); len(d) > 0 {
			return d, i
		}
	}
	return nil, -1
}
