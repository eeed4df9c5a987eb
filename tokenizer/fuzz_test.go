package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzEncodeDecode: encoding never panics, offsets stay inside the text, and the byte-level
// fixture (NFC, regex split, ByteLevel) is lossless: decode(encode(x)) == NFC(x).
func FuzzEncodeDecode(f *testing.F) {
	for _, s := range []string{"hello world", "a <mask>  b", "x<|end|>y", "naïve e\u0301", "👨‍👩‍👧", "\r\n\t \u00a0\u3000", "cat concat"} {
		f.Add(s)
	}
	lossless := loadFixture(f, "bytelevel")
	others := []*Tokenizer{loadFixture(f, "metaspace"), loadFixture(f, "unk"), loadFixture(f, "subword"), loadFixture(f, "bytelevel_legacy")}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tk := range append(others, lossless) {
			ids, offs := tk.EncodeOffsets(s, true)
			if len(ids) != len(offs) {
				t.Fatalf("%d ids, %d offsets", len(ids), len(offs))
			}
			for _, o := range offs {
				if o[0] < 0 || o[1] > len(s) || o[0] > o[1] {
					t.Fatalf("offset %v outside %d bytes", o, len(s))
				}
			}
			tk.Decode(ids, true)
		}
		if !utf8.ValidString(s) || strings.Contains(s, "<mask>") { // <mask> strips spaces around it by design
			return
		}
		ids := lossless.Encode(s, false)
		want := unicodeNorm{norm.NFC}.normalize(span{s: s, id: -1}).s
		if got := lossless.Decode(ids, false); got != want {
			t.Fatalf("decode(encode(%q)) = %q", s, got)
		}
	})
}

// FuzzLoad: malformed tokenizer.json never panics.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"unk", "subword"} {
		b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`))
	f.Add([]byte(`{"model":{"vocab":{"a":0},"merges":[["a","a"]]},"added_tokens":[{"content":"x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := FromJSON(data)
		if err != nil {
			return
		}
		for _, s := range []string{"hello world", "ab ab", strings.Repeat("a", 70)} {
			tk.Decode(tk.Encode(s, true), false)
		}
	})
}
