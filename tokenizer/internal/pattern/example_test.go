package pattern_test

import (
	"fmt"

	"github.com/tokenwise/tokenwise/tokenizer/internal/pattern"
)

// The Llama-3 pre-tokenizer pattern, as its tokenizer.json spells it, cuts
// text into the pieces BPE then encodes one by one.
func Example() {
	m, err := pattern.Compile(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`)
	if err != nil {
		panic(err)
	}
	s := "It'S 12345 cafés!\n\n  ok"
	for _, r := range m.FindAll(s, nil) {
		fmt.Printf("%q ", s[r[0]:r[1]])
	}
	fmt.Println()
	// Output:
	// "It" "'S" " " "123" "45" " cafés" "!\n\n" " " " ok"
}
