package pattern

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestClassTable checks, for every code point, that the class bits the
// hand-written matchers read agree with the regexp2 classes of the patterns
// (which TestReferenceClasses holds to Oniguruma).
func TestClassTable(t *testing.T) {
	t.Parallel()
	initTables()
	var all strings.Builder
	for c := rune(0); c <= utf8.MaxRune; c++ {
		if c >= 0xd800 && c < 0xe000 {
			continue
		}
		all.WriteRune(c)
	}
	text := all.String()
	for _, k := range []struct {
		bit  uint8
		expr string
	}{
		{cL, `\p{L}`},
		{cN, `\p{N}`},
		{cS, `\s`},
		{cUp, `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`},
		{cLw, `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`},
	} {
		m, err := compileRegexp(k.expr)
		if err != nil {
			t.Fatal(err)
		}
		in := map[int]bool{}
		for _, r := range m.FindAll(text, nil) {
			in[r[0]] = true
		}
		bad := 0
		for i := 0; i < len(text); {
			c, n := class(text, i)
			if (c&k.bit != 0) != in[i] {
				r, _ := utf8.DecodeRuneInString(text[i:])
				if bad++; bad <= 10 {
					t.Errorf("%s: U+%04X: table says %v, regexp2 %v", k.expr, r, c&k.bit != 0, in[i])
				}
			}
			i += n
		}
	}
	// Invalid UTF-8 reads as U+FFFD, one byte at a time, in no class.
	if c, n := class("\xff", 0); c != 0 || n != 1 {
		t.Errorf("class(\\xff) = %d, %d; want 0, 1", c, n)
	}
}
