package pattern

import (
	"fmt"

	"github.com/dlclark/regexp2/v2"
)

// regexpMatcher is the general fallback: a backtracking engine, because the
// tokenizer.json patterns rely on Perl/Oniguruma features Go's regexp lacks
// (lookahead in `\s+(?!\S)`, ordered alternation).
type regexpMatcher struct {
	re *regexp2.Regexp
}

func compileRegexp(expr string) (*regexpMatcher, error) {
	// No RE2/ECMAScript option: those make \s, \d and \w ASCII-only, while
	// Oniguruma with UTF-8 uses the Unicode definitions. The backtracking stack
	// is unbounded because a pre-tokenizer must not fail on long inputs (a long
	// whitespace run under `\s+(?!\S)` backtracks once per character).
	translated, err := translate(expr)
	if err != nil {
		return nil, fmt.Errorf("pre-tokenizer pattern %q: %w", expr, err)
	}
	re, err := regexp2.Compile(translated, regexp2.None, regexp2.OptionMaxBacktrackingStackSize(-1))
	if err != nil {
		return nil, fmt.Errorf("pre-tokenizer pattern %q: %w", expr, err)
	}
	return &regexpMatcher{re: re}, nil
}

// FindAll implements Matcher. regexp2 matches over runes (one per invalid
// UTF-8 byte) and FindAllStringIndex maps them back to byte offsets; it also
// drops an empty match that directly follows the previous match, as Rust's
// onig find_iter does.
func (m *regexpMatcher) FindAll(s string, dst [][2]int) [][2]int {
	idx, err := m.re.FindAllStringIndex(s, -1)
	// An error can only come from a match timeout or stack limit, both
	// disabled; keep the matches found before it rather than panic.
	_ = err
	for _, r := range idx {
		dst = append(dst, [2]int{r[0], r[1]})
	}
	return dst
}
