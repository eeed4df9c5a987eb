package model

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/kernels"
)

// BenchmarkVerifyPass: one batched pass of n tokens after a 200-token prompt, with the logits
// of all n, as a speculative step verifies n−1 drafted tokens (and the one before them).
// Decode is bound by the weight reads, so a pass of a few tokens should cost about one
// decode step (n = 1) when the products read each weight block once for all n. Each n runs
// in every iteration without something under study (old) and then with it (new), and the
// medians of each are reported in ms, so the two are compared in the same moments of a
// shared machine: TOKENWISE_VERIFY_AB=smalln (the default) the small-n product kernels,
// shared the attention of a KV head's queries in one pass (sharedUnits), kqdecode the
// k-quant decode and few-token kernels (kernels.SetKQDecode). The models: the GGUF files in
// TOKENWISE_VERIFY_GGUF (comma-separated),
// else SmolLM2-135M Q4_1 from the refs; one worker unless TOKENWISE_VERIFY_THREADS says:
//
//	TOKENWISE_VERIFY_GGUF=a.gguf,b.gguf go test ./model -run '^$' -bench VerifyPass -benchtime 40x
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
	threads := 1 // TOKENWISE_VERIFY_THREADS: the pool's size
	if v, err := strconv.Atoi(os.Getenv("TOKENWISE_VERIFY_THREADS")); err == nil && v > 0 {
		threads = v
	}
	for _, path := range paths {
		if _, err := os.Stat(path); err != nil {
			b.Skipf("model missing: %v (scripts/setup-refs.sh)", err)
		}
		m, err := Load(path, Options{Threads: threads})
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
			b.Run(fmt.Sprintf("%s/t=%d/n=%d", filepath.Base(path), threads, n), func(b *testing.B) {
				defer kernels.SetSmallN(kernels.SetSmallN(true))
				defer func(v bool) { sharedAttn = v }(sharedAttn)
				ab := func(on bool) { kernels.SetSmallN(on) }
				switch os.Getenv("TOKENWISE_VERIFY_AB") {
				case "shared":
					ab = func(on bool) { sharedAttn = on }
				case "kqdecode":
					defer kernels.SetKQDecode(kernels.SetKQDecode(true))
					ab = func(on bool) { kernels.SetKQDecode(on) }
				}
				ch := []Chunk{{Tokens: ids[prompt : prompt+n], Start: prompt, Blocks: blocks, LogitsAt: at}}
				var times [2][]time.Duration
				for b.Loop() {
					for k := range 2 {
						ab(k == 1)
						t0 := time.Now()
						if _, err := pc.Forward(ch); err != nil {
							b.Fatal(err)
						}
						times[k] = append(times[k], time.Since(t0))
					}
				}
				b.ReportMetric(medianMillis(times[0]), "old-ms")
				b.ReportMetric(medianMillis(times[1]), "new-ms")
			})
		}
		pc.Release()
		m.Close()
	}
}

// medianMillis is the median of ts in milliseconds.
func medianMillis(ts []time.Duration) float64 {
	ts = slices.Clone(ts)
	slices.Sort(ts)
	return float64(ts[len(ts)/2].Microseconds()) / 1e3
}
