package tokenizer

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tokenwise/tokenwise/internal/testref"
)

// TestTokenBytes: characters that a byte-level (Llama-3) or byte-fallback (Gemma-3)
// vocabulary splits over tokens of a byte or two come back whole from the tokens' raw bytes,
// where each token's own Decode is U+FFFD.
func TestTokenBytes(t *testing.T) {
	for _, pkg := range []string{"tokenizer-llama3", "tokenizer-gemma3"} {
		tok, err := Load(testref.Path(t, "node_modules", "@lenml", pkg, "models"))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"龘", "𠜎ꙮ", "a 𠜎 b"} {
			var b []byte
			partial := false
			for _, id := range tok.Encode(s, false) {
				tb := tok.TokenBytes(id)
				if !utf8.Valid(tb) {
					partial = true
					if d := tok.Decode([]int{id}, false); !strings.Contains(d, "\uFFFD") {
						t.Errorf("%s: token %d decodes alone to %q", pkg, id, d)
					}
				}
				b = append(b, tb...)
			}
			if !partial {
				t.Errorf("%s: %q has no token holding part of a character: the test proves nothing", pkg, s)
			}
			if !bytes.Equal(b, []byte(s)) {
				t.Errorf("%s: token bytes %q, want %q", pkg, b, s)
			}
		}
		if tok.TokenBytes(-1) != nil || tok.TokenBytes(tok.VocabSize()) != nil {
			t.Errorf("%s: bytes for an unknown id", pkg)
		}
	}
}
