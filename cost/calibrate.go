package cost

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tokenwise/tokenwise/internal/hugemem"
	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/tensor"
)

// CalibrateOptions say what Calibrate measures.
type CalibrateOptions struct {
	Name    string
	Threads []int // thread counts to measure; empty: 1 and every CPU
	// ReadMiB is the array size for the bandwidth sweep and the matrix size for the
	// matrix×vector kernels: it must be well beyond the last-level cache (server L3s reach
	// hundreds of MiB), or the "memory" bandwidth is the cache's.
	ReadMiB int
	DTypes  []string // weight dtypes for the kernel measurements; empty: f32 f16 bf16 q8_0 q4_0
	Repeats int      // timings per number (default 5)
	// Clock is "wall" (default) or "cpu". With "cpu" every rate divides the work by the
	// process's CPU time per thread instead of elapsed time: on a machine shared with
	// other busy processes, elapsed time measures the neighbours as much as the kernels.
	// Compare such a profile with bench's *_cpu fields.
	Clock string
	Log   io.Writer // progress; nil: none
}

// Calibrate measures this machine into a CPU profile: for each thread count the read
// bandwidth (a sum over a large array), the FMA peak (a register-only loop) and the rates
// tokenwise's kernels reach on each weight dtype — matrix×vector as weight bytes per
// second (decode) and matrix×matrix as FLOP/s (prefill). Predictions use the kernel rates:
// the raw peaks say how far the kernels are from the machine.
func Calibrate(o CalibrateOptions) (*Profile, error) {
	if len(o.Threads) == 0 {
		o.Threads = []int{1}
		if n := runtime.NumCPU(); n > 1 {
			o.Threads = append(o.Threads, n)
		}
	}
	if o.ReadMiB <= 0 {
		o.ReadMiB = 1024
	}
	if o.ReadMiB < 8 {
		return nil, fmt.Errorf("calibrate: read size %d MiB: at least 8 (the shape measurements cut matrices of up to 4 MiB from it)", o.ReadMiB)
	}
	if len(o.DTypes) == 0 {
		o.DTypes = []string{"f32", "f16", "bf16", "q8_0", "q4_0"}
	}
	if o.Repeats <= 0 {
		o.Repeats = 5
	}
	switch o.Clock {
	case "":
		o.Clock = "wall"
	case "wall":
	case "cpu":
		if _, ok := processCPU(); !ok {
			return nil, errors.New("calibrate: CPU time is not available on this system; use the wall clock")
		}
	default:
		return nil, fmt.Errorf("calibrate: clock %q: want wall or cpu", o.Clock)
	}
	logf := func(format string, a ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format, a...)
		}
	}
	for _, t := range o.Threads {
		if t <= 0 {
			return nil, fmt.Errorf("calibrate: thread count %d: must be positive", t)
		}
	}
	for _, d := range o.DTypes {
		if _, err := kernelDType(d); err != nil {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
	}
	cpuName := cpuModel()
	p := &Profile{
		Name: o.Name, Kind: "cpu",
		Source: fmt.Sprintf("tokenwise calibrate on %s, %d CPUs, %s/%s, %s, %s; rates by %s clock", cpuName, runtime.NumCPU(),
			runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format("2006-01-02 15:04 UTC"), o.Clock),
		Clock:             o.Clock,
		MemGB:             memTotalGB(),
		LLCMiB:            lastLevelCacheMiB(sysCPUCache),
		Interconnect:      Interconnect{Name: "none"},
		ComputeEfficiency: 1, MemoryEfficiency: 1,
	}
	if p.Name == "" {
		p.Name = "this-machine"
	}

	// The read probe's array lives in huge-page memory, as model.Load holds the weights.
	arena, err := hugemem.Alloc(o.ReadMiB << 20)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %d MiB for the read probe: %w", o.ReadMiB, err)
	}
	defer func() {
		if arena != nil {
			hugemem.Free(arena)
		}
	}()
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&arena[0])), len(arena)/8)
	for i := range words {
		words[i] = uint64(i) // touch every page so the sweep measures memory, not page faults
	}
	if p.LLCMiB > 0 {
		logf("last-level cache %d MiB: decode sets from %d MiB on are predicted at the memory rate\n", p.LLCMiB, p.LLCMiB/2)
	}
	for _, t := range o.Threads {
		tr := ThreadRates{Threads: t, Kernels: map[string]KernelRates{}}
		pool := kernels.NewPool(t)
		ec, err := engineCosts(pool, o.Clock, t, o.Repeats)
		pool.Close()
		if err != nil {
			return nil, fmt.Errorf("calibrate: %d threads: %w", t, err)
		}
		tr.Engine = ec // measured again after the kernels, keeping the faster of each
		logf("threads %d: hand-over %.2f µs; per element: norm %.2f ns, add %.2f ns, silu %.2f ns, rope %.2f ns; attention (f32 cache) %v\n",
			t, ec.RunUs, ec.NormNs, ec.AddNs, ec.SiLUNs, ec.RopeNs, ec.AttnF32)
		tr.ReadGBs = best(o.Repeats, func() float64 { return readGBs(o.Clock, words, t) })
		var isa string
		tr.FMAGFLOPS = best(o.Repeats, func() float64 {
			g, i := fmaGFLOPS(o.Clock, t)
			isa = i
			return g
		})
		logf("threads %d: read %.1f GB/s, FMA %.1f GFLOP/s (%s)\n", t, tr.ReadGBs, tr.FMAGFLOPS, isa)
		p.Calibration = append(p.Calibration, tr)
	}
	hugemem.Free(arena) // before the kernel measurements allocate their own
	arena, words = nil, nil
	for _, d := range o.DTypes {
		dt, _ := kernelDType(d)
		kb, err := newBench(dt, o.ReadMiB)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %s: %w", d, err)
		}
		for i, t := range o.Threads {
			pool := kernels.NewPool(t)
			s := kernels.NewScratch(pool.Threads())
			k := KernelRates{GEMVGBs: medianOf(o.Repeats, func() float64 {
				return float64(len(kb.big.Data)) / timed(o.Clock, t, func() { kernels.MatVec(pool, kb.out, &kb.big, kb.x, s) }) / 1e9
			})}
			var err error
			if k.CallUs, err = callUs(pool, s, dt, kb.big.Data, o.Clock, t); err == nil {
				if k.MatVec, err = matVecGrid(pool, s, dt, kb.big.Data, o.ReadMiB, p.LLCMiB, k.CallUs, o.Clock, t, (o.Repeats+1)/2); err == nil {
					k.MatMul, err = matMulGrid(pool, s, dt, kb.big.Data, o.Clock, t, (o.Repeats+1)/2)
				}
			}
			if err != nil {
				pool.Close()
				kb.release()
				return nil, fmt.Errorf("calibrate: %s, %d threads: %w", d, t, err)
			}
			// The rate by tokens alone, for what reads it without the shape (forBatch): the
			// 2048-wide rows.
			for _, m := range k.MatMul {
				if m.Cols == 2048 {
					k.GEMM = append(k.GEMM, TokenRate{Tokens: m.Tokens, GFLOPS: m.GFLOPS})
					k.GEMMGFLOPS = max(k.GEMMGFLOPS, m.GFLOPS)
				}
			}
			pool.Close()
			p.Calibration[i].Kernels[d] = k
			logf("threads %d: %-4s kernels: matvec %.2f GB/s, call %.2f µs, matvec by cols/set %v, matmul by cols/tokens %v\n", t, d, k.GEMVGBs, k.CallUs, k.MatVec, k.MatMul)
		}
		kb.release()
		runtime.GC()
	}
	// The engine's fixed costs are microseconds and nanoseconds: a neighbour that holds a
	// core for a moment multiplies them (a 2-thread hand-over grows from under a µs to
	// hundreds while the other core is taken). Noise only ever adds, so they are measured
	// again now, seconds later, and the smaller of each pair is kept.
	for i, tr := range p.Calibration {
		pool := kernels.NewPool(tr.Threads)
		ec, err := engineCosts(pool, o.Clock, tr.Threads, o.Repeats)
		pool.Close()
		if err != nil {
			return nil, fmt.Errorf("calibrate: %d threads: %w", tr.Threads, err)
		}
		p.Calibration[i].Engine = tr.Engine.fastest(ec)
	}
	last := p.Calibration[len(p.Calibration)-1]
	p.MemBWGBs = last.ReadGBs
	p.PeakTFLOPS = map[string]float64{}
	for _, k := range []string{"fp32", "fp16", "bf16", "fp8", "int8"} {
		p.PeakTFLOPS[k] = last.FMAGFLOPS / 1000 // every dtype is widened to f32 for the multiply
	}
	return p, p.Validate()
}

func kernelDType(name string) (tensor.DType, error) {
	switch name {
	case "f32":
		return tensor.F32, nil
	case "f16":
		return tensor.F16, nil
	case "bf16":
		return tensor.BF16, nil
	case "q8_0":
		return tensor.Q8_0, nil
	case "q4_0":
		return tensor.Q4_0, nil
	}
	return 0, fmt.Errorf("dtype %q: the kernels are measured for f32, f16, bf16, q8_0, q4_0", name)
}

// best is the highest of n measurements: on a shared machine the noise only ever slows a
// run down, so the maximum is the closest to the machine's peak.
func best(n int, f func() float64) float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = f()
	}
	return slices.Max(v)
}

var sinkWords uint64

// timed runs f once and returns its duration in seconds: elapsed, or with clock "cpu" the
// process CPU time it used divided by the threads that ran it.
func timed(clock string, threads int, f func()) float64 {
	if clock == "cpu" {
		c0, _ := processCPU()
		f()
		c1, _ := processCPU()
		return max((c1-c0).Seconds()/float64(threads), 1e-9)
	}
	start := time.Now()
	f()
	return max(time.Since(start).Seconds(), 1e-9)
}

// medianOf is the median of n measurements. The kernel rates predict what `tokenwise
// bench` reports, which is a median too, so both sides see the same kind of noise.
func medianOf(n int, f func() float64) float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = f()
	}
	return median(v)
}

// readGBs sums the array in `threads` contiguous parts at once.
func readGBs(clock string, words []uint64, threads int) float64 {
	var wg sync.WaitGroup
	sums := make([]uint64, threads)
	per := len(words) / threads
	el := timed(clock, threads, func() {
		for t := range threads {
			wg.Add(1)
			go func(t int) {
				defer wg.Done()
				sums[t] = kernels.SumWords(words[t*per : (t+1)*per])
			}(t)
		}
		wg.Wait()
	})
	for _, s := range sums {
		sinkWords += s
	}
	return float64(per*threads*8) / el / 1e9
}

// fmaGFLOPS runs the FMA loop on `threads` goroutines, each locked to its own OS thread.
func fmaGFLOPS(clock string, threads int) (float64, string) {
	const iters = 20_000_000
	var wg sync.WaitGroup
	var isa string
	flops := make([]float64, threads)
	el := timed(clock, threads, func() {
		for t := range threads {
			wg.Add(1)
			go func(t int) {
				defer wg.Done()
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				f, i := fmaLoop(iters)
				flops[t] = f
				if t == 0 {
					isa = i
				}
			}(t)
		}
		wg.Wait()
	})
	var total float64
	for _, f := range flops {
		total += f
	}
	return total / el / 1e9, isa
}

// kernelBench holds the weights of the kernel measurements for one dtype.
type kernelBench struct {
	big     kernels.Mat // ReadMiB of weights: the decode product streams it from memory
	x, out  []float32
	release func() // frees big's memory
}

// newBench builds the matrices from a pool of 512 random rows, each matrix row copied from
// a random pool row. The values are kept as varied as a model's because the f16 kernel
// converts through a 256 KiB table whose cache footprint depends on the values; one
// repeated row would touch only a few of its lines. (Measured here, the effect was within
// the machine's noise; the precaution is cheap.)
func newBench(dt tensor.DType, mib int) (*kernelBench, error) {
	const cols, poolRows = 2048, 512
	rowBytes, err := dt.BytesFor(cols)
	if err != nil {
		return nil, err
	}
	pool, err := randomRows(dt, poolRows, cols)
	if err != nil {
		return nil, err
	}
	rows := max(4, (mib<<20)/rowBytes/4*4)
	// In huge-page memory, as model.Load holds a checkpoint's weights (hugemem), so the
	// streaming rates measured here are the model's.
	data, err := hugemem.Alloc(rows * rowBytes)
	if err != nil {
		return nil, err
	}
	release := func() { hugemem.Free(data) }
	pick := rand.New(rand.NewPCG(5, 6))
	for r := range rows {
		src := pick.IntN(poolRows) * rowBytes
		copy(data[r*rowBytes:(r+1)*rowBytes], pool[src:src+rowBytes])
	}
	b := &kernelBench{release: release}
	if b.big, err = kernels.NewMat(dt, rows, cols, data); err != nil {
		release()
		return nil, err
	}
	// The shape grids (calibrate_engine.go) cut their matrices from the same bytes.
	b.x = randomVec(cols, 1)
	b.out = make([]float32, rows)
	return b, nil
}

// randomRows is rows×cols N(0, 0.02²) weights in dt. Quantized rows are built directly
// (an f16 scale, then random codes), so they do not need a quantizer.
func randomRows(dt tensor.DType, rows, cols int) ([]byte, error) {
	rng := rand.New(rand.NewPCG(3, 4))
	n, err := dt.BytesFor(rows * cols)
	if err != nil {
		return nil, err
	}
	out := make([]byte, n)
	switch dt {
	case tensor.F32, tensor.F16, tensor.BF16:
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(0.02 * rng.NormFloat64())
		}
		return out, tensor.Quantize(dt, v, out)
	case tensor.Q8_0, tensor.Q4_0:
		bs := dt.BlockBytes()
		for b := 0; b < n; b += bs {
			scale := tensor.F32ToF16(float32(0.0005 + 0.001*rng.Float64()))
			out[b], out[b+1] = byte(scale), byte(scale>>8)
			for i := b + 2; i < b+bs; i++ {
				out[i] = byte(rng.Uint32())
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("dtype %v: no random row", dt)
}

// cpuModel is /proc/cpuinfo's model name where there is one.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH + " CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH + " CPU"
}

// memTotalGB is /proc/meminfo's MemTotal in 10⁹ bytes (0 where unknown).
func memTotalGB() float64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		var kb float64
		if _, err := fmt.Sscanf(line, "MemTotal: %g kB", &kb); err == nil {
			return kb * 1024 / 1e9
		}
	}
	return 0
}

// sysCPUCache is where Linux describes CPU 0's caches, one indexN folder per cache.
const sysCPUCache = "/sys/devices/system/cpu/cpu0/cache"

// lastLevelCacheMiB is the size of the highest-level data or unified cache under dir (a
// sysfs cache folder: indexN/level, indexN/type and indexN/size such as "266240K"), or 0
// where there is none to read (other systems, containers that hide sysfs).
func lastLevelCacheMiB(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	level, kib := 0, 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "index") {
			continue
		}
		read := func(f string) string {
			b, _ := os.ReadFile(dir + "/" + e.Name() + "/" + f)
			return strings.TrimSpace(string(b))
		}
		if read("type") == "Instruction" {
			continue
		}
		var l, n int
		var unit string
		if _, err := fmt.Sscanf(read("level"), "%d", &l); err != nil {
			continue
		}
		if _, err := fmt.Sscanf(read("size"), "%d%s", &n, &unit); err != nil {
			continue
		}
		switch unit {
		case "K":
		case "M":
			n <<= 10
		case "G":
			n <<= 20
		default:
			continue
		}
		if l > level || l == level && n > kib {
			level, kib = l, n
		}
	}
	return kib >> 10
}
