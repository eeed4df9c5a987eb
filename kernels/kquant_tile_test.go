//go:build amd64

package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/tensor"
	"golang.org/x/sys/cpu"
)

// kqTilesUpTo lists the Q4_K tile paths up to best (the one setISA chose), off first.
func kqTilesUpTo(best int) []int {
	var m []int
	for i := kqTileOff; i <= best; i++ {
		m = append(m, i)
	}
	return m
}

// TestQ4KTileEveryPath: a Q4_K product (MatMul, one and two workers) gives the Go
// reference's bits (dotQ4_KAct) under every ISA and every tile path it runs (off, AVX2,
// 512-bit), on row counts that are not a multiple of the tile's row block (64), token
// counts that are not a multiple of its sixteen or eight, and rows of 1, 3 and 20 super-blocks (the
// last longer than a call's kqTileMaxSB).
func TestQ4KTileEveryPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	type shape struct{ rows, cols int }
	shapes := []shape{{37, 256}, {133, 768}, {11, 5120}}
	mats := make([]Mat, len(shapes))
	for i, sh := range shapes {
		mats[i], _ = randMat(t, rng, tensor.Q4_K, sh.rows, sh.cols)
	}
	for _, threads := range []int{1, 2} {
		p := NewPool(threads)
		s := NewScratch(p.Threads())
		for _, isa := range SupportedISAs() {
			prev, err := SetISA(isa)
			if err != nil {
				t.Fatal(err)
			}
			best := kqTile
			for _, mode := range kqTilesUpTo(best) {
				kqTile = mode
				for i, sh := range shapes {
					w := &mats[i]
					for _, n := range []int{8, 16, 17, 23, 24, 41} {
						t.Run(fmt.Sprintf("threads%d/%v/tile%d/%dx%d/n%d", threads, isa, mode, sh.rows, sh.cols, n), func(t *testing.T) {
							x := randVec(rng, n*sh.cols)
							got := make([]float32, n*sh.rows)
							MatMul(p, got, w, x, n, s)
							checkQ4KRef(t, w, x, got, n)
						})
					}
				}
			}
			kqTile = best
			if _, err := SetISA(prev); err != nil {
				t.Fatal(err)
			}
		}
		p.Close()
	}
}

// TestQ4KTileSelected: setISA turns the Q4_K tile on with the k-quant assembly, 512-bit
// under ISAAVX512 where the CPU has AVX-512 BW and VNNI.
func TestQ4KTileSelected(t *testing.T) {
	for _, isa := range SupportedISAs() {
		prev, err := SetISA(isa)
		if err != nil {
			t.Fatal(err)
		}
		want := kqTileOff
		switch {
		case !useAsmQ8 || noKQTile:
		case isa == ISAAVX512 && useVNNI && cpu.X86.HasAVX512BW:
			want = kqTileZMM
		default:
			want = kqTileAVX2
		}
		if kqTile != want {
			t.Errorf("%v: tile %d, want %d", isa, kqTile, want)
		}
		if _, err := SetISA(prev); err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkQ4KTile: BenchmarkKQuant's Q4_K matrix (3072×1024, Qwen3-0.6B's gate) times 16,
// 64 and 128 tokens with each tile path this CPU runs: q4KRowAVX2/VNNI for every token
// ("rows"), the AVX2 tile, the 512-bit one ("zmm"), alternating in three rounds (r0..r2;
// -count would run each path's repetitions back to back). "mt2" is MatMul with two
// workers (GMAC/s of wall time); "kernel" is kQuantRows on the calling goroutine alone,
// the activations quantized once, in GMAC per second of the process's CPU time
// (GMAC/cpu-s), which busy neighbours move much less than wall time (a pool's workers
// spin between calls, so its CPU time is no measure).
//
//	GOEXPERIMENT=simd go test ./kernels -run '^$' -bench Q4KTile
func BenchmarkQ4KTile(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	const rows, cols = 3072, 1024
	w, _ := randMat(b, rng, tensor.Q4_K, rows, cols)
	best, amx := kqTile, useAMX
	defer func() { kqTile, useAMX = best, amx }()
	names := []string{"rows", "avx2", "zmm", "amx"}
	modes := kqTilesUpTo(best)
	if amx {
		modes = append(modes, 3) // the AMX tile (amx_amd64.go), the 512-bit tile for the rest
	}
	p := NewPool(2)
	defer p.Close()
	s := NewScratch(p.Threads())
	for _, n := range []int{16, 64, 128} {
		x := randVec(rng, n*cols)
		out := make([]float32, n*rows)
		var a qactK
		a.quantize(x)
		macs := float64(rows * cols * n)
		for round := range 3 {
			for _, mode := range modes {
				set := func() {
					kqTile, useAMX = min(mode, kqTileZMM), mode == 3
					prepareAMX(&w, &a, n)
				}
				b.Run(fmt.Sprintf("kernel/n%d/%s/r%d", n, names[mode], round), func(b *testing.B) {
					set()
					c0 := cpuTime()
					for b.Loop() {
						kQuantRows(out, &w, &a, n, 0, rows)
					}
					b.ReportMetric(macs*float64(b.N)/(cpuTime()-c0).Seconds()/1e9, "GMAC/cpu-s")
				})
				b.Run(fmt.Sprintf("mt2/n%d/%s/r%d", n, names[mode], round), func(b *testing.B) {
					set()
					for b.Loop() {
						MatMul(p, out, &w, x, n, s)
					}
					b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
				})
			}
		}
	}
}

// checkQ4KRef fails t unless got (n tokens × w.Rows) has, for every (row, token), the bits
// of the Go reference dotQ4_KAct on x quantized to Q8_K.
func checkQ4KRef(t *testing.T, w *Mat, x, got []float32, n int) {
	t.Helper()
	var a qactK
	a.quantize(x)
	nb := w.Cols / 256
	for tk := range n {
		d, q, bs := a.d[tk*nb:(tk+1)*nb], a.q[tk*nb*256:(tk+1)*nb*256], a.bsums[tk*nb*16:(tk+1)*nb*16]
		for r := range w.Rows {
			ref := dotQ4_KAct
			if amxArithmetic(w) {
				ref = dotQ4_KAMX
			}
			want := ref(w.Data[r*w.rowBytes:(r+1)*w.rowBytes], d, q, bs)
			if g := got[tk*w.Rows+r]; math.Float32bits(g) != math.Float32bits(want) {
				t.Fatalf("token %d row %d: %g (%#x), Go reference %g (%#x)", tk, r, g, math.Float32bits(g), want, math.Float32bits(want))
			}
		}
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
