package grammar

import (
	"fmt"
	"math/bits"
	"unicode/utf8"
)

// byteSet is a set of bytes: bit b of word b/64.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) addRange(lo, hi byte) {
	for b := int(lo); b <= int(hi); b++ {
		s.add(byte(b))
	}
}
func (s *byteSet) count() int {
	return bits.OnesCount64(s[0]) + bits.OnesCount64(s[1]) + bits.OnesCount64(s[2]) + bits.OnesCount64(s[3])
}

// op is what a node of a rule's expression does.
type op uint8

const (
	opEmpty op = iota // matches the empty string
	opBytes           // one byte of set
	opRef             // the rule ref, as a whole (the pushdown part)
	opSeq             // subs one after another
	opAlt             // one of subs
	opRep             // subs[0] between min and max times (max < 0: unbounded)
)

// node is a rule's body: a regular expression over bytes and rule references. Each rule is
// compiled to one automaton (a DFA over byte classes and references), so a loop inside a
// rule — a string's characters, a number's digits — stays in one rule: that is what lets the
// token-mask cache decide most tokens from the rule alone (see Table).
type node struct {
	op       op
	set      byteSet
	ref      int
	subs     []*node
	min, max int
}

var empty = &node{op: opEmpty}

func lit(s string) *node {
	if len(s) == 0 {
		return empty
	}
	if len(s) == 1 {
		return oneByte(s[0])
	}
	n := &node{op: opSeq}
	for i := 0; i < len(s); i++ {
		n.subs = append(n.subs, oneByte(s[i]))
	}
	return n
}

func oneByte(b byte) *node {
	n := &node{op: opBytes}
	n.set.add(b)
	return n
}

func byteRange(lo, hi byte) *node {
	n := &node{op: opBytes}
	n.set.addRange(lo, hi)
	return n
}

func bytesOf(set byteSet) *node { return &node{op: opBytes, set: set} }

func seq(subs ...*node) *node {
	var out []*node
	for _, s := range subs {
		switch s.op {
		case opEmpty:
		case opSeq:
			out = append(out, s.subs...)
		default:
			out = append(out, s)
		}
	}
	switch len(out) {
	case 0:
		return empty
	case 1:
		return out[0]
	}
	return &node{op: opSeq, subs: out}
}

func alt(subs ...*node) *node {
	if len(subs) == 1 {
		return subs[0]
	}
	return &node{op: opAlt, subs: subs}
}

func rep(n *node, min, max int) *node { return &node{op: opRep, subs: []*node{n}, min: min, max: max} }
func star(n *node) *node              { return rep(n, 0, -1) }
func opt(n *node) *node               { return rep(n, 0, 1) }

// runeRange matches one UTF-8 encoded code point in [lo, hi] (surrogates excluded), as
// alternatives of byte-range sequences: the standard split of a code-point range into ranges
// whose encodings differ only in a suffix of continuation bytes.
func runeRange(lo, hi rune) *node {
	var alts []*node
	splitUTF8(lo, hi, func(los, his []byte) {
		parts := make([]*node, len(los))
		for i := range los {
			parts[i] = byteRange(los[i], his[i])
		}
		alts = append(alts, seq(parts...))
	})
	if len(alts) == 0 {
		return nil
	}
	return alt(alts...)
}

func splitUTF8(lo, hi rune, emit func(los, his []byte)) {
	if lo > hi {
		return
	}
	if lo <= 0xDFFF && hi >= 0xD800 { // surrogates have no UTF-8 encoding
		splitUTF8(lo, 0xD7FF, emit)
		splitUTF8(0xE000, hi, emit)
		return
	}
	for _, m := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= m && hi > m {
			splitUTF8(lo, m, emit)
			splitUTF8(m+1, hi, emit)
			return
		}
	}
	if hi < 0x80 {
		emit([]byte{byte(lo)}, []byte{byte(hi)})
		return
	}
	for i := 1; i < 4; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				splitUTF8(lo, lo|m, emit)
				splitUTF8((lo|m)+1, hi, emit)
				return
			}
			if hi&m != m {
				splitUTF8(lo, hi&^m-1, emit)
				splitUTF8(hi&^m, hi, emit)
				return
			}
		}
	}
	a, b := make([]byte, 4), make([]byte, 4)
	na, nb := utf8.EncodeRune(a, lo), utf8.EncodeRune(b, hi)
	if na != nb {
		panic(fmt.Sprintf("grammar: utf8 split %x..%x", lo, hi))
	}
	emit(a[:na], b[:nb])
}
