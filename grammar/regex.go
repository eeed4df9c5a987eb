package grammar

import (
	"fmt"
	"math/big"
	"regexp/syntax"
	"strings"
	"unicode"
)

// regexNode compiles a regular expression that must match the whole text. The syntax is
// Go's regexp/syntax (RE2: literals, escapes such as \d \w \s, classes, groups, alternation,
// the quantifiers * + ? {m} {m,} {m,n}), which agrees with ECMA-262 on the subset JSON
// Schema patterns use; anchors (^, $, \A, \z) are accepted at the ends and implied anyway;
// backreferences and lookaround are not RE2 and are rejected by the parser, word boundaries
// are rejected here. In a JSON string (inString) each character is generated as the string
// must write it: `"` and `\` escaped, control characters as escapes.
func regexNode(pattern string, inString bool) (*node, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	re = re.Simplify()
	n, err := reNode(re, inString, true, true)
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %w", pattern, err)
	}
	return n, nil
}

func reNode(re *syntax.Regexp, inString, atStart, atEnd bool) (*node, error) {
	switch re.Op {
	case syntax.OpNoMatch:
		return nil, fmt.Errorf("matches nothing")
	case syntax.OpEmptyMatch:
		return empty, nil
	case syntax.OpLiteral:
		var parts []*node
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 && unicode.SimpleFold(r) != r {
				var alts []*node
				for f := r; ; {
					alts = append(alts, runeNode(f, f, inString))
					if f = unicode.SimpleFold(f); f == r {
						break
					}
				}
				parts = append(parts, alt(alts...))
				continue
			}
			parts = append(parts, runeNode(r, r, inString))
		}
		return seq(parts...), nil
	case syntax.OpCharClass:
		var alts []*node
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if n := runeNode(re.Rune[i], re.Rune[i+1], inString); n != nil {
				alts = append(alts, n)
			}
		}
		if len(alts) == 0 {
			return nil, fmt.Errorf("an empty character class")
		}
		return alt(alts...), nil
	case syntax.OpAnyCharNotNL:
		return alt(runeNode(0, '\n'-1, inString), runeNode('\n'+1, unicode.MaxRune, inString)), nil
	case syntax.OpAnyChar:
		return runeNode(0, unicode.MaxRune, inString), nil
	case syntax.OpBeginLine, syntax.OpBeginText:
		if !atStart {
			return nil, fmt.Errorf("an anchor inside the pattern is not supported")
		}
		return empty, nil
	case syntax.OpEndLine, syntax.OpEndText:
		if !atEnd {
			return nil, fmt.Errorf("an anchor inside the pattern is not supported")
		}
		return empty, nil
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return nil, fmt.Errorf("word boundaries are not supported")
	case syntax.OpCapture:
		return reNode(re.Sub[0], inString, atStart, atEnd)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		sub, err := reNode(re.Sub[0], inString, false, false)
		if err != nil {
			return nil, err
		}
		switch re.Op {
		case syntax.OpStar:
			return star(sub), nil
		case syntax.OpPlus:
			return rep(sub, 1, -1), nil
		case syntax.OpQuest:
			return opt(sub), nil
		}
		return rep(sub, re.Min, re.Max), nil
	case syntax.OpConcat:
		var parts []*node
		for i, s := range re.Sub {
			n, err := reNode(s, inString, atStart && i == 0, atEnd && i == len(re.Sub)-1)
			if err != nil {
				return nil, err
			}
			parts = append(parts, n)
		}
		return seq(parts...), nil
	case syntax.OpAlternate:
		var alts []*node
		for _, s := range re.Sub {
			n, err := reNode(s, inString, atStart, atEnd)
			if err != nil {
				return nil, err
			}
			alts = append(alts, n)
		}
		return alt(alts...), nil
	}
	return nil, fmt.Errorf("unsupported construct %v", re)
}

// runeNode matches one character in [lo, hi]: as UTF-8, or inside a JSON string as the
// string writes it (the characters that must be escaped split out as their escapes).
func runeNode(lo, hi rune, inString bool) *node {
	if !inString {
		return runeRange(lo, hi)
	}
	var alts []*node
	add := func(a, b rune) {
		if a <= b {
			if n := runeRange(a, b); n != nil {
				alts = append(alts, n)
			}
		}
	}
	cur := lo
	for _, special := range specials(lo, hi) {
		add(cur, special-1)
		alts = append(alts, lit(jsonEscape(special)))
		cur = special + 1
	}
	add(cur, hi)
	if len(alts) == 0 {
		return nil
	}
	return alt(alts...)
}

// specials are the characters in [lo, hi] a JSON string must escape, in order.
func specials(lo, hi rune) []rune {
	var out []rune
	for r := max(lo, 0); r <= min(hi, 0x1F); r++ {
		out = append(out, r)
	}
	for _, r := range []rune{'"', '\\'} {
		if r >= lo && r <= hi {
			out = append(out, r)
		}
	}
	return out
}

// intRange matches the integers in [lo, hi] written as JSON writes them (no leading zeros,
// no "-0"); a nil bound is unbounded.
func intRange(lo, hi *big.Int) *node {
	var alts []*node
	zero, one := big.NewInt(0), big.NewInt(1)
	if lo == nil || lo.Sign() < 0 {
		// Negative numbers -m with m in [max(1, -hi), -lo].
		mlo := one
		if hi != nil && hi.Sign() < 0 {
			mlo = new(big.Int).Neg(hi)
		}
		var mhi *big.Int
		if lo != nil {
			mhi = new(big.Int).Neg(lo)
		}
		if mhi == nil || mlo.Cmp(mhi) <= 0 {
			alts = append(alts, seq(oneByte('-'), natRange(mlo, mhi)))
		}
	}
	if hi == nil || hi.Sign() >= 0 {
		nlo := zero
		if lo != nil && lo.Sign() > 0 {
			nlo = lo
		}
		alts = append(alts, natRange(nlo, hi))
	}
	return alt(alts...)
}

// natRange matches the naturals in [lo, hi] (hi nil: unbounded), one alternative per
// number of digits.
func natRange(lo, hi *big.Int) *node {
	a := lo.String()
	digit := byteRange('0', '9')
	var alts []*node
	if hi == nil {
		alts = append(alts, sameLen(a, strings.Repeat("9", len(a))))
		alts = append(alts, seq(byteRange('1', '9'), rep(digit, len(a), -1)))
		return alt(alts...)
	}
	b := hi.String()
	for l := len(a); l <= len(b); l++ {
		from, to := "1"+strings.Repeat("0", l-1), strings.Repeat("9", l)
		if l == 1 {
			from = "0"
		}
		if l == len(a) {
			from = a
		}
		if l == len(b) {
			to = b
		}
		alts = append(alts, sameLen(from, to))
	}
	return alt(alts...)
}

// sameLen matches the digit strings of one length between lo and hi (lo <= hi).
func sameLen(lo, hi string) *node {
	if lo == hi {
		return lit(lo)
	}
	if len(lo) == 1 {
		return byteRange(lo[0], hi[0])
	}
	if lo[0] == hi[0] {
		return seq(oneByte(lo[0]), sameLen(lo[1:], hi[1:]))
	}
	n := len(lo) - 1
	zeros, nines := strings.Repeat("0", n), strings.Repeat("9", n)
	var alts []*node
	first, last := lo[0], hi[0]
	if lo[1:] != zeros {
		alts = append(alts, seq(oneByte(lo[0]), sameLen(lo[1:], nines)))
		first++
	}
	if hi[1:] != nines {
		last--
	}
	if first <= last {
		alts = append(alts, seq(byteRange(first, last), rep(byteRange('0', '9'), n, n)))
	}
	if hi[1:] != nines {
		alts = append(alts, seq(oneByte(hi[0]), sameLen(zeros, hi[1:])))
	}
	return alt(alts...)
}
