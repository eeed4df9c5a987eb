package grammar

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
	"unicode/utf8"
)

// Matcher is one sequence's parse state over a Table: it masks the logits of the tokens that
// cannot continue the document, follows the tokens the sequence appends, and tells the text
// the grammar forces next. It implements the engine's LogitsProcessor and Forcer. Not safe
// for concurrent use (one per sequence).
type Matcher struct {
	t        *Table
	stacks   []stack
	complete bool // the text so far is a whole document
	ended    bool // an end-of-sequence token was accepted
	eos      []int
	mask     []uint64
	masked   bool // mask is the current state's (Extends and Process ask for the same one)

	// MaskTime is the time spent computing masks, for metrics.
	MaskTime time.Duration
	Masks    int
}

// MaxForced bounds the bytes Forced returns at once.
const MaxForced = 256

// ErrRejected is wrapped by Accept's error for a token the grammar does not allow.
var ErrRejected = errors.New("token not allowed by the grammar")

// NewMatcher starts a parse. eos are the ids that end the sequence (the tokenizer's end of
// sequence and the request's stop ids): the mask allows them exactly when the text is a
// complete document.
func (t *Table) NewMatcher(eos []int) *Matcher {
	set, complete := t.g.initial()
	return &Matcher{t: t, stacks: set, complete: complete, eos: slices.Clone(eos), mask: make([]uint64, t.words)}
}

// Complete reports whether the text so far is a whole document.
func (m *Matcher) Complete() bool { return m.complete }

// Ended reports whether an end-of-sequence token was accepted after a complete document.
func (m *Matcher) Ended() bool { return m.ended }

// Mask fills m's mask for the current state and returns it: bit id of word id/64 is set
// when token id may come next. The slice is m's own: computed once per parse state, valid
// until the state changes, and not to be written to.
func (m *Matcher) Mask() []uint64 {
	if m.masked {
		return m.mask
	}
	m.masked = true
	start := time.Now()
	if m.ended {
		clear(m.mask)
	} else {
		m.t.fill(m.mask, m.stacks)
		if m.complete {
			for _, id := range m.eos {
				if id >= 0 && id < len(m.t.v.tokens) {
					m.mask[id>>6] |= 1 << (id & 63)
				}
			}
		}
	}
	m.MaskTime += time.Since(start)
	m.Masks++
	return m.mask
}

// Allowed reports whether token id may come next.
func (m *Matcher) Allowed(id int) bool {
	if m.ended || id < 0 || id >= len(m.t.v.tokens) {
		return false
	}
	if slices.Contains(m.eos, id) {
		return m.complete
	}
	if len(m.t.v.tokens[id]) == 0 {
		return false
	}
	_, ok := m.advance(m.t.v.tokens[id])
	return ok
}

// Process sets the logits of the tokens the grammar forbids to -Inf (rows past the
// vocabulary too). It fails if no token is allowed, which compile-time checks rule out for
// a vocabulary that can spell the grammar.
func (m *Matcher) Process(logits []float32) error {
	mask := m.Mask()
	n := 0
	for i := range logits {
		if i < len(m.t.v.tokens) && mask[i>>6]&(1<<(i&63)) != 0 {
			n++
			continue
		}
		logits[i] = float32(math.Inf(-1))
	}
	if n == 0 {
		return fmt.Errorf("grammar: no token can continue the document after this point (state %s)", m.where())
	}
	return nil
}

// Accept advances the parse by token id.
func (m *Matcher) Accept(id int) error {
	if m.ended {
		return fmt.Errorf("%w: token %d after the end of the document", ErrRejected, id)
	}
	if slices.Contains(m.eos, id) {
		if !m.complete {
			return fmt.Errorf("%w: end of sequence before the document is complete", ErrRejected)
		}
		m.ended, m.masked = true, false
		return nil
	}
	if id < 0 || id >= len(m.t.v.tokens) || len(m.t.v.tokens[id]) == 0 {
		return fmt.Errorf("%w: token %d has no text", ErrRejected, id)
	}
	next, ok := m.advance(m.t.v.tokens[id])
	if !ok {
		return fmt.Errorf("%w: token %d %q", ErrRejected, id, m.t.v.tokens[id])
	}
	m.stacks, m.complete, m.masked = next.stacks, next.complete, false
	return nil
}

// AcceptBytes advances the parse by text, as if tokens spelling it were accepted.
func (m *Matcher) AcceptBytes(text []byte) error {
	next, ok := m.advance(text)
	if !ok {
		return fmt.Errorf("%w: %q", ErrRejected, text)
	}
	m.stacks, m.complete, m.masked = next.stacks, next.complete, false
	return nil
}

func (m *Matcher) advance(text []byte) (parseState, bool) {
	return m.t.g.advance(parseState{m.stacks, m.complete}, text)
}

// ValidPrefix returns how many of ids, in order, the grammar allows from the current state
// (the state itself is not changed): a draft is cut there before it is verified.
func (m *Matcher) ValidPrefix(ids []int) int {
	st := parseState{m.stacks, m.complete}
	for i, id := range ids {
		if id < 0 || id >= len(m.t.v.tokens) || len(m.t.v.tokens[id]) == 0 {
			return i // end of sequence or a special token: a draft does not go past it
		}
		next, ok := m.t.g.advance(st, m.t.v.tokens[id])
		if !ok {
			return i
		}
		st = next
	}
	return len(ids)
}

// Extends reports whether some token the current mask allows has text as a strict prefix:
// whether a tokenizer encoding text and what follows it could have produced one token running
// past text's end. The tokens starting with a byte string are one run of the sorted
// vocabulary, found by binary search.
func (m *Matcher) Extends(text []byte) bool {
	mask := m.Mask()
	v := m.t.v
	i := sort.Search(len(v.order), func(i int) bool { return bytes.Compare(v.tokens[v.order[i]], text) > 0 })
	for ; i < len(v.order) && bytes.HasPrefix(v.tokens[v.order[i]], text); i++ {
		if id := v.order[i]; mask[id>>6]&(1<<(id&63)) != 0 {
			return true
		}
	}
	return false
}

// Forced returns the text the grammar forces next: the bytes that are the only possible
// continuation, up to MaxForced, ending on a whole UTF-8 character. Empty when the next byte
// is a choice, or the document may end here.
func (m *Matcher) Forced() []byte {
	if m.ended {
		return nil
	}
	var out []byte
	set, complete := m.stacks, m.complete
	for len(out) < MaxForced && !complete && len(set) > 0 {
		b := m.t.g.states[set[0].top].forced
		if b < 0 {
			break
		}
		for _, s := range set[1:] {
			if m.t.g.states[s.top].forced != b {
				b = -1
				break
			}
		}
		if b < 0 {
			break
		}
		var x expansion
		set = m.t.g.step(set, byte(b), nil, &x)
		complete = x.complete
		out = append(out, byte(b))
	}
	// Cut a trailing partial character: the tokenizer encodes whole characters.
	for n := len(out); n > 0; n-- {
		if utf8.Valid(out[:n]) {
			return out[:n]
		}
	}
	return nil
}

// Clone returns an independent copy of the parse state (for speculation: check a draft
// without committing).
func (m *Matcher) Clone() *Matcher {
	c := *m
	c.stacks = slices.Clone(m.stacks)
	c.eos = slices.Clone(m.eos)
	c.mask = make([]uint64, len(m.mask))
	c.masked = false // the copy's mask is computed afresh
	return &c
}

func (m *Matcher) where() string {
	if len(m.stacks) == 0 {
		return "end of document"
	}
	return fmt.Sprintf("in rule %q", m.t.g.ruleName[m.t.g.states[m.stacks[0].top].rule])
}
