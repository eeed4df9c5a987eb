package pattern

import (
	"fmt"
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
//   - \w, \W, \b, \B: Oniguruma's word class is Alphabetic, marks, decimal
//     digits and connector punctuation (wordItems); outside a class it also
//     takes the six Latin-1 No characters ²³¹¼½¾, from its 8-bit ctype table.
//     .NET's leaves out Mc, Me, Nl and the Alphabetic symbols (Ⓐ).
//   - \h, \H: Oniguruma's hex digit [0-9A-Fa-f]; .NET has no \h.
//   - ^ and $: always line anchors in Ruby syntax (after/before '\n').
//   - \p{^X}: Oniguruma's spelling of \P{X}.
//   - {,n}: Oniguruma's {0,n}.
//   - a class nested in a class, [a[bc]]: a union in Oniguruma, flattened.
//
// Rejected: negated or POSIX classes nested in a class, && intersections,
// \W/\H inside a class, and the escapes \K \X \y \Y \g \O.
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
			case 'W', 'H':
				if depth > 0 {
					return "", unsupported(i-1, `\`+string(e)+" inside a character class")
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
			case 'p', 'P':
				if i+2 < len(expr) && expr[i+1] == '{' && expr[i+2] == '^' {
					if e == 'p' {
						e = 'P'
					} else {
						e = 'p'
					}
					b.WriteString(`\` + string(e) + "{")
					i += 2
					continue
				}
			case 'K', 'X', 'y', 'Y', 'g', 'O':
				return "", unsupported(i-1, `\`+string(e))
			}
			b.WriteByte('\\')
			b.WriteByte(e)
		case depth == 0 && c == '{' && i+1 < len(expr) && expr[i+1] == ',':
			// Oniguruma reads {,n} as {0,n}; .NET as literal text.
			b.WriteString("{0")
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
