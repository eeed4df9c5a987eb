package tokenizer_test

import (
	"fmt"

	"github.com/tokenwise/tokenwise/tokenizer"
)

func ExampleLoad() {
	tk, err := tokenizer.Load("testdata/bytelevel.json")
	if err != nil {
		panic(err)
	}
	ids := tk.Encode("hello world<|end|>", false)
	fmt.Println(ids)
	fmt.Printf("%q\n", tk.Decode(ids, false))
	fmt.Printf("%q\n", tk.Decode(ids, true))
	_, offs := tk.EncodeOffsets("hello world", false)
	fmt.Println(offs)
	// Output:
	// [261 266 271]
	// "hello world<|end|>"
	// "hello world"
	// [[0 5] [6 11]]
}

func ExampleStreamDecoder() {
	tk, err := tokenizer.Load("testdata/bytelevel.json")
	if err != nil {
		panic(err)
	}
	d := tk.NewStreamDecoder(false)
	for _, id := range tk.Encode("né", false) { // "é" is two byte tokens
		fmt.Printf("%q ", d.Next(id))
	}
	fmt.Println()
	// Output:
	// "n" "" "é"
}
