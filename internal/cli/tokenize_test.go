package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// tiny is a small byte-level BPE tokenizer.json (a copy of tokenizer/testdata/bytelevel.json):
// a Qwen-style split pattern, added tokens <|end|> (special), <mask>, cat, and a BOS template.
const tiny = "testdata/tiny-tokenizer.json"

// run executes the command line in-process with the given stdin.
func run(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	err = root.Execute()
	return out.String(), errb.String(), err
}

func mustRun(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, stderr, err := run(t, stdin, args...)
	if err != nil {
		t.Fatalf("tokenwise %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr)
	}
	return out
}

func load(t *testing.T, path string) *tokenizer.Tokenizer {
	t.Helper()
	tk, err := tokenizer.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// cliTexts are inputs whose handling is easy to get wrong between the CLI and the package.
var cliTexts = []string{
	"", " ", "Hello world", "{\"status\": \"approved\"}", "the cat<|end|>sat <mask> here",
	"<|im_start|>user\n안녕하세요<|im_end|>", "tabs\tand\r\nCRLF\u00a0nbsp\u3000", "👩‍👩‍👧‍👦 🇰🇷 e\u0301",
	"line one\nline two\n\n", strings.Repeat("x", 5000),
}

// jsonlInput writes texts as JSONL, alternating bare strings and {"text": ...} objects.
func jsonlInput(texts []string) string {
	var b strings.Builder
	for i, s := range texts {
		q, _ := json.Marshal(s)
		if i%2 == 0 {
			b.Write(q)
		} else {
			fmt.Fprintf(&b, `{"id": %d, "text": %s}`, i, q)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func parseIDLines(t *testing.T, out string) [][]int {
	t.Helper()
	var res [][]int
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var o struct{ IDs []int }
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatalf("output line %d %q: %v", i+1, line, err)
		}
		res = append(res, o.IDs)
	}
	return res
}

// cliTokenizers are the tokenizers the CLI is checked with: the tiny one always, the real
// ones when the references are installed.
func cliTokenizers(t *testing.T) map[string]string {
	m := map[string]string{"tiny": tiny}
	if _, err := os.Stat(testref.Dir()); err == nil || testref.Required() {
		for _, n := range []string{"qwen3", "gpt4o"} { // gemma3 (slow to load) runs in the count test
			m[n] = testref.Tokenizer(t, n)
		}
	}
	return m
}

func TestTokenizeJSONLMatchesPackage(t *testing.T) {
	// More lines than one batch, so the order across batches is checked too.
	var texts []string
	for i := 0; len(texts) < 2*jsonlBatch+7; i++ {
		texts = append(texts, cliTexts[i%(len(cliTexts)-1)]+fmt.Sprint(i)) // all but the 5000-byte one
	}
	texts = append(texts, cliTexts...)
	in := jsonlInput(texts)
	for name, path := range cliTokenizers(t) {
		t.Run(name, func(t *testing.T) {
			tk := load(t, path)
			for _, special := range []bool{true, false} {
				args := []string{"tokenize", "--tokenizer", path, "--jsonl", "-"}
				if !special {
					args = append(args, "--no-special")
				}
				got := parseIDLines(t, mustRun(t, in, args...))
				if len(got) != len(texts) {
					t.Fatalf("special=%v: %d output lines for %d inputs", special, len(got), len(texts))
				}
				for i, s := range texts {
					if want := tk.Encode(s, special); !slices.Equal(got[i], want) && !(len(want) == 0 && len(got[i]) == 0) {
						t.Fatalf("special=%v line %d %q:\n got  %v\n want %v", special, i+1, s, got[i], want)
					}
				}
			}
		})
	}
}

func TestTokenizeFromFileAndDetokenizeRoundTrip(t *testing.T) {
	path := tiny
	lossless := false
	if _, err := os.Stat(testref.Dir()); err == nil || testref.Required() {
		path, lossless = testref.Tokenizer(t, "gpt4o"), true // byte-level, no normalizer
	}
	tk := load(t, path)
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(jsonlInput(cliTexts)), 0o644); err != nil {
		t.Fatal(err)
	}
	ids := mustRun(t, "", "tokenize", "--tokenizer", path, "--jsonl", in, "--no-special")
	out := mustRun(t, ids, "detokenize", "--tokenizer", path, "--jsonl", "-")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(cliTexts) {
		t.Fatalf("%d lines out for %d in", len(lines), len(cliTexts))
	}
	for i, line := range lines {
		var o struct{ Text string }
		if err := json.Unmarshal([]byte(line), &o); err != nil {
			t.Fatal(err)
		}
		want := tk.Decode(tk.Encode(cliTexts[i], false), false)
		if lossless && want != cliTexts[i] {
			t.Fatalf("GPT-4o tokenizer not lossless on %q", cliTexts[i])
		}
		if o.Text != want {
			t.Errorf("line %d: detokenize gave %q, want %q", i+1, o.Text, want)
		}
	}
	// Plain detokenize: ids as arguments and on stdin (space-separated and as a JSON array).
	want := tk.Decode(tk.Encode("Hello world", false), false) + "\n"
	var args []string
	for _, id := range tk.Encode("Hello world", false) {
		args = append(args, fmt.Sprint(id))
	}
	if got := mustRun(t, "", append([]string{"detokenize", "--tokenizer", path}, args...)...); got != want {
		t.Errorf("detokenize args: %q, want %q", got, want)
	}
	if got := mustRun(t, strings.Join(args, " "), "detokenize", "--tokenizer", path); got != want {
		t.Errorf("detokenize stdin: %q, want %q", got, want)
	}
	if got := mustRun(t, "["+strings.Join(args, ",")+"]", "detokenize", "--tokenizer", path); got != want {
		t.Errorf("detokenize stdin array: %q, want %q", got, want)
	}
}

func TestTokenizeTextAndJSON(t *testing.T) {
	tk := load(t, tiny)
	for _, s := range cliTexts {
		if s == "" {
			continue // an empty argument is still TEXT, but keep the check simple
		}
		var o struct {
			IDs     []int
			Tokens  []string
			Pieces  []string
			Offsets [][2]int
			Count   int
			Bytes   int
		}
		out := mustRun(t, "", "tokenize", "--tokenizer", tiny, "--json", "--no-special", s)
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			t.Fatalf("%q: %v", out, err)
		}
		ids, offs := tk.EncodeOffsets(s, false)
		if !slices.Equal(o.IDs, ids) || o.Count != len(ids) || o.Bytes != len(s) || len(o.Pieces) != len(ids) || len(o.Tokens) != len(ids) {
			t.Fatalf("%q: got %+v, want ids %v", s, o, ids)
		}
		if !slices.Equal(o.Offsets, offs) {
			t.Fatalf("%q: offsets %v, want %v", s, o.Offsets, offs)
		}
		// Each piece is its token decoded alone, or the token's bytes where that is only part
		// of a character (JSON shows those bytes as U+FFFD).
		for i, id := range ids {
			if d := tk.Decode([]int{id}, false); !strings.ContainsRune(d, '\uFFFD') && o.Pieces[i] != d {
				t.Fatalf("%q: piece %d = %q, want %q", s, i, o.Pieces[i], d)
			}
		}
	}
	// Plain output: counts line, ids line, pieces line; stdin when no TEXT.
	out := mustRun(t, "the cat sat", "tokenize", "--tokenizer", tiny)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	ids := tk.Encode("the cat sat", true)
	if len(lines) != 3 || lines[0] != fmt.Sprintf("%d tokens, %d bytes", len(ids), len("the cat sat")) || lines[1] != joinInts(ids, " ") {
		t.Fatalf("plain output %q, ids %v", out, ids)
	}
	if !strings.HasPrefix(lines[2], `<\|bos\|>|`) || strings.Count(lines[2], "|")-strings.Count(lines[2], `\|`) != len(ids)-1 {
		t.Fatalf("pieces line %q", lines[2])
	}
}

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"a b":            "a b",
		"\n\t\r":         `\n\t\r`,
		"|\\":            `\|\\`,
		"\u00a0\u3000\v": `\u00a0\u3000\u000b`,
		"\xe3\x83":       `\xe3\x83`,
		"한":              "한",
	} {
		if got := visible(in); got != want {
			t.Errorf("visible(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCLIErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.jsonl", "\"ok\"\n{\"text\": 3}\n")
	notJSON := write("notjson.jsonl", "\"ok\"\n\"fine\"\nnot json\n")
	badUTF8 := write("utf8.jsonl", "\"ok\"\n\"a\xffb\"\n")
	badIDs := write("ids.jsonl", "{\"ids\": [1, 2]}\n{\"ids\": [1, 99999999]}\n")
	badCount := write("latin1.txt", "ok\nline two\ncaf\xe9\n")
	badTok := write("tokenizer.json", `{"model": {"type": "BPE", "vocab": 7}}`)
	for _, tc := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"tokenize", "x"}, "tokenizer"},
		{[]string{"tokenize", "--tokenizer", filepath.Join(dir, "missing.json"), "x"}, "missing.json"},
		{[]string{"tokenize", "--tokenizer", badTok, "x"}, "tokenizer.json"},
		{[]string{"tokenize", "--tokenizer", tiny, "--jsonl", bad}, "bad.jsonl:2:"},
		{[]string{"tokenize", "--tokenizer", tiny, "--jsonl", notJSON}, "notjson.jsonl:3:"},
		{[]string{"tokenize", "--tokenizer", tiny, "--jsonl", badUTF8}, "utf8.jsonl:2: invalid UTF-8 at byte 2"},
		{[]string{"tokenize", "--tokenizer", tiny, "a\xffb"}, "TEXT: invalid UTF-8 at byte 1"},
		{[]string{"tokenize", "--tokenizer", tiny, "--jsonl", bad, "x"}, "not both"},
		{[]string{"detokenize", "--tokenizer", tiny, "--jsonl", badIDs}, "ids.jsonl:2: ids[1]: id 99999999"},
		{[]string{"detokenize", "--tokenizer", tiny, "12", "abc"}, `argument 2: "abc"`},
		{[]string{"detokenize", "--tokenizer", tiny, "--", "-5"}, "id -5"},
		{[]string{"count", "--tokenizer", tiny, badCount}, "latin1.txt:3: invalid UTF-8 at byte 15"},
		{[]string{"count", "--tokenizer", tiny, filepath.Join(dir, "nope.txt")}, "nope.txt"},
		{[]string{"count", "--tokenizer", tiny, dir}, "is a folder"},
	} {
		out, _, err := run(t, "", tc.args...)
		if err == nil {
			t.Errorf("tokenwise %q: no error (output %q)", tc.args, out)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("tokenwise %q: error %q, want one line containing %q", tc.args, err, tc.want)
		}
	}
}
