// Package pattern finds the pieces a Split pre-tokenizer cuts text into: the
// successive non-overlapping leftmost matches of a tokenizer.json regex, exactly
// as Hugging Face tokenizers (Rust, Oniguruma engine) yields them.
//
// Compile returns a hand-written scanner when the expression is one of the
// patterns used by the common model families (GPT-2, Llama-3/cl100k,
// Qwen2/Qwen3, GPT-4o/o200k) and a backtracking regexp2 matcher otherwise.
// Pre-tokenization is where most encode time goes (tiktoken's notes say the
// same of its own regex), so the common patterns get straight-line code; the
// differential tests hold each scanner to the regexp2 matcher's output, and the
// reference test holds both to the Rust library.
package pattern

// Matcher finds the matches of one pre-tokenizer pattern.
type Matcher interface {
	// FindAll appends the [start,end) byte ranges of successive
	// non-overlapping leftmost matches of the regex in s (what HF tokenizers'
	// onig find_iter yields) and returns dst. Matches never overlap, come in
	// increasing order, and are never empty right after a previous match.
	FindAll(s string, dst [][2]int) [][2]int
}

// Compile returns a Matcher for expr, written in the Oniguruma syntax that
// tokenizer.json Split pre-tokenizers use. Known patterns get a hand-written
// matcher; anything else goes to the regexp2 fallback.
func Compile(expr string) (Matcher, error) {
	if m, ok := fastMatchers[expr]; ok {
		return m, nil
	}
	return compileRegexp(expr)
}

// fastMatchers maps the exact pattern strings found in real tokenizer.json
// files to their hand-written matchers.
var fastMatchers = map[string]Matcher{}
