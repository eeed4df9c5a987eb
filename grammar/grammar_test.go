package grammar

import (
	"errors"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func mustCompile(t testing.TB, spec Spec, o Options) *Grammar {
	t.Helper()
	g, err := Compile(spec, o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func schema(s string) Spec { return Spec{JSONSchema: []byte(s)} }

func TestSchemaDocuments(t *testing.T) {
	cases := []struct {
		schema string
		ws     Whitespace
		good   []string
		bad    []string
	}{
		{`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":130}},"required":["name","age"],"additionalProperties":false}`, Compact,
			[]string{`{"name":"Ann","age":0}`, `{"name":"\"q\" \\ \u00e9 한국어 😀","age":130}`, `{"name":"","age":42}`},
			[]string{`{"age":3,"name":"x"}`, `{"name":"x"}`, `{"name":"x","age":131}`, `{"name":"x","age":-1}`, `{"name":"x","age":07}`, `{"name": "x","age":1}`, `{"name":"x","age":1,"z":1}`, "{\"name\":\"a\nb\",\"age\":1}"}},
		{`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"},"c":{"type":"null"}},"required":["b"]}`, Compact,
			[]string{`{"b":true}`, `{"a":1,"b":false}`, `{"b":true,"c":null}`, `{"a":-5,"b":true,"c":null}`},
			[]string{`{}`, `{"a":1}`, `{,"b":true}`, `{"b":true,}`, `{"c":null,"b":true}`}},
		{`{"type":"object","properties":{"a":{"type":"integer"}}}`, Compact,
			[]string{`{}`, `{"a":1}`}, []string{`{"a":1,}`, `{,}`}},
		{`{"type":"array","items":{"enum":["red","green",3,null,{"k":[1]}]},"minItems":1,"maxItems":3}`, Compact,
			[]string{`["red"]`, `["green",3,null]`, `[{"k":[1]}]`},
			[]string{`[]`, `["red","red","red","red"]`, `["blue"]`, `[{"k":[1,2]}]`}},
		{`{"anyOf":[{"type":"string","format":"date"},{"type":"integer","exclusiveMinimum":10,"exclusiveMaximum":20}]}`, Compact,
			[]string{`"2024-02-29"`, `11`, `19`}, []string{`10`, `20`, `"2024-13-01"`, `"2024-1-01"`}},
		{`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v","kids"],"additionalProperties":false}},"$ref":"#/$defs/node"}`, Compact,
			[]string{`{"v":1,"kids":[]}`, `{"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]}]}`},
			[]string{`{"v":1,"kids":[{"v":2}]}`}},
		{`{"type":"string","pattern":"^[A-Z]{2}-\\d{3}(x|\"y\")?$"}`, Compact,
			[]string{`"AB-123"`, `"ZZ-000x"`, `"QQ-999\"y\""`}, []string{`"ab-123"`, `"AB-12"`, `"AB-123"y""`}},
		{`{"type":"string","format":"uuid"}`, Compact, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567"`}},
		{`{"type":"string","minLength":2,"maxLength":3}`, Compact, []string{`"ab"`, `"한국어"`, `"a\n"`}, []string{`"a"`, `"abcd"`}},
		{`{"type":["number","null"]}`, Compact, []string{`0`, `-0.5`, `1e10`, `3.25E-2`, `null`}, []string{`01`, `.5`, `1.`, `+1`}},
		{`{"const":{"a":[1,"x"]}}`, Compact, []string{`{"a":[1,"x"]}`}, []string{`{"a":[1, "x"]}`}},
		{`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]}`, Spaced,
			[]string{`{"a": [1, 2]}`}, []string{`{"a":[1,2]}`, `{ "a": [1]}`, `{"a":  [1]}`}},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`, Pretty,
			[]string{"{\n  \"a\": 1\n}", `{"a":1}`, "{\"a\":1}\n"}, []string{"{\"a\":1}\n\n"}},
		{`true`, Compact, []string{`{"x":[1,{"y":null}],"z":"s"}`, `[]`, `"s"`, `-1.5e3`}, []string{`{"x":}`, `[1,]`}},
	}
	for _, c := range cases {
		g := mustCompile(t, schema(c.schema), Options{Whitespace: c.ws})
		for _, d := range c.good {
			if !g.Accepts([]byte(d)) {
				t.Errorf("%s: %s refused", c.schema, d)
			}
		}
		for _, d := range c.bad {
			if g.Accepts([]byte(d)) {
				t.Errorf("%s: %s accepted", c.schema, d)
			}
		}
	}
}

func TestIntRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 150; trial++ {
		var lo, hi *big.Int
		if rng.IntN(5) > 0 {
			lo = big.NewInt(int64(rng.IntN(2400) - 1200))
		}
		if rng.IntN(5) > 0 {
			v := int64(rng.IntN(2400) - 1200)
			if lo != nil && v < lo.Int64() {
				v = lo.Int64() + int64(rng.IntN(300))
			}
			hi = big.NewInt(v)
		}
		b := newBuilder(Budget{})
		root := b.define("root", intRange(lo, hi))
		g, err := b.compile(root, "test")
		if err != nil {
			t.Fatal(err)
		}
		for n := -1500; n <= 1500; n++ {
			want := (lo == nil || int64(n) >= lo.Int64()) && (hi == nil || int64(n) <= hi.Int64())
			if got := g.Accepts([]byte(strconv.Itoa(n))); got != want {
				t.Fatalf("[%v, %v]: %d accepted=%v", lo, hi, n, got)
			}
		}
		for _, s := range []string{"-0", "00", "01", "-01", "", "-"} {
			if g.Accepts([]byte(s)) {
				t.Fatalf("[%v, %v]: %q accepted", lo, hi, s)
			}
		}
	}
}

// testVocab is every single byte plus multi-byte tokens that cross JSON terminals, split
// UTF-8 characters, and tokens no grammar here allows.
func testVocab() ([][]byte, int) {
	var toks [][]byte
	for b := 0; b < 256; b++ {
		toks = append(toks, []byte{byte(b)})
	}
	for _, s := range []string{`{"`, `":"`, `","`, `"}`, `"}]`, `":`, `",`, `true`, `tr`, `ue`, `null`, `12`, `0.`, `.5`,
		`e+`, `-1`, `"a`, `a"`, `ab`, `abc`, `name`, `"name`, `name":"`, `age`, `":1`, `},{"`, `]}`, `":[`, `red`, `"red"`,
		`"re`, `gre`, `en"`, `한`, "\xed\x95", "\x9c국", `😀`, "\xf0\x9f", "\x98\x80\"", `\"`, `\\`, `\n`, `\u00`, `e9`,
		`2024`, `-02`, `-2`, `9-`, "  ", "\n  \"", `": `, `, `, "AB", "-12", "3x", `"}` + "\n", `{}`, `[]`, `[{"`} {
		toks = append(toks, []byte(s))
	}
	toks = append(toks, nil) // a special token: no bytes
	eos := len(toks)
	toks = append(toks, nil)
	return toks, eos
}

// TestMaskMatchesBruteForce: along random valid documents, the cached mask equals running
// the parser over every token, for grammars with objects, arrays, recursion, strings with
// escapes and non-Latin text, enums, numbers and whitespace modes.
func TestMaskMatchesBruteForce(t *testing.T) {
	toks, eos := testVocab()
	v := NewVocab(toks)
	specs := []struct {
		spec Spec
		ws   Whitespace
	}{
		{schema(`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":-20,"maximum":130},"tags":{"type":"array","items":{"enum":["red","green"]},"maxItems":3}},"required":["name","age"]}`), Compact},
		{schema(`{"$defs":{"n":{"type":"object","properties":{"v":{"type":"number"},"k":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v","k"]}},"$ref":"#/$defs/n"}`), Spaced},
		{Spec{JSONObject: true}, Pretty},
		{schema(`{"anyOf":[{"type":"string","format":"date"},{"type":"string","pattern":"[A-Z]{2}-\\d{2,3}x?"},{"type":"boolean"}]}`), Compact},
		{Spec{Choices: []string{"red", "green", "greenish", "한국"}}, Compact},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for si, s := range specs {
		g := mustCompile(t, s.spec, Options{Whitespace: s.ws})
		tab, err := NewTable(g, v)
		if err != nil {
			t.Fatal(err)
		}
		for run := 0; run < 25; run++ {
			m := tab.NewMatcher([]int{eos})
			for step := 0; step < 200 && !m.Ended(); step++ {
				mask := m.Mask()
				var allowed []int
				for id := range toks {
					want := m.Allowed(id)
					got := mask[id>>6]&(1<<(id&63)) != 0
					if want != got {
						t.Fatalf("spec %d run %d step %d: token %d %q: mask %v, parser %v", si, run, step, id, toks[id], got, want)
					}
					if got {
						allowed = append(allowed, id)
					}
				}
				if len(allowed) == 0 {
					t.Fatalf("spec %d: empty mask at step %d", si, step)
				}
				// Prefer ending once possible so documents finish.
				pick := allowed[rng.IntN(len(allowed))]
				if m.Complete() && rng.IntN(3) == 0 {
					pick = eos
				}
				if err := m.Accept(pick); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func TestForced(t *testing.T) {
	g := mustCompile(t, schema(`{"type":"object","properties":{"name":{"type":"string"},"kind":{"enum":["receipt","reminder"]},"ok":{"const":true}},"required":["name","kind","ok"]}`), Options{})
	toks, eos := testVocab()
	tab, err := NewTable(g, NewVocab(toks))
	if err != nil {
		t.Fatal(err)
	}
	m := tab.NewMatcher([]int{eos})
	if got := string(m.Forced()); got != `{"name":"` {
		t.Fatalf("forced at start %q", got)
	}
	if err := m.AcceptBytes([]byte(`{"name":"x"`)); err != nil {
		t.Fatal(err)
	}
	if got := string(m.Forced()); got != `,"kind":"re` {
		t.Fatalf("forced after name %q", got)
	}
	if err := m.AcceptBytes([]byte(`,"kind":"rem`)); err != nil {
		t.Fatal(err)
	}
	if got := string(m.Forced()); got != `inder","ok":true}` {
		t.Fatalf("forced in enum %q", got)
	}
	if err := m.AcceptBytes([]byte(`inder","ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if !m.Complete() || len(m.Forced()) != 0 {
		t.Fatal("complete document still forces text")
	}
	if m.Allowed('x') || !m.Allowed(eos) {
		t.Fatal("after the document only end of sequence is allowed")
	}
	// A forced text ending inside a character stops before it.
	g = mustCompile(t, Spec{Choices: []string{"한국"}}, Options{})
	tab, _ = NewTable(g, NewVocab(toks))
	m = tab.NewMatcher([]int{eos})
	if err := m.AcceptBytes([]byte("\xed")); err != nil {
		t.Fatal(err)
	}
	if got := m.Forced(); len(got) != 0 {
		t.Fatalf("forced %q from inside a character", got)
	}
}

func TestSchemaErrors(t *testing.T) {
	cases := []struct{ schema, want string }{
		{`{"type":"object","properties":{"a":{"type":"string","multipleOf":3}}}`, `json schema at #/properties/a: "multipleOf": unsupported keyword`},
		{`{"type":"object","properties":{"a/b":{"type":"number","minimum":1}}}`, `json schema at #/properties/a~1b: "minimum": bounds are supported on integers only`},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"required":["b"]}`, `"required": "b" is required but not in properties`},
		{`{"$ref":"#/$defs/missing"}`, `"$ref": "#/$defs/missing" points at nothing`},
		{`{"type":"strin"}`, `unknown type "strin"`},
		{`{"type":"string","format":"email"}`, `"format": "email" is not supported`},
		{`{"type":"string","pattern":"a(?=b)"}`, `"pattern": pattern "a(?=b)"`},
		{`{"type":"integer","minimum":5,"maximum":4}`, `no integer lies between 5 and 4`},
		{`{"type":`, `json schema at #: invalid JSON at offset`},
		{`{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, `references only itself`},
	}
	for _, c := range cases {
		_, err := Compile(schema(c.schema), Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.schema, err, c.want)
		}
	}
}

// TestBudget: a schema that needs too many states is refused quickly, not compiled for ever.
func TestBudget(t *testing.T) {
	_, err := Compile(schema(`{"type":"array","items":{"type":"string","maxLength":100000},"maxItems":100000}`), Options{Budget: Budget{MaxStates: 50_000}})
	if !errors.Is(err, ErrBudget) {
		t.Fatalf("error %v, want ErrBudget", err)
	}
	// Deeply nested anyOf: one rule per subschema, so it stays linear.
	s := `{"type":"integer"}`
	for i := 0; i < 200; i++ {
		s = `{"anyOf":[` + s + `,{"type":"string","maxLength":3}]}`
	}
	if _, err := Compile(schema(s), Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestUnspellable(t *testing.T) {
	var toks [][]byte
	for b := 0; b < 256; b++ {
		if b != 'z' {
			toks = append(toks, []byte{byte(b)})
		}
	}
	g := mustCompile(t, schema(`{"type":"object","properties":{"zebra":{"type":"integer"}},"required":["zebra"]}`), Options{})
	if _, err := NewTable(g, NewVocab(toks)); err == nil || !strings.Contains(err.Error(), "cannot spell") {
		t.Fatalf("error %v", err)
	}
}

func TestDateFormat(t *testing.T) {
	g := mustCompile(t, schema(`{"type":"string","format":"date"}`), Options{})
	for _, d := range []string{"2024-02-29", "2000-02-29", "1999-12-31", "2023-04-30", "0400-02-29"} {
		if !g.Accepts([]byte(`"` + d + `"`)) {
			t.Errorf("%s refused", d)
		}
	}
	for _, d := range []string{"2023-02-29", "1900-02-29", "2023-04-31", "2023-11-31", "2023-00-01", "2023-01-00", "2023-02-30"} {
		if g.Accepts([]byte(`"` + d + `"`)) {
			t.Errorf("%s accepted", d)
		}
	}
}
