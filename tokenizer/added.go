package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	id                                int
	content                           string
	singleWord, lstrip, rstrip, normd bool
	special                           bool
}

// addedVocab finds added tokens in text before the model runs, as HF's AddedVocabulary:
// tokens with normalized=false are matched on the raw text, the others on the normalized
// text, each set leftmost-longest.
type addedVocab struct {
	tokens    []addedToken
	byContent map[string]int
	byID      map[int]*addedToken
	raw       *trie // normalized=false tokens
	norm      *trie // normalized=true tokens, by their normalized content
}

// trie is a byte trie with a dense root. A leftmost-longest scan tries each start position
// in turn and keeps the longest token beginning there; the root table rejects most positions
// with one load, which is all plain text costs.
type trie struct {
	root      [256]int32 // child of the root per byte, 0 = none
	nodes     []trieNode
	onlyFirst int // the one byte every token starts with, or -1
}

type trieNode struct {
	tok   int32 // index into addedVocab.tokens, -1 if no token ends here
	edges []trieEdge
}

type trieEdge struct {
	b    byte
	node int32
}

func newTrie() *trie {
	return &trie{nodes: []trieNode{{tok: -1}}, onlyFirst: -2}
}

func (t *trie) insert(s string, tok int) {
	if s == "" {
		return
	}
	switch {
	case t.onlyFirst == -2:
		t.onlyFirst = int(s[0])
	case t.onlyFirst != int(s[0]):
		t.onlyFirst = -1
	}
	cur := int32(0)
	for i := 0; i < len(s); i++ {
		next := t.child(cur, s[i])
		if next == 0 {
			t.nodes = append(t.nodes, trieNode{tok: -1})
			next = int32(len(t.nodes) - 1)
			if cur == 0 {
				t.root[s[i]] = next
			} else {
				t.nodes[cur].edges = append(t.nodes[cur].edges, trieEdge{s[i], next})
			}
		}
		cur = next
	}
	// The same content twice: the later entry wins, as a map insert would.
	t.nodes[cur].tok = int32(tok)
}

func (t *trie) child(n int32, b byte) int32 {
	if n == 0 {
		return t.root[b]
	}
	for _, e := range t.nodes[n].edges {
		if e.b == b {
			return e.node
		}
	}
	return 0
}

// longestAt returns the token index and end of the longest token starting at i, or -1.
func (t *trie) longestAt(s string, i int) (int, int) {
	n := t.root[s[i]]
	best, end := -1, 0
	for j := i + 1; n != 0; j++ {
		if tk := t.nodes[n].tok; tk >= 0 {
			best, end = int(tk), j
		}
		if j >= len(s) {
			break
		}
		n = t.child(n, s[j])
	}
	return best, end
}

// splitAdded splits sp around the tokens of tr, as HF's find_matches: matches are found
// leftmost-longest without regard to single_word, then single_word matches that are not a
// whole word are dropped, and lstrip/rstrip widen a match over neighbouring whitespace.
func (av *addedVocab) splitAdded(sp span, tr *trie, dst []span) []span {
	s := sp.s
	if tr == nil || s == "" {
		if s != "" {
			dst = append(dst, sp)
		}
		return dst
	}
	startOffset := 0
	for i := 0; i < len(s); {
		if tr.onlyFirst >= 0 {
			// All tokens start with the same byte ('<' in most files): let IndexByte, which
			// is vectorized, skip the plain text.
			k := strings.IndexByte(s[i:], byte(tr.onlyFirst))
			if k < 0 {
				break
			}
			i += k
		} else if tr.root[s[i]] == 0 {
			i++
			continue
		}
		tk, stop := tr.longestAt(s, i)
		if tk < 0 {
			i++
			continue
		}
		start := i
		i = stop
		tok := &av.tokens[tk]
		if tok.singleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if tok.lstrip {
			ns := start
			for ns > 0 {
				r, size := utf8.DecodeLastRuneInString(s[:ns])
				if !isWhitespace(r) {
					break
				}
				ns -= size
			}
			start = max(ns, startOffset)
		}
		if tok.rstrip {
			for stop < len(s) {
				r, size := utf8.DecodeRuneInString(s[stop:])
				if !isWhitespace(r) {
					break
				}
				stop += size
			}
			// The next search resumes after the stripped spaces: the automaton in HF has already
			// consumed input up to the match end, but a later match cannot start inside what this
			// one now covers without overlapping it.
		}
		if startOffset < start {
			dst = append(dst, sp.sub(startOffset, start))
		}
		t := sp.sub(start, stop)
		t.id = int32(tok.id)
		dst = append(dst, t)
		startOffset = stop
		if i < stop {
			i = stop
		}
	}
	if startOffset < len(s) {
		dst = append(dst, sp.sub(startOffset, len(s)))
	}
	return dst
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordChar(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordChar(r)
}
