package grammar

import (
	"bytes"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// realVocab loads a reference tokenizer (llama3, qwen3) and its vocabulary's bytes.
func realVocab(t *testing.T, name string) (*tokenizer.Tokenizer, *Vocab) {
	t.Helper()
	tok, err := tokenizer.Load(filepath.Dir(testref.Tokenizer(t, name)))
	if err != nil {
		t.Fatal(err)
	}
	return tok, VocabOf(tok)
}

// VocabOf is what the engine builds: special tokens have no bytes.
func VocabOf(tok *tokenizer.Tokenizer) *Vocab {
	toks := make([][]byte, tok.VocabSize())
	for id := range toks {
		if !tok.IsSpecial(id) {
			toks[id] = tok.TokenBytes(id)
		}
	}
	return NewVocab(toks)
}

// walk samples one document from the mask: uniformly among allowed tokens, but half the
// time among the allowed tokens that close something (a quote, brace or bracket), so the
// walk finishes; the end of sequence once allowed, with probability 1/2.
func walk(t *testing.T, tab *Table, closing []uint64, eos int, rng *rand.Rand, maxSteps int) (string, bool, []time.Duration) {
	m := tab.NewMatcher([]int{eos})
	var doc []byte
	var times []time.Duration
	both := make([]uint64, len(closing))
	for step := 0; step < maxSteps; step++ {
		start := time.Now()
		mask := m.Mask()
		times = append(times, time.Since(start))
		if m.Complete() && rng.IntN(2) == 0 {
			return string(doc), true, times
		}
		from := slices.Clone(mask) // the matcher's own: not to be written to
		from[eos>>6] &^= 1 << (eos & 63)
		for i := range both {
			both[i] = from[i] & closing[i]
		}
		if n := popcount(both); n > 0 && rng.IntN(2) == 0 {
			from = both
		}
		n := popcount(from)
		if n == 0 {
			if m.Complete() {
				return string(doc), true, times
			}
			t.Fatalf("empty mask after %q", doc)
		}
		pick := nthBit(from, rng.IntN(n))
		if err := m.Accept(pick); err != nil {
			t.Fatalf("after %q: %v", doc, err)
		}
		doc = append(doc, tab.v.tokens[pick]...)
	}
	return string(doc), false, times
}

func nthBit(mask []uint64, k int) int {
	for w, x := range mask {
		c := bits.OnesCount64(x)
		if k >= c {
			k -= c
			continue
		}
		for ; k > 0; k-- {
			x &= x - 1
		}
		return w*64 + bits.TrailingZeros64(x)
	}
	panic("nthBit: k out of range")
}

func closingTokens(v *Vocab) []uint64 {
	out := make([]uint64, (v.Size()+63)/64)
	for id, b := range v.tokens {
		if bytes.ContainsAny(b, `"}]`) {
			out[id>>6] |= 1 << (id & 63)
		}
	}
	return out
}

// TestRealVocabValidity: documents sampled from the masks of two real vocabularies
// (Llama-3's 128k and Qwen3's 151k byte-level BPE) all validate under Python jsonschema —
// 1,000 documents over five schemas and json_object, in each whitespace mode. Also logs the
// per-step mask time (median, p99); nothing asserts on speed.
func TestRealVocabValidity(t *testing.T) {
	var docs []testref.JSONDoc
	var all []time.Duration
	unfinished := 0
	for vi, name := range vocabNames() {
		tok, v := realVocab(t, name)
		eos := tok.VocabSize() - 1
		closing := closingTokens(v)
		for si, s := range append(slices.Clone(testref.Schemas), "") {
			spec := schema(s)
			var raw json.RawMessage
			if s == "" {
				spec = Spec{JSONObject: true}
			} else {
				raw = json.RawMessage(s)
			}
			ws := Whitespace((vi + si) % 3)
			g := mustCompile(t, spec, Options{Whitespace: ws})
			tab, err := NewTable(g, v)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(vi), uint64(si)))
			for n := 0; n < 90; n++ {
				doc, ok, times := walk(t, tab, closing, eos, rng, 400)
				all = append(all, times...)
				if !ok {
					unfinished++
					continue
				}
				docs = append(docs, testref.JSONDoc{Schema: raw, Doc: doc})
			}
			walks, wt := tab.WalkStats()
			t.Logf("%s schema %d (%v): %d states studied in %v", name, si, ws, walks, wt)
		}
	}
	if len(docs) < 1000 {
		t.Fatalf("only %d finished documents (%d unfinished)", len(docs), unfinished)
	}
	fails := testref.ValidateJSON(t, docs)
	for _, f := range fails[:min(len(fails), 10)] {
		t.Error(f)
	}
	if len(fails) > 0 {
		t.Fatalf("%d of %d documents invalid", len(fails), len(docs))
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	t.Logf("%d documents valid (%d unfinished at 400 tokens); mask time over %d steps: median %v, p99 %v",
		len(docs), unfinished, len(all), all[len(all)/2], all[len(all)*99/100])
	if strings.Contains(os.Getenv("TOKENWISE_GRAMMAR_DUMP"), "1") {
		for _, d := range docs[:20] {
			t.Log(d.Doc)
		}
	}
}

func vocabNames() []string {
	if s := os.Getenv("TOKENWISE_GRAMMAR_VOCABS"); s != "" {
		return strings.Split(s, ",")
	}
	return []string{"llama3", "qwen3"}
}
