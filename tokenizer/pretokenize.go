package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tokenwise/tokenwise/tokenizer/internal/pattern"
)

// preTokenizer splits one span into pieces, appending them to dst. Pieces are slices of the
// span's string (no copying) unless the pre-tokenizer changes the text (ByteLevel mapping,
// Metaspace). Empty pieces are dropped, as HF does.
type preTokenizer interface {
	split(sp span, dst []span, sc *scratch) []span
}

// Split behaviors (HF's SplitDelimiterBehavior).
const (
	behRemoved = iota
	behIsolated
	behMergedWithPrevious
	behMergedWithNext
	behContiguous
)

// part is a [start,end) range of a span with whether it is a delimiter match.
type part struct {
	a, b    int
	isMatch bool
}

// applyBehavior turns the alternating match/non-match parts into the pieces to keep, exactly
// like HF's NormalizedString::split, and appends them to dst.
func applyBehavior(sp span, parts []part, behavior int, dst []span) []span {
	emit := func(a, b int) {
		if a < b {
			dst = append(dst, sp.sub(a, b))
		}
	}
	switch behavior {
	case behIsolated:
		for _, p := range parts {
			emit(p.a, p.b)
		}
	case behRemoved:
		for _, p := range parts {
			if !p.isMatch {
				emit(p.a, p.b)
			}
		}
	case behContiguous, behMergedWithPrevious:
		// Pending piece [a,b); merged into while the rule says so.
		a, b, have, prev := 0, 0, false, false
		for _, p := range parts {
			merge := false
			if behavior == behContiguous {
				merge = p.isMatch == prev
			} else {
				merge = p.isMatch && !prev
			}
			if merge && have {
				b = p.b
			} else {
				if have {
					emit(a, b)
				}
				a, b, have = p.a, p.b, true
			}
			prev = p.isMatch
		}
		if have {
			emit(a, b)
		}
	case behMergedWithNext:
		// Walk backwards: a match merges with the piece after it.
		start := len(dst)
		a, b, have, prev := 0, 0, false, false
		for i := len(parts) - 1; i >= 0; i-- {
			p := parts[i]
			if p.isMatch && !prev && have {
				a = p.a
			} else {
				if have {
					emit(a, b)
				}
				a, b, have = p.a, p.b, true
			}
			prev = p.isMatch
		}
		if have {
			emit(a, b)
		}
		// Reverse what we appended.
		for i, j := start, len(dst)-1; i < j; i, j = i+1, j-1 {
			dst[i], dst[j] = dst[j], dst[i]
		}
	}
	return dst
}

// rangesToParts fills parts from sorted non-overlapping match ranges, covering all of s.
func rangesToParts(n int, ms [][2]int, invert bool, parts []part) []part {
	parts = parts[:0]
	if n == 0 {
		return append(parts, part{0, 0, false})
	}
	prev := 0
	for _, m := range ms {
		if prev != m[0] {
			parts = append(parts, part{prev, m[0], invert})
		}
		parts = append(parts, part{m[0], m[1], !invert})
		prev = m[1]
	}
	if prev != n {
		parts = append(parts, part{prev, n, invert})
	}
	return parts
}

// charParts makes one match part per character for which pred holds (HF's Fn(char) pattern).
func charParts(s string, pred func(rune) bool, parts []part) []part {
	parts = parts[:0]
	last := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if pred(r) {
			if last < i {
				parts = append(parts, part{last, i, false})
			}
			parts = append(parts, part{i, i + size, true})
			last = i + size
		}
		i += size
	}
	if last < len(s) {
		parts = append(parts, part{last, len(s), false})
	}
	return parts
}

// splitPre is HF's Split pre-tokenizer with a String (literal) or Regex pattern.
type splitPre struct {
	re       pattern.Matcher // nil for a literal
	lit      string
	behavior int
	invert   bool
}

func (p *splitPre) split(sp span, dst []span, sc *scratch) []span {
	sc.ranges = sc.ranges[:0]
	if p.re != nil {
		sc.ranges = p.re.FindAll(sp.s, sc.ranges)
	} else if p.lit != "" {
		for i := 0; ; {
			k := strings.Index(sp.s[i:], p.lit)
			if k < 0 {
				break
			}
			sc.ranges = append(sc.ranges, [2]int{i + k, i + k + len(p.lit)})
			i += k + len(p.lit)
		}
	}
	// Fast path for the GPT-style patterns (Isolated, not inverted): the matches themselves,
	// plus any gaps, are the pieces; no part list needed.
	if p.behavior == behIsolated {
		prev := 0
		for _, m := range sc.ranges {
			if prev < m[0] {
				dst = append(dst, sp.sub(prev, m[0]))
			}
			if m[0] < m[1] {
				dst = append(dst, sp.sub(m[0], m[1]))
			}
			prev = m[1]
		}
		if prev < len(sp.s) {
			dst = append(dst, sp.sub(prev, len(sp.s)))
		}
		return dst
	}
	sc.parts = rangesToParts(len(sp.s), sc.ranges, p.invert, sc.parts)
	return applyBehavior(sp, sc.parts, p.behavior, dst)
}

// charSplit is a pre-tokenizer that splits on a character class (WhitespaceSplit, Digits,
// Punctuation).
type charSplit struct {
	pred     func(rune) bool
	behavior int
}

func (p *charSplit) split(sp span, dst []span, sc *scratch) []span {
	sc.parts = charParts(sp.s, p.pred, sc.parts)
	return applyBehavior(sp, sc.parts, p.behavior, dst)
}

// whitespacePre is HF's Whitespace pre-tokenizer, the regex \w+|[^\w\s]+ with whitespace
// dropped, written out by hand with Rust regex's Unicode \w and \s.
type whitespacePre struct{}

func (whitespacePre) split(sp span, dst []span, _ *scratch) []span {
	s := sp.s
	start, kind := 0, 0 // kind: 0 none, 1 word run, 2 other run
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		k := 2
		if isWordChar(r) {
			k = 1
		} else if isWhitespace(r) {
			k = 0
		}
		if k != kind {
			if kind != 0 {
				dst = append(dst, sp.sub(start, i))
			}
			start, kind = i, k
		}
		i += size
	}
	if kind != 0 {
		dst = append(dst, sp.sub(start, len(s)))
	}
	return dst
}

// isWordChar is Rust regex's Unicode \w: Alphabetic, marks, decimal digits, connector
// punctuation and the joiners.
func isWordChar(r rune) bool {
	if r < 0x80 {
		return r == '_' || (r >= '0' && r <= '9') || (r|0x20 >= 'a' && r|0x20 <= 'z')
	}
	return unicode.IsLetter(r) || unicode.In(r, unicode.M, unicode.Nd, unicode.Nl, unicode.Pc,
		unicode.Other_Alphabetic) || r == 0x200c || r == 0x200d
}

func isPunc(r rune) bool {
	return (r < 0x80 && unicode.IsPunct(r)) || (r < 0x80 && unicode.IsSymbol(r)) || unicode.IsPunct(r)
}

// bertPre is HF's BertPreTokenizer: drop whitespace, isolate punctuation.
type bertPre struct{}

func (bertPre) split(sp span, dst []span, sc *scratch) []span {
	sc.parts = charParts(sp.s, isWhitespace, sc.parts)
	start := len(dst)
	dst = applyBehavior(sp, sc.parts, behRemoved, dst)
	// Split the word pieces again on punctuation, in place.
	words := append(sc.tmp[:0], dst[start:]...)
	dst = dst[:start]
	for _, w := range words {
		sc.parts = charParts(w.s, isPunc, sc.parts)
		dst = applyBehavior(w, sc.parts, behIsolated, dst)
	}
	sc.tmp = words[:0]
	return dst
}

// byteLevelPre is HF's ByteLevel pre-tokenizer. When it is the last pre-tokenizer
// (deferMap), the byte-to-character mapping is left to the BPE model (see bpeModel.byteInput).
type byteLevelPre struct {
	addPrefixSpace bool
	useRegex       bool
	re             pattern.Matcher // the GPT-2 pattern
	deferMap       bool
}

func (p *byteLevelPre) split(sp span, dst []span, sc *scratch) []span {
	if p.addPrefixSpace && sp.s != "" && !strings.HasPrefix(sp.s, " ") {
		w := newBuilder(sp, len(sp.s)+1)
		_, size := utf8.DecodeRuneInString(sp.s)
		w.emit(" ", sp.rangeOf(0, size))
		copySpan(w, sp, 0, len(sp.s))
		sp = w.span(sp)
	}
	start := len(dst)
	if p.useRegex {
		sc.ranges = p.re.FindAll(sp.s, sc.ranges[:0])
		prev := 0
		for _, m := range sc.ranges {
			if prev < m[0] {
				dst = append(dst, sp.sub(prev, m[0]))
			}
			if m[0] < m[1] {
				dst = append(dst, sp.sub(m[0], m[1]))
			}
			prev = m[1]
		}
		if prev < len(sp.s) {
			dst = append(dst, sp.sub(prev, len(sp.s)))
		}
	} else if sp.s != "" {
		dst = append(dst, sp)
	}
	if !p.deferMap {
		for i := start; i < len(dst); i++ {
			dst[i] = byteLevelNorm{}.normalize(dst[i])
		}
	}
	return dst
}

// Metaspace prepend schemes.
const (
	prependAlways = iota
	prependFirst
	prependNever
)

// metaspacePre is HF's Metaspace: spaces become the replacement character, which is
// prepended per the scheme, and the text is split before each replacement character.
type metaspacePre struct {
	repl    rune
	replStr string
	scheme  int
	splitOn bool
}

func (p *metaspacePre) split(sp span, dst []span, sc *scratch) []span {
	if strings.IndexByte(sp.s, ' ') >= 0 {
		sp = mapRunes(sp, func(r rune, raw string, w *builder, from [2]int32) {
			if r == ' ' {
				w.emit(p.replStr, from)
			} else {
				w.emit(raw, from)
			}
		})
	}
	if sp.s != "" && !strings.HasPrefix(sp.s, p.replStr) && (p.scheme == prependAlways || (p.scheme == prependFirst && sp.first)) {
		w := newBuilder(sp, len(sp.s)+len(p.replStr))
		_, size := utf8.DecodeRuneInString(sp.s)
		w.emit(p.replStr, sp.rangeOf(0, size))
		copySpan(w, sp, 0, len(sp.s))
		sp = w.span(sp)
	}
	if !p.splitOn {
		if sp.s != "" {
			dst = append(dst, sp)
		}
		return dst
	}
	sc.parts = charParts(sp.s, func(r rune) bool { return r == p.repl }, sc.parts)
	return applyBehavior(sp, sc.parts, behMergedWithNext, dst)
}
