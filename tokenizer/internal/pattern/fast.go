package pattern

import "unicode/utf8"

// Hand-written matchers for the pre-tokenizer patterns of the common model
// families. Each one computes, at a position, the end of the match the regex
// would find there, following the regex's ordered alternation and
// backtracking by hand. Every one of these patterns has a catch-all
// alternative for each class of character (letters, numbers, whitespace,
// everything else), so a match always starts where the previous one ended and
// FindAll is a single left-to-right pass with no search and no allocation
// beyond dst: each FindAll is a loop over a next function that returns the
// end of the match starting at i (always > i). The differential tests (fast_test.go) hold each matcher to the
// regexp2 fallback on adversarial input.

func init() {
	fastMatchers[exprGPT2] = gpt2Matcher{}
	fastMatchers[exprLlama3] = llamaMatcher{maxDigits: 3}
	fastMatchers[exprQwen2] = llamaMatcher{maxDigits: 1}
	fastMatchers[exprO200k] = o200kMatcher{contractions: true, maxDigits: 3}
	fastMatchers[exprTekken] = o200kMatcher{contractions: false, maxDigits: 1}
}

// The patterns, exactly as real tokenizer.json files spell them (after JSON
// unescaping).
const (
	// GPT-2, RoBERTa and every ByteLevel pre-tokenizer with use_regex.
	exprGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// Llama-3 (tiktoken's cl100k_base).
	exprLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Qwen2, Qwen2.5, Qwen3: Llama-3 with single digits.
	exprQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// GPT-4o (tiktoken's o200k_base).
	exprO200k = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Mistral's Tekken (Mistral NeMo, Pixtral, Ministral): o200k without the
	// contractions, with single digits.
	exprTekken = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// contraction returns the end of `'s|'t|'re|'ve|'m|'ll|'d` at s[i] (an
// apostrophe), or -1. With fold it is `(?i:...)`, where Unicode case folding also lets 's
// match U+017F LATIN SMALL LETTER LONG S (as Oniguruma and regexp2 both do).
func contraction(s string, i int, fold bool) int {
	j := i + 1
	if j >= len(s) {
		return -1
	}
	b := s[j]
	if fold {
		if b == 0xc5 && j+1 < len(s) && s[j+1] == 0xbf { // ſ
			return j + 2
		}
		b |= 0x20 // ASCII lower case; only letters can come out as these
	}
	switch b {
	case 's', 't', 'm', 'd':
		return j + 1
	case 'r', 'v', 'l':
		if j+1 < len(s) {
			want := byte('e')
			if b == 'l' {
				want = 'l'
			}
			c := s[j+1]
			if fold {
				c |= 0x20
			}
			if c == want {
				return j + 2
			}
		}
	}
	return -1
}

// asciiLetters returns the end of the run of ASCII letters from i.
func asciiLetters(s string, i int) int {
	for i < len(s) && (s[i]|0x20)-'a' < 26 {
		i++
	}
	return i
}

// asciiWordEnd is the fast path shared by the matchers for the commonest
// piece, an optional ASCII prefix byte and a run of ASCII letters ending
// before an ASCII byte that is not a letter (or at the end). When the piece
// starting at i has that shape and whole-run letters decide the match, it
// returns the run's end; otherwise -1 and the caller takes the general path.
// prefix reports whether s[i] may be taken as the optional prefix.
func asciiWordEnd(s string, i int, prefix bool) int {
	x := i
	if prefix {
		x++
	}
	e := asciiLetters(s, x)
	if e == x || e < len(s) && s[e] >= utf8.RuneSelf {
		return -1
	}
	return e
}

// runEnd returns the end of the run of runes from i whose class has any bit
// of want.
func runEnd(s string, i int, want uint8) int {
	for i < len(s) {
		if c := byteClass[s[i]]; c&cMulti == 0 { // ASCII fast path, inlined
			if c&want == 0 {
				break
			}
			i++
			continue
		}
		c, n := classMulti(s, i)
		if c&want == 0 {
			break
		}
		i += n
	}
	return i
}

// otherRunEnd returns the end of the run of [^\s\p{L}\p{N}] from i.
func otherRunEnd(s string, i int) int {
	for i < len(s) {
		if c := byteClass[s[i]]; c&cMulti == 0 {
			if c&(cS|cL|cN) != 0 {
				break
			}
			i++
			continue
		}
		c, n := classMulti(s, i)
		if c&(cS|cL|cN) != 0 {
			break
		}
		i += n
	}
	return i
}

// newlinesEnd returns the end of [\r\n]* (and '/' with slash) from i.
func newlinesEnd(s string, i int, slash bool) int {
	for i < len(s) && (s[i] == '\r' || s[i] == '\n' || slash && s[i] == '/') {
		i++
	}
	return i
}

// spaceEnd returns the end of the whitespace alternatives at s[i], which is
// whitespace: `\s*[\r\n]+` when newlines is set, then `\s+(?!\S)`, then `\s+`.
func spaceEnd(s string, i int, newlines bool) int {
	j, last, lastNL := i, i, -1
	for j < len(s) {
		c, n := byteClass[s[j]], 1
		if c&cMulti != 0 {
			c, n = classMulti(s, j)
		}
		if c&cS == 0 {
			break
		}
		if s[j] == '\r' || s[j] == '\n' {
			lastNL = j
		}
		last = j
		j += n
	}
	switch {
	case newlines && lastNL >= 0:
		// \s* backtracks to the last line break and [\r\n]+ takes it; what
		// follows it in the run is neither \r nor \n.
		return lastNL + 1
	case j == len(s):
		return j // \s+ to the end: nothing follows, so (?!\S) holds
	case last > i:
		// \s+ gives back its last rune so that (?!\S) sees whitespace.
		return last
	default:
		return j // a single whitespace rune before \S: plain \s+
	}
}

// gpt2Matcher matches exprGPT2.
type gpt2Matcher struct{}

func (gpt2Matcher) FindAll(s string, dst [][2]int) [][2]int {
	initTables()
	for i := 0; i < len(s); {
		e := gpt2Next(s, i)
		dst = append(dst, [2]int{i, e})
		i = e
	}
	return dst
}

func gpt2Next(s string, i int) int {
	b := s[i]
	if b == '\'' {
		if e := contraction(s, i, false); e > 0 {
			return e
		}
	}
	if b == ' ' || (b|0x20)-'a' < 26 {
		if e := asciiWordEnd(s, i, b == ' '); e > 0 {
			return e // ` ?\p{L}+` over ASCII letters
		}
	}
	c, n := byteClass[s[i]], 1
	if c&cMulti != 0 {
		c, n = classMulti(s, i)
	}
	j := i + n
	if b == ' ' && j < len(s) {
		// ` ?` before a letter, number or other run.
		c2, n2 := byteClass[s[j]], 1
		if c2&cMulti != 0 {
			c2, n2 = classMulti(s, j)
		}
		switch {
		case c2&cL != 0:
			return runEnd(s, j+n2, cL)
		case c2&cN != 0:
			return runEnd(s, j+n2, cN)
		case c2&cS == 0:
			return otherRunEnd(s, j+n2)
		}
	}
	switch {
	case c&cL != 0:
		return runEnd(s, j, cL)
	case c&cN != 0:
		return runEnd(s, j, cN)
	case c&cS == 0:
		return otherRunEnd(s, j)
	}
	return spaceEnd(s, i, false)
}

// llamaMatcher matches exprLlama3 (maxDigits 3) and exprQwen2 (maxDigits 1).
type llamaMatcher struct{ maxDigits int }

func (m llamaMatcher) FindAll(s string, dst [][2]int) [][2]int {
	initTables()
	for i := 0; i < len(s); {
		e := llamaNext(s, i, m.maxDigits)
		dst = append(dst, [2]int{i, e})
		i = e
	}
	return dst
}

func llamaNext(s string, i int, maxDigits int) int {
	b := s[i]
	if b == '\'' {
		if e := contraction(s, i, true); e > 0 {
			return e
		}
	}
	if c := byteClass[b]; c&(cN|cMulti) == 0 && b != '\r' && b != '\n' {
		// `[^\r\n\p{L}\p{N}]?\p{L}+` over ASCII letters.
		if e := asciiWordEnd(s, i, c&cL == 0); e > 0 {
			return e
		}
	}
	c, n := byteClass[s[i]], 1
	if c&cMulti != 0 {
		c, n = classMulti(s, i)
	}
	j := i + n
	switch {
	case c&cL != 0:
		return runEnd(s, j, cL)
	case c&cN != 0:
		for k := 1; k < maxDigits && j < len(s); k++ {
			c2, n2 := byteClass[s[j]], 1
			if c2&cMulti != 0 {
				c2, n2 = classMulti(s, j)
			}
			if c2&cN == 0 {
				break
			}
			j += n2
		}
		return j
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+ with the optional rune taken.
	if b != '\r' && b != '\n' && j < len(s) {
		c2, n2 := byteClass[s[j]], 1
		if c2&cMulti != 0 {
			c2, n2 = classMulti(s, j)
		}
		if c2&cL != 0 {
			return runEnd(s, j+n2, cL)
		}
	}
	if c&cS == 0 {
		return newlinesEnd(s, otherRunEnd(s, j), false)
	}
	if b == ' ' && j < len(s) {
		c2, n2 := byteClass[s[j]], 1
		if c2&cMulti != 0 {
			c2, n2 = classMulti(s, j)
		}
		if c2&(cS|cL|cN) == 0 {
			return newlinesEnd(s, otherRunEnd(s, j+n2), false)
		}
	}
	return spaceEnd(s, i, true)
}

// o200kMatcher matches exprO200k (contractions, maxDigits 3) and exprTekken
// (no contractions, maxDigits 1).
type o200kMatcher struct {
	contractions bool
	maxDigits    int
}

func (m o200kMatcher) FindAll(s string, dst [][2]int) [][2]int {
	initTables()
	for i := 0; i < len(s); {
		e := o200kNext(s, i, m.contractions, m.maxDigits)
		dst = append(dst, [2]int{i, e})
		i = e
	}
	return dst
}

// o200kWord tries one of the two word alternatives from x (after the
// optional prefix rune, if taken) and returns the end of the match or -1:
//
//	second=false: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ contraction?
//	second=true:  [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]* contraction?
//
// where contraction is (?i:'s|'t|'re|'ve|'m|'ll|'d), present if contractions.
func o200kWord(s string, x int, second, contractions bool) int {
	u, lastLw, lastLwEnd := x, -1, -1
	for u < len(s) {
		c, n := byteClass[s[u]], 1
		if c&cMulti != 0 {
			c, n = classMulti(s, u)
		}
		if c&cUp == 0 {
			break
		}
		if c&cLw != 0 {
			lastLw, lastLwEnd = u, u+n
		}
		u += n
	}
	var w int
	switch {
	case second:
		if u == x {
			return -1
		}
		w = runEnd(s, u, cLw)
	case u < len(s) && classAt(s, u)&cLw != 0:
		// The upper run stops at a lower-case letter: [..]+ takes its run.
		w = runEnd(s, u, cLw)
	case lastLw >= 0:
		// The upper run gives back runes until the last one that is also in
		// the lower class; [..]+ takes that one only, as the rune after it
		// (upper-only, or the one ending the run) is not in the lower class.
		w = lastLwEnd
	default:
		return -1
	}
	if contractions && w < len(s) && s[w] == '\'' {
		if e := contraction(s, w, true); e > 0 {
			return e
		}
	}
	return w
}

func classAt(s string, i int) uint8 {
	c, _ := byteClass[s[i]], 1
	if c&cMulti != 0 {
		c, _ = classMulti(s, i)
	}
	return c
}

func o200kNext(s string, i int, contractions bool, maxDigits int) int {
	b := s[i]
	if c := byteClass[b]; c&(cN|cMulti) == 0 && b != '\r' && b != '\n' {
		// Over ASCII letters the word alternatives reduce to [A-Z]*[a-z]*
		// (upper case is Lu only, lower case Ll only: [A-Z]+ with no
		// lower case after it fails the first and the second takes it).
		x := i
		if c&cL == 0 {
			x++
		}
		e := x
		for e < len(s) && s[e]-'A' < 26 {
			e++
		}
		for e < len(s) && s[e]-'a' < 26 {
			e++
		}
		if e > x && (e == len(s) || s[e] < utf8.RuneSelf) {
			if contractions && e < len(s) && s[e] == '\'' {
				if k := contraction(s, e, true); k > 0 {
					return k
				}
			}
			return e
		}
	}
	c, n := byteClass[s[i]], 1
	if c&cMulti != 0 {
		c, n = classMulti(s, i)
	}
	j := i + n
	prefix := c&(cL|cN) == 0 && b != '\r' && b != '\n' && j < len(s)
	if prefix && classAt(s, j)&(cUp|cLw) == 0 {
		prefix = false // a word alternative cannot start at j
	}
	for _, second := range [2]bool{false, true} {
		if !prefix && c&(cUp|cLw) == 0 {
			break
		}
		if prefix {
			if e := o200kWord(s, j, second, contractions); e >= 0 {
				return e
			}
		}
		if c&(cUp|cLw) != 0 {
			if e := o200kWord(s, i, second, contractions); e >= 0 {
				return e
			}
		}
	}
	if c&cN != 0 {
		for k := 1; k < maxDigits && j < len(s); k++ {
			c2, n2 := byteClass[s[j]], 1
			if c2&cMulti != 0 {
				c2, n2 = classMulti(s, j)
			}
			if c2&cN == 0 {
				break
			}
			j += n2
		}
		return j
	}
	if c&cS == 0 {
		return newlinesEnd(s, otherRunEnd(s, j), true)
	}
	if b == ' ' && j < len(s) {
		c2, n2 := byteClass[s[j]], 1
		if c2&cMulti != 0 {
			c2, n2 = classMulti(s, j)
		}
		if c2&(cS|cL|cN) == 0 {
			return newlinesEnd(s, otherRunEnd(s, j+n2), true)
		}
	}
	return spaceEnd(s, i, true)
}
