package pattern

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// Oniguruma (Ruby syntax, as HF tokenizers compiles Split patterns) and
// regexp2 (.NET syntax) agree on most of what tokenizer.json files use, and
// on the meaning of \s, \d, \p{..} over all of Unicode (TestReferenceClasses).
// translate rewrites the constructs where they differ, and rejects the ones
// it cannot express, so the fallback never silently matches differently.
//
// Rewritten:
//
//   - \w, \W, \b, \B: Oniguruma's word class is Alphabetic, marks, decimal
//     digits and connector punctuation (wordItems); outside a class it also
//     takes the six Latin-1 No characters ²³¹¼½¾, from its 8-bit ctype table.
//     .NET's leaves out Mc, Me, Nl and the Alphabetic symbols (Ⓐ).
//
//   - \h, \H: Oniguruma's hex digit [0-9A-Fa-f]; .NET has no \h.
//
//   - ^ and $: always line anchors in Ruby syntax (after/before '\n').
//
//   - \p{^X}: Oniguruma's spelling of \P{X}.
//
//   - {,n}: Oniguruma's {0,n}.
//
//   - (?m): Ruby's "dot matches newline", .NET's (?s).
//
//   - a class nested in a class, [a[bc]]: a union in Oniguruma, flattened.
//
//   - \p{L}, \d and the like: Oniguruma (Unicode 16.0) assigns code points
//     that Go's tables (unicodeDeltaFrom) do not; they are added literally.
//
//   - \W \H \S \D \P{X} inside a class: written out as explicit ranges.
//
// Rejected: negated or POSIX classes nested in a class, && intersections,
// \P{X} inside a class for an X Go has no table for, and the escapes
// \K \X \y \Y \g \O. regexp2 itself rejects Oniguruma-only property names
// such as \p{Alpha}.
//
// Known differences left (none in the patterns of real tokenizer.json files):
// (?i) in Oniguruma also applies multi-character and title-case folds
// ((?i)straße matches STRASSE, (?i)ǅ matches Ǆ and ǆ), and scripts such as
// \p{Han} stay at Go's Unicode version.
func translate(expr string) (string, error) {
	word := wordItems
	var b strings.Builder
	depth := 0 // nesting of character classes
	unsupported := func(i int, what string) error {
		return fmt.Errorf("offset %d: %s is not supported", i, what)
	}
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '\\':
			if i+1 >= len(expr) {
				return "", fmt.Errorf("offset %d: trailing backslash", i)
			}
			e := expr[i+1]
			i++
			switch e {
			case 'w':
				if depth > 0 {
					b.WriteString(word)
				} else {
					b.WriteString("[" + word + latin1Word + "]")
				}
				continue
			case 'h':
				if depth > 0 {
					b.WriteString("0-9A-Fa-f")
				} else {
					b.WriteString("[0-9A-Fa-f]")
				}
				continue
			case 'W', 'H', 'S':
				if depth > 0 {
					// regexp2 can mis-merge a negated escape with others in one
					// class ([\P{Zs}\s] misses spaces), so negations inside a
					// class are written out as the ranges they stand for.
					var set []*unicode.RangeTable
					switch e {
					case 'W':
						set = wordTables
					case 'H':
						set = []*unicode.RangeTable{hexTable}
					default:
						set = []*unicode.RangeTable{unicode.White_Space}
					}
					writeComplement(&b, set)
					continue
				}
				if e == 'S' {
					break
				}
				if e == 'W' {
					b.WriteString("[^" + word + latin1Word + "]")
				} else {
					b.WriteString("[^0-9A-Fa-f]")
				}
				continue
			case 'b', 'B':
				if depth > 0 { // backspace inside a class, the same in both
					break
				}
				w := "[" + word + latin1Word + "]"
				if e == 'b' {
					b.WriteString("(?:(?<=" + w + ")(?!" + w + ")|(?<!" + w + ")(?=" + w + "))")
				} else {
					b.WriteString("(?:(?<=" + w + ")(?=" + w + ")|(?<!" + w + ")(?!" + w + "))")
				}
				continue
			case 'd', 'D':
				if e == 'D' && depth > 0 {
					writeComplement(&b, catTables("Nd"))
					continue
				}
				writeClass(&b, `\d`, e == 'D', depth > 0, deltaItems("Nd"))
				continue
			case 'p', 'P':
				// \p{X}, \p{^X}, \P{X}, \P{^X}; X may name a general category
				// that gained code points since Go's Unicode version.
				end := strings.IndexByte(expr[i:], '}')
				if i+1 >= len(expr) || expr[i+1] != '{' || end < 0 {
					break // \pL and the like: left to regexp2
				}
				name := expr[i+2 : i+end]
				neg := e == 'P'
				if strings.HasPrefix(name, "^") {
					name, neg = name[1:], !neg
				}
				i += end
				if neg && depth > 0 {
					set := propertyTables(name)
					if set == nil {
						return "", unsupported(i-end-1, `\P{`+name+`} inside a character class`)
					}
					writeComplement(&b, set)
					continue
				}
				writeClass(&b, `\p{`+name+`}`, neg, depth > 0, categoryDelta(name))
				continue
			case 'K', 'X', 'y', 'Y', 'g', 'O':
				return "", unsupported(i-1, `\`+string(e))
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		case depth == 0 && c == '{' && i+1 < len(expr) && expr[i+1] == ',':
			// Oniguruma reads {,n} as {0,n}; .NET as literal text.
			b.WriteString("{0")
		case depth == 0 && c == '(' && strings.HasPrefix(expr[i:], "(?"):
			// Option groups (?imx-imx) and (?imx-imx:...): Ruby's m is .NET's s
			// (dot matches newline); Ruby has no s option.
			j := i + 2
			for j < len(expr) && strings.IndexByte("imsx-", expr[j]) >= 0 {
				j++
			}
			if j == i+2 || j >= len(expr) || expr[j] != ':' && expr[j] != ')' {
				b.WriteByte(c) // (?: (?= (?<name> and the like
				break
			}
			opts := expr[i+2 : j]
			if strings.IndexByte(opts, 's') >= 0 {
				return "", unsupported(i, "option s")
			}
			b.WriteString("(?" + strings.ReplaceAll(opts, "m", "s"))
			i = j - 1
		case depth == 0 && c == '^':
			b.WriteString("(?m:^)")
		case depth == 0 && c == '$':
			b.WriteString("(?m:$)")
		case c == '[':
			if depth > 0 {
				if i+1 < len(expr) && (expr[i+1] == '^' || expr[i+1] == ':') {
					return "", unsupported(i, "a negated or POSIX class inside a character class")
				}
				depth++ // flattened into the enclosing class
				continue
			}
			depth = 1
			b.WriteByte('[')
			if i+1 < len(expr) && expr[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(expr) && expr[i+1] == ']' { // a leading ] is literal
				b.WriteString(`\]`)
				i++
			}
		case depth > 0 && c == ']':
			depth--
			if depth == 0 {
				b.WriteByte(']')
			}
		case depth > 0 && c == '&' && i+1 < len(expr) && expr[i+1] == '&':
			return "", unsupported(i, "class intersection &&")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// wordItems is Oniguruma's Unicode word class as items of a .NET character
// class: Alphabetic (letters, Nl and Other_Alphabetic) + M + Nd + Pc. The
// Other_Alphabetic runes outside those categories (circled letters and the
// like) have no .NET property, so they are listed literally.
var wordItems = func() string {
	var b strings.Builder
	b.WriteString(`\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}`)
	b.WriteString(deltaItems("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "Pc"))
	for _, r16 := range unicode.Other_Alphabetic.R16 {
		for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
			if !unicode.In(r, unicode.L, unicode.Nl, unicode.M, unicode.Nd, unicode.Pc) {
				b.WriteRune(r)
			}
		}
	}
	for _, r32 := range unicode.Other_Alphabetic.R32 {
		for r := rune(r32.Lo); r <= rune(r32.Hi); r += rune(r32.Stride) {
			if !unicode.In(r, unicode.L, unicode.Nl, unicode.M, unicode.Nd, unicode.Pc) {
				b.WriteRune(r)
			}
		}
	}
	return b.String()
}()

// latin1Word is what Oniguruma's \w adds outside a class: the No characters
// of Latin-1, word characters in its 8-bit table.
const latin1Word = "\u00b2\u00b3\u00b9\u00bc\u00bd\u00be"

// writeClass writes item (a class escape such as \d or \p{L}) extended with
// extra class items, negated if neg, for use inside a class when inClass
// (never negated there: see writeComplement).
func writeClass(b *strings.Builder, item string, neg, inClass bool, extra string) {
	switch {
	case inClass:
		b.WriteString(item + extra)
	case extra == "" && neg:
		b.WriteString(strings.Replace(strings.Replace(item, `\d`, `\D`, 1), `\p{`, `\P{`, 1))
	case extra == "":
		b.WriteString(item)
	case neg:
		b.WriteString("[^" + item + extra + "]")
	default:
		b.WriteString("[" + item + extra + "]")
	}
}

// hexTable is Oniguruma's \h.
var hexTable = &unicode.RangeTable{R16: []unicode.Range16{{'0', '9', 1}, {'A', 'F', 1}, {'a', 'f', 1}}}

// wordTables is Oniguruma's \w inside a class (see wordItems).
var wordTables = append(catTables("Lu", "Ll", "Lt", "Lm", "Lo", "Nl", "Mn", "Mc", "Me", "Nd", "Pc"), unicode.Other_Alphabetic)

// propertyTables returns the tables for the name in \p{name}: a general
// category or major class (with its Unicode delta), a script or a property;
// nil if Go has no table of that name.
func propertyTables(name string) []*unicode.RangeTable {
	if len(name) == 1 {
		var cats []string
		for c := range unicode.Categories {
			if len(c) == 2 && c[0] == name[0] && c != "LC" {
				cats = append(cats, c)
			}
		}
		sort.Strings(cats)
		if len(cats) > 0 {
			return catTables(cats...)
		}
	}
	if _, ok := unicode.Categories[name]; ok {
		return catTables(name)
	}
	if t, ok := unicode.Scripts[name]; ok {
		return []*unicode.RangeTable{t}
	}
	if t, ok := unicode.Properties[name]; ok {
		return []*unicode.RangeTable{t}
	}
	return nil
}

// writeComplement writes, as class items, every code point in none of the
// tables (surrogates left out: input never holds them).
func writeComplement(b *strings.Builder, tables []*unicode.RangeTable) {
	lo := rune(0)
	flush := func(hi rune) { // writes [lo, hi) minus the surrogates
		for _, r := range [][2]rune{{lo, min(hi, 0xd800)}, {max(lo, 0xe000), hi}} {
			if r[0] >= r[1] {
				continue
			}
			writeClassRune(b, r[0])
			if r[1]-1 > r[0] {
				b.WriteByte('-')
				writeClassRune(b, r[1]-1)
			}
		}
	}
	in := make([]bool, unicode.MaxRune+1) // marking ranges beats a lookup per rune
	for _, t := range tables {
		for _, r := range t.R16 {
			for c := int(r.Lo); c <= int(r.Hi); c += int(r.Stride) {
				in[c] = true
			}
		}
		for _, r := range t.R32 {
			for c := int(r.Lo); c <= int(r.Hi); c += int(r.Stride) {
				in[c] = true
			}
		}
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if in[r] {
			flush(r)
			lo = r + 1
		}
	}
	flush(unicode.MaxRune + 1)
}

// writeClassRune writes r so that it reads as itself inside a .NET class.
func writeClassRune(b *strings.Builder, r rune) {
	switch {
	case r < 0x80 && (r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z'):
		b.WriteRune(r)
	case r < 0x100:
		fmt.Fprintf(b, `\x%02x`, r)
	case r < 0x10000:
		fmt.Fprintf(b, `\u%04x`, r)
	default:
		b.WriteRune(r)
	}
}

// categoryDelta returns the class items for what the general category (or
// major class, such as L) named gained in unicodeDelta; "" for other names.
func categoryDelta(name string) string {
	var cats []string
	for c := range unicodeDelta {
		if c == name || len(name) == 1 && c[0] == name[0] {
			cats = append(cats, c)
		}
	}
	sort.Strings(cats)
	return deltaItems(cats...)
}

// deltaItems lists, as literal class ranges, the code points the categories
// gained in unicodeDelta.
func deltaItems(cats ...string) string {
	var b strings.Builder
	for _, c := range cats {
		t, ok := unicodeDelta[c]
		if !ok {
			continue
		}
		for _, r := range t.R16 {
			b.WriteRune(rune(r.Lo))
			if r.Hi > r.Lo {
				b.WriteByte('-')
				b.WriteRune(rune(r.Hi))
			}
		}
		for _, r := range t.R32 {
			b.WriteRune(rune(r.Lo))
			if r.Hi > r.Lo {
				b.WriteByte('-')
				b.WriteRune(rune(r.Hi))
			}
		}
	}
	return b.String()
}
