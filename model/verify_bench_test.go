package model

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/kernels"
)

// BenchmarkVerifyPass: one batched pass of n tokens after a 200-token prompt, with the logits
// of all n, as a speculative step verifies n−1 drafted tokens (and the one before them).
// Decode is bound by the weight reads, so a pass of a few tokens should cost about one
// decode step (n = 1) when the products read each weight block once for all n. Each n runs
// with the small-n kernels (new) and without (old), back to back. The models: the GGUF
// files in TOKENWISE_VERIFY_GGUF (comma-separated), else SmolLM2-135M Q4_1 from the refs:
//
//	TOKENWISE_VERIFY_GGUF=a.gguf,b.gguf go test ./model -run '^$' -bench VerifyPass -benchtime 2s
func BenchmarkVerifyPass(b *testing.B) {
	paths := strings.Split(os.Getenv("TOKENWISE_VERIFY_GGUF"), ",")
	if paths[0] == "" {
		dir := os.Getenv("TOKENWISE_REFS")
		if dir == "" {
			_, file, _, _ := runtime.Caller(0)
			dir = filepath.Join(filepath.Dir(file), "..", ".cache", "refs")
		}
		paths = []string{filepath.Join(dir, "smollm2", "smollm2-135m-instruct-q4_1.gguf")}
	}
	const prompt, blockSize = 200, 16
	for _, path := range paths {
		if _, err := os.Stat(path); err != nil {
			b.Skipf("model missing: %v (scripts/setup-refs.sh)", err)
		}
		m, err := Load(path, Options{Threads: 2})
		if err != nil {
			b.Fatal(err)
		}
		pc, err := m.NewPagedCache((prompt+16)/blockSize+1, blockSize)
		if err != nil {
			b.Fatal(err)
		}
		blocks := make([]int, pc.NumBlocks())
		for i := range blocks {
			blocks[i] = i
		}
		ids := make([]int, prompt+16)
		for i := range ids {
			ids[i] = (i*7919 + 13) % m.Config().VocabSize
		}
		if _, err := pc.Forward([]Chunk{{Tokens: ids[:prompt], Start: 0, Blocks: blocks, Logits: true}}); err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{1, 3, 5, 8} {
			at := make([]int, n)
			for i := range at {
				at[i] = i
			}
			for _, kern := range []string{"old", "new"} {
				b.Run(fmt.Sprintf("%s/n=%d/%s", filepath.Base(path), n, kern), func(b *testing.B) {
					defer kernels.SetSmallN(kernels.SetSmallN(kern == "new"))
					ch := []Chunk{{Tokens: ids[prompt : prompt+n], Start: prompt, Blocks: blocks, LogitsAt: at}}
					for b.Loop() {
						if _, err := pc.Forward(ch); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/pass")
				})
			}
		}
		pc.Release()
		m.Close()
	}
}
