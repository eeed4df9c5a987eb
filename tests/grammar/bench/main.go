// Command bench measures tokenwise's grammar on a tokenizer and a set of JSON Schemas — the
// compile time of each schema and the time of each per-step token mask along sampled
// documents — and writes the documents' token ids, so that tests/grammar/peers.py can replay
// the same steps through llguidance (and XGrammar where it installs). scripts/bench-grammar.sh
// runs both and prints them side by side.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/grammar"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tokenizer"
)

type schemaRun struct {
	Schema    json.RawMessage `json:"schema"`
	CompileMs float64         `json:"compile_ms"`
	Docs      [][]int         `json:"docs"`
	MaskUs    []float64       `json:"mask_us"` // every step of every document, in order
}

func main() {
	tokPath := flag.String("tokenizer", "", "tokenizer.json")
	docs := flag.Int("docs", 20, "documents sampled per schema")
	out := flag.String("out", "", "output JSON")
	flag.Parse()
	if *tokPath == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: bench --tokenizer tokenizer.json --out FILE [--docs N]")
		os.Exit(2)
	}
	tok, err := tokenizer.Load(filepath.Dir(*tokPath))
	if err != nil {
		fail(err)
	}
	eos := -1
	if id, ok := tok.TokenID(tok.Config().EOS); ok {
		eos = id
	}
	gs := engine.NewGrammars(tok, 0)
	gs.Vocab() // built once per tokenizer, outside the compile times
	var runs []schemaRun
	for si, s := range testref.Schemas {
		spec := grammar.Spec{JSONSchema: []byte(s)}
		// The documents, sampled from one table.
		g, err := grammar.Compile(spec, grammar.Options{})
		if err != nil {
			fail(err)
		}
		tab, err := grammar.NewTable(g, gs.Vocab())
		if err != nil {
			fail(err)
		}
		rng := rand.New(rand.NewPCG(7, uint64(si)))
		var r schemaRun
		for d := 0; d < *docs; d++ {
			if ids := sample(tab, tok, eos, rng); ids != nil {
				r.Docs = append(r.Docs, ids)
			}
		}
		// The measurement, from cold: compile, then a mask before every token of every
		// document, on a fresh table (its cache fills as a server's would).
		start := time.Now()
		g, err = grammar.Compile(spec, grammar.Options{})
		if err != nil {
			fail(err)
		}
		if tab, err = grammar.NewTable(g, gs.Vocab()); err != nil {
			fail(err)
		}
		r.Schema, r.CompileMs = json.RawMessage(s), float64(time.Since(start).Microseconds())/1000
		for _, ids := range r.Docs {
			m := tab.NewMatcher([]int{eos})
			for _, id := range ids {
				t0 := time.Now()
				m.Mask()
				r.MaskUs = append(r.MaskUs, float64(time.Since(t0).Nanoseconds())/1000)
				if err := m.Accept(id); err != nil {
					fail(err)
				}
			}
		}
		runs = append(runs, r)
	}
	b, err := json.Marshal(map[string]any{"tokenizer": *tokPath, "eos": eos, "schemas": runs})
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		fail(err)
	}
}

// sample draws one document from the masks (uniform over allowed tokens, half the time over
// those that close a string, object or array, so it ends); text the grammar forces is
// appended as the tokenizer encodes it, as jump-forward does (llguidance allows only that
// tokenization of forced text). nil if it does not end within 400 tokens.
func sample(tab *grammar.Table, tok *tokenizer.Tokenizer, eos int, rng *rand.Rand) []int {
	m := tab.NewMatcher([]int{eos})
	var ids []int
	for len(ids) < 400 {
		if f := m.Forced(); len(f) > 0 {
			forced := tok.Encode(string(f), false)
			var spelled []byte
			for _, id := range forced {
				spelled = append(spelled, tok.TokenBytes(id)...)
			}
			if string(spelled) == string(f) {
				for _, id := range forced {
					if err := m.Accept(id); err != nil {
						fail(err)
					}
				}
				ids = append(ids, forced...)
				continue
			}
		}
		mask := m.Mask()
		if m.Complete() {
			return ids
		}
		var all, closing []int
		for w, x := range mask {
			for x != 0 {
				id := w*64 + bits.TrailingZeros64(x)
				x &= x - 1
				all = append(all, id)
				if closes(tab, id) {
					closing = append(closing, id)
				}
			}
		}
		pick := all[rng.IntN(len(all))]
		if len(closing) > 0 && rng.IntN(2) == 0 {
			pick = closing[rng.IntN(len(closing))]
		}
		if err := m.Accept(pick); err != nil {
			fail(err)
		}
		ids = append(ids, pick)
	}
	return nil
}

func closes(tab *grammar.Table, id int) bool {
	for _, c := range tab.Vocab().Bytes(id) {
		if c == '"' || c == '}' || c == ']' {
			return true
		}
	}
	return false
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
