package tokenizer

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/tokenwise/tokenwise/tokenizer/internal/pattern"
)

// span is a piece of text moving through the pipeline: the current (normalized,
// pre-tokenized) string, and, when offsets are wanted, the original byte range of each byte.
type span struct {
	s     string
	align [][2]int32 // per byte of s; nil when offsets are not tracked
	first bool       // starts at original offset 0 (Metaspace prepend_scheme "first")
	id    int32      // added token id, or -1 for text
}

// sub is the [a,b) slice of sp; no copying.
func (sp span) sub(a, b int) span {
	out := span{s: sp.s[a:b], id: -1, first: sp.first && a == 0}
	if sp.align != nil {
		out.align = sp.align[a:b]
		if a < b && sp.align[a][0] == 0 {
			out.first = true
		}
	}
	return out
}

// builder assembles a transformed string and, when tracking, each new byte's original range.
type builder struct {
	b     []byte
	al    [][2]int32
	track bool
}

func (w *builder) emit(s string, from [2]int32) {
	w.b = append(w.b, s...)
	if w.track {
		for range len(s) {
			w.al = append(w.al, from)
		}
	}
}

func (w *builder) span(old span) span {
	out := span{s: string(w.b), first: old.first, id: old.id}
	if w.track {
		out.align = w.al
	}
	return out
}

// rangeOf is the original range of sp.s[i:j] (zero when untracked).
func (sp span) rangeOf(i, j int) [2]int32 {
	if sp.align == nil || i >= j {
		return [2]int32{}
	}
	return [2]int32{sp.align[i][0], sp.align[j-1][1]}
}

func newBuilder(sp span, capHint int) *builder {
	return &builder{b: make([]byte, 0, capHint), track: sp.align != nil}
}

// mapRunes rebuilds sp by calling f on every character; f appends what replaces it.
func mapRunes(sp span, f func(r rune, raw string, w *builder, from [2]int32)) span {
	w := newBuilder(sp, len(sp.s)+8)
	for i := 0; i < len(sp.s); {
		r, size := utf8.DecodeRuneInString(sp.s[i:])
		f(r, sp.s[i:i+size], w, sp.rangeOf(i, i+size))
		i += size
	}
	return w.span(sp)
}

type normalizer interface {
	normalize(sp span) span
}

type normSequence []normalizer

func (q normSequence) normalize(sp span) span {
	for _, n := range q {
		sp = n.normalize(sp)
	}
	return sp
}

// unicodeNorm is NFC/NFD/NFKC/NFKD.
type unicodeNorm struct{ form norm.Form }

func (u unicodeNorm) normalize(sp span) span {
	if u.isNormal(sp.s) { // the common case: nothing to do, no copy
		return sp
	}
	// Go's norm package follows the Stream-Safe Text Format and inserts U+034F (CGJ) after 30
	// combining marks in a row; Rust's unicode-normalization, which HF uses, does not. Drop
	// the CGJs it invented (only when the input had none, so real ones survive).
	dropCGJ := !strings.Contains(sp.s, "\u034f")
	if sp.align == nil {
		sp.s = u.form.String(sp.s)
		if dropCGJ && strings.Contains(sp.s, "\u034f") {
			sp.s = strings.ReplaceAll(sp.s, "\u034f", "")
		}
		return sp
	}
	// Tracking offsets: normalize segment by segment and give each output character the range
	// of the input character where its decomposition starts. This follows HF's alignments
	// (unicode-normalization-alignments): a composed "é" from "e" + U+0301 maps to the "e",
	// both halves of a decomposed "é" map to the "é", and "ä" + U+0301 made from
	// "a" + U+0308 + U+0301 keeps the U+0301 on its own character.
	decomp := norm.NFD
	if u.form == norm.NFKC || u.form == norm.NFKD {
		decomp = norm.NFKD
	}
	units := func(r rune) int {
		var buf [utf8.UTFMax]byte
		n := utf8.EncodeRune(buf[:], r)
		return max(1, utf8.RuneCount(decomp.Bytes(buf[:n])))
	}
	w := newBuilder(sp, len(sp.s)+8)
	var it norm.Iter
	it.InitString(u.form, sp.s)
	type origRune struct{ at, size, firstUnit int }
	var orig []origRune
	for !it.Done() {
		start := it.Pos()
		seg := it.Next()
		end := it.Pos()
		orig = orig[:0]
		unit := 0
		for i := start; i < end; {
			r, size := utf8.DecodeRuneInString(sp.s[i:end])
			orig = append(orig, origRune{i, size, unit})
			unit += units(r)
			i += size
		}
		unit, k := 0, 0
		for j := 0; j < len(seg); {
			r, size := utf8.DecodeRune(seg[j:])
			if r == 0x034f && dropCGJ {
				j += size
				continue
			}
			var from [2]int32
			if len(orig) > 0 {
				for k+1 < len(orig) && orig[k+1].firstUnit <= unit {
					k++
				}
				from = sp.rangeOf(orig[k].at, orig[k].at+orig[k].size)
			} else if start > 0 {
				// The iterator emitted text without consuming input here: it belongs to
				// the character before.
				from = sp.align[start-1]
			} else if len(sp.align) > 0 {
				from = sp.align[0]
			}
			w.emit(string(seg[j:j+size]), from)
			unit += units(r)
			j += size
		}
	}
	return w.span(sp)
}

// safeBMP[f] has a bit per BMP character that is normal in form f, never combines with the
// character before it, and has combining class 0. A text made only of such characters is
// normal, so isNormal can answer with one bit test per character; norm's own IsNormalString
// took a fifth of Qwen3's encode time (BenchmarkEncode).
var (
	safeBMP     [4]*[1 << 16 / 64]uint64
	safeBMPOnce [4]sync.Once
)

func formIndex(f norm.Form) int { return int(f) & 3 }

func (u unicodeNorm) isNormal(s string) bool {
	i := formIndex(u.form)
	safeBMPOnce[i].Do(func() {
		tab := new([1 << 16 / 64]uint64)
		var buf [4]byte
		for r := rune(0); r < 1<<16; r++ {
			if r >= 0xD800 && r <= 0xDFFF {
				continue
			}
			n := utf8.EncodeRune(buf[:], r)
			p := u.form.Properties(buf[:n])
			if p.BoundaryBefore() && p.CCC() == 0 && u.form.IsNormal(buf[:n]) {
				tab[r/64] |= 1 << (r % 64)
			}
		}
		safeBMP[i] = tab
	})
	tab := safeBMP[i]
	for k := 0; k < len(s); {
		c := s[k]
		if c < 0x80 {
			k++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[k:])
		if r >= 1<<16 || tab[r/64]&(1<<(r%64)) == 0 {
			return u.form.IsNormalString(s)
		}
		k += size
	}
	return true
}

type lowercase struct{}

func (lowercase) normalize(sp span) span {
	changed := false
	for _, r := range sp.s {
		if unicode.ToLower(r) != r {
			changed = true
			break
		}
	}
	if !changed {
		return sp
	}
	return mapRunes(sp, func(r rune, raw string, w *builder, from [2]int32) {
		if r == 'İ' { // Rust's char::to_lowercase gives two characters here
			w.emit("i\u0307", from)
			return
		}
		l := unicode.ToLower(r)
		if l == r {
			w.emit(raw, from)
			return
		}
		w.emit(string(l), from)
	})
}

// replace is HF's Replace normalizer: every match of a literal or regex becomes content.
type replace struct {
	lit     string          // literal pattern, when re is nil
	re      pattern.Matcher // regex pattern
	content string
}

func (r *replace) matches(s string) [][2]int {
	if r.re != nil {
		return r.re.FindAll(s, nil)
	}
	if r.lit == "" {
		return nil
	}
	var out [][2]int
	for i := 0; ; {
		k := strings.Index(s[i:], r.lit)
		if k < 0 {
			return out
		}
		out = append(out, [2]int{i + k, i + k + len(r.lit)})
		i += k + len(r.lit)
	}
}

func (r *replace) normalize(sp span) span {
	if r.re == nil && sp.align == nil {
		if r.lit == "" || !strings.Contains(sp.s, r.lit) {
			return sp
		}
		sp.s = strings.ReplaceAll(sp.s, r.lit, r.content)
		return sp
	}
	ms := r.matches(sp.s)
	if len(ms) == 0 {
		return sp
	}
	w := newBuilder(sp, len(sp.s)+len(ms)*len(r.content))
	prev := 0
	for _, m := range ms {
		copySpan(w, sp, prev, m[0])
		// HF aligns the replacement with the last byte before the match's end.
		var from [2]int32
		if sp.align != nil && m[1] > 0 {
			from = sp.align[m[1]-1]
		}
		w.emit(r.content, from)
		prev = m[1]
	}
	copySpan(w, sp, prev, len(sp.s))
	return w.span(sp)
}

// copySpan copies sp.s[a:b] unchanged, alignment included.
func copySpan(w *builder, sp span, a, b int) {
	w.b = append(w.b, sp.s[a:b]...)
	if w.track {
		w.al = append(w.al, sp.align[a:b]...)
	}
}

type prepend struct{ s string }

func (p prepend) normalize(sp span) span {
	if sp.s == "" {
		return sp
	}
	w := newBuilder(sp, len(sp.s)+len(p.s))
	_, size := utf8.DecodeRuneInString(sp.s)
	w.emit(p.s, sp.rangeOf(0, size))
	copySpan(w, sp, 0, len(sp.s))
	return w.span(sp)
}

// strip removes leading/trailing whitespace (Rust's char::is_whitespace).
type strip struct{ left, right bool }

func (st strip) normalize(sp span) span {
	a, b := 0, len(sp.s)
	if st.left {
		for a < b {
			r, size := utf8.DecodeRuneInString(sp.s[a:b])
			if !isWhitespace(r) {
				break
			}
			a += size
		}
	}
	if st.right {
		for b > a {
			r, size := utf8.DecodeLastRuneInString(sp.s[a:b])
			if !isWhitespace(r) {
				break
			}
			b -= size
		}
	}
	if a == 0 && b == len(sp.s) {
		return sp
	}
	out := sp.sub(a, b)
	out.id, out.first = sp.id, sp.first
	return out
}

type stripAccents struct{}

func (stripAccents) normalize(sp span) span {
	return mapRunes(sp, func(r rune, raw string, w *builder, from [2]int32) {
		if !unicode.Is(unicode.M, r) {
			w.emit(raw, from)
		}
	})
}

// byteLevelNorm is HF's ByteLevel normalizer: every byte becomes its ByteLevel character.
type byteLevelNorm struct{}

func (byteLevelNorm) normalize(sp span) span {
	w := newBuilder(sp, len(sp.s)*2)
	for i := 0; i < len(sp.s); i++ {
		w.emit(byteToString[sp.s[i]], sp.rangeOf(i, i+1))
	}
	return w.span(sp)
}

// bertNorm is HF's BertNormalizer.
type bertNorm struct {
	cleanText, chineseChars, stripAccents, lowercase bool
}

func (bn bertNorm) normalize(sp span) span {
	if bn.cleanText {
		sp = mapRunes(sp, func(r rune, raw string, w *builder, from [2]int32) {
			switch {
			case r == 0 || r == 0xfffd || isBertControl(r):
			case isWhitespace(r):
				w.emit(" ", from)
			default:
				w.emit(raw, from)
			}
		})
	}
	if bn.chineseChars {
		sp = mapRunes(sp, func(r rune, raw string, w *builder, from [2]int32) {
			if isChineseChar(r) {
				w.emit(" ", from)
				w.emit(raw, from)
				w.emit(" ", from)
				return
			}
			w.emit(raw, from)
		})
	}
	if bn.stripAccents {
		sp = unicodeNorm{norm.NFD}.normalize(sp)
		sp = stripAccents{}.normalize(sp)
	}
	if bn.lowercase {
		sp = lowercase{}.normalize(sp)
	}
	return sp
}

func isBertControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

func isChineseChar(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) || (r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) || (r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) || (r >= 0x2F800 && r <= 0x2FA1F)
}

// isWhitespace is Rust's char::is_whitespace (the Unicode White_Space property).
func isWhitespace(r rune) bool {
	if r < 0x80 {
		return r == ' ' || (r >= '\t' && r <= '\r')
	}
	return unicode.Is(unicode.White_Space, r)
}

// isNumeric is Rust's char::is_numeric (general categories Nd, Nl, No).
func isNumeric(r rune) bool {
	if r < 0x80 {
		return r >= '0' && r <= '9'
	}
	return unicode.IsNumber(r)
}
