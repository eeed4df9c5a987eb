package grammar

import (
	"bytes"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"time"
)

// Vocab is a tokenizer's vocabulary as the grammar sees it: the bytes each token stands for.
// A token with no bytes (special and control tokens) is never allowed by a mask; end of
// sequence is allowed by id (see Matcher). Build it once per tokenizer and share it.
type Vocab struct {
	tokens [][]byte
	order  []int32    // ids of tokens with bytes, sorted by their bytes
	lcp    []int32    // lcp[i]: bytes order[i] shares with order[i-1]
	first  [257]int32 // order[first[b]:first[b+1]] are the tokens that start with byte b
	has    byteSet    // bytes that occur in some token
}

// NewVocab builds a Vocab from each token id's bytes (tokenizer.TokenBytes); nil or empty
// marks a token no grammar allows (special tokens).
func NewVocab(tokens [][]byte) *Vocab {
	v := &Vocab{tokens: tokens}
	for id, b := range tokens {
		if len(b) > 0 {
			v.order = append(v.order, int32(id))
			for _, c := range b {
				v.has.add(c)
			}
		}
	}
	slices.SortFunc(v.order, func(a, b int32) int { return bytes.Compare(tokens[a], tokens[b]) })
	v.lcp = lcps(tokens, v.order)
	at := 0
	for b := 0; b < 256; b++ {
		v.first[b] = int32(at)
		for at < len(v.order) && tokens[v.order[at]][0] == byte(b) {
			at++
		}
	}
	v.first[256] = int32(at)
	return v
}

func lcps(tokens [][]byte, order []int32) []int32 {
	lcp := make([]int32, len(order))
	for i := 1; i < len(order); i++ {
		a, b := tokens[order[i-1]], tokens[order[i]]
		n := 0
		for n < len(a) && n < len(b) && a[n] == b[n] {
			n++
		}
		lcp[i] = int32(n)
	}
	return lcp
}

// Bytes returns token id's bytes (nil for a token no grammar allows).
func (v *Vocab) Bytes(id int) []byte { return v.tokens[id] }

// Size is the number of token ids (the length of a mask).
func (v *Vocab) Size() int { return len(v.tokens) }

// Table is a grammar paired with a vocabulary: it answers which tokens each grammar state
// allows, and caches the answer. It is safe for concurrent use, and shared by every Matcher
// of the grammar (the server keeps one per schema and tokenizer).
//
// Speed. A mask is the set of tokens whose bytes the parser can read from its state. Running
// the parser over all 49k-151k tokens every step costs milliseconds, so, as XGrammar does,
// the work is split by what a token's acceptance depends on. For a byte-reading state s, the
// Table walks the vocabulary once with the parser started at s and nothing known below it
// (the frame outside), and sorts each token into: accepted whatever lies below (its bytes
// are read without returning from s's rule), rejected whatever lies below, or undecided (the
// parse must return from s's rule before the token ends, e.g. `",` after a string's
// characters). The mask of a stack is then the cached accepted set, plus the undecided
// tokens run through the real stack. A JSON grammar's rules are loops (a string's characters,
// a number's digits), so the undecided tokens are the few that close the construct: the
// walk touches almost nothing per step. Walks share work between tokens with a common
// prefix: the vocabulary is sorted, and a token continues the parse of the one before it
// from their common prefix (lcp), so each byte of the implicit trie is read once.
type Table struct {
	g     *Grammar
	v     *Vocab
	words int

	mu    sync.Mutex
	cache map[int32]*stateMask

	// Stats, for the server's metrics.
	walks    int
	walkTime time.Duration
}

// stateMask is what a byte-reading state alone decides about the vocabulary.
type stateMask struct {
	accept []uint64 // tokens accepted whatever is below the state
	undec  []int32  // tokens that depend on what is below, in vocabulary order
	lcp    []int32
}

// NewTable pairs g with v. It refuses a grammar the vocabulary cannot spell: a state whose
// every byte occurs in no token would make a mask empty in the middle of a document.
func NewTable(g *Grammar, v *Vocab) (*Table, error) {
	for i := range g.states {
		st := &g.states[i]
		if !st.hasBytes {
			continue
		}
		ok := false
		var want []byte
		for c := 0; c < g.nclass && !ok; c++ {
			if g.trans[i*g.nclass+c] < 0 {
				continue
			}
			for b := 0; b < 256; b++ {
				if g.classOf[b] == uint8(c) {
					if v.has.has(byte(b)) {
						ok = true
						break
					}
					if len(want) < 8 {
						want = append(want, byte(b))
					}
				}
			}
		}
		if !ok {
			return nil, fmt.Errorf("grammar: the vocabulary cannot spell what rule %q requires (no token contains any of %q)", g.ruleName[st.rule], want)
		}
	}
	return &Table{g: g, v: v, words: (len(v.tokens) + 63) / 64, cache: map[int32]*stateMask{}}, nil
}

// Grammar returns the table's grammar.
func (t *Table) Grammar() *Grammar { return t.g }

// Vocab returns the table's vocabulary.
func (t *Table) Vocab() *Vocab { return t.v }

// WalkStats reports how many states' masks were computed and the time it took.
func (t *Table) WalkStats() (int, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.walks, t.walkTime
}

func (t *Table) stateMask(pos int32) *stateMask {
	t.mu.Lock()
	m, ok := t.cache[pos]
	t.mu.Unlock()
	if ok {
		return m
	}
	start := time.Now()
	m = t.study(pos)
	t.mu.Lock()
	if old, ok := t.cache[pos]; ok {
		m = old
	} else {
		t.cache[pos] = m
		t.walks++
		t.walkTime += time.Since(start)
	}
	t.mu.Unlock()
	return m
}

// study walks the vocabulary from state pos alone (see Table).
func (t *Table) study(pos int32) *stateMask {
	m := &stateMask{accept: make([]uint64, t.words)}
	w := newWalker(t.g, []stack{{pos, outside}})
	g, v := t.g, t.v
	for b := 0; b < 256; b++ {
		// A token whose first byte the state cannot read is rejected: the whole run of
		// tokens starting with it is skipped (most of the vocabulary, in a state that
		// expects a key's quote or a digit).
		if g.trans[int(pos)*g.nclass+int(g.classOf[b])] < 0 {
			continue
		}
		for i := v.first[b]; i < v.first[b+1]; i++ {
			id := v.order[i]
			lcp := int(v.lcp[i])
			if i == v.first[b] {
				lcp = 0
			}
			switch w.walk(v.tokens[id], lcp) {
			case verdictAccept:
				m.accept[id>>6] |= 1 << (id & 63)
			case verdictUndecided:
				m.undec = append(m.undec, id)
			}
		}
	}
	m.lcp = lcps(t.v.tokens, m.undec)
	return m
}

type verdict uint8

const (
	verdictReject verdict = iota
	verdictAccept
	verdictUndecided
)

// walker runs the parser over tokens in sorted order, keeping the parse state after each
// prefix length of the last token so the next one starts from their common prefix.
type walker struct {
	g      *Grammar
	levels [][]stack // levels[d]: stacks after d bytes of the current token
	done   []bool    // done[d]: some parse finished the document (or left to outside) at d
	before []bool    // before[d]: some parse left to outside at a depth in 1..d
	depth  int       // levels[0..depth] are valid for the previous token
}

func newWalker(g *Grammar, init []stack) *walker {
	w := &walker{g: g, levels: [][]stack{init}, done: []bool{false}, before: []bool{false}}
	return w
}

// walk reads tok, sharing the first lcp bytes with the previous token walked.
func (w *walker) walk(tok []byte, lcp int) verdict {
	d := min(lcp, w.depth)
	for d < len(tok) && len(w.levels[d]) > 0 {
		if len(w.levels) <= d+1 {
			w.levels = append(w.levels, nil)
			w.done = append(w.done, false)
			w.before = append(w.before, false)
		}
		var x expansion
		w.levels[d+1] = w.g.step(w.levels[d], tok[d], w.levels[d+1][:0], &x)
		w.done[d+1] = x.complete || x.left
		w.before[d+1] = w.before[d] || x.left
		d++
	}
	w.depth = d
	if d == len(tok) && (len(w.levels[d]) > 0 || w.done[d]) {
		return verdictAccept
	}
	// The token ends past a dead parse (d < len) or right after a finish with bytes left:
	// undecided if some parse left to outside before its end.
	if d == len(tok) {
		d--
	}
	if w.before[d] {
		return verdictUndecided
	}
	return verdictReject
}

// fill sets in mask the tokens the stacks allow; eos ids are set when complete.
func (t *Table) fill(mask []uint64, set []stack) {
	clear(mask)
	for _, s := range set {
		m := t.stateMask(s.top)
		for i, w := range m.accept {
			mask[i] |= w
		}
		if len(m.undec) == 0 {
			continue
		}
		w := newWalker(t.g, []stack{s})
		for i, id := range m.undec {
			if mask[id>>6]&(1<<(id&63)) != 0 {
				w.depth = 0 // the walker's levels no longer follow the sorted order
				continue
			}
			if w.walk(t.v.tokens[id], int(m.lcp[i])) == verdictAccept {
				mask[id>>6] |= 1 << (id & 63)
			}
		}
	}
}

func popcount(mask []uint64) int {
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	return n
}
