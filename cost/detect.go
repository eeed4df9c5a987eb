package cost

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/tokenwise/tokenwise/internal/hugemem"
)

// CPU is what chooses a shipped CPU profile for this machine.
type CPU struct {
	Model string `json:"model"` // /proc/cpuinfo's model name
	ISA   string `json:"isa"`   // the widest FMA instructions: avx512, avx2+fma or scalar
	CPUs  int    `json:"cpus"`
}

func (c CPU) String() string { return fmt.Sprintf("%s, %s, %d CPUs", c.Model, c.ISA, c.CPUs) }

// ThisCPU describes the machine the process runs on.
func ThisCPU() CPU { return CPU{Model: cpuModel(), ISA: fmaISA(), CPUs: runtime.NumCPU()} }

// CPUMatch, in a shipped CPU profile, names the machines its rates were measured on: a
// model name containing Model, FMA instructions ISA and CPUs CPUs. An empty field matches
// any machine; a profile without a match (laptop-8core: nominal figures) is never chosen.
type CPUMatch struct {
	Model string `json:"model,omitempty"`
	ISA   string `json:"isa,omitempty"`
	CPUs  int    `json:"cpus,omitempty"`
}

func (m CPUMatch) matches(c CPU) bool {
	return strings.Contains(c.Model, m.Model) && (m.ISA == "" || m.ISA == c.ISA) && (m.CPUs == 0 || m.CPUs == c.CPUs)
}

func (m CPUMatch) String() string {
	var parts []string
	if m.Model != "" {
		parts = append(parts, m.Model)
	}
	if m.ISA != "" {
		parts = append(parts, m.ISA)
	}
	if m.CPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d CPUs", m.CPUs))
	}
	return strings.Join(parts, ", ")
}

// MatchProfile picks the shipped CPU profile whose match describes c and says why; when
// none does, it returns "" and a reason naming what the shipped profiles are for.
func MatchProfile(c CPU) (name, why string) {
	var others []string
	for _, n := range Profiles() {
		p, err := LoadProfile(n)
		if err != nil || p.Kind != "cpu" || p.Match == nil {
			continue
		}
		if p.Match.matches(c) {
			return n, fmt.Sprintf("this CPU (%s) matches the machine it was measured on (%s)", c, p.Match)
		}
		others = append(others, fmt.Sprintf("%s is for %s", n, p.Match))
	}
	why = fmt.Sprintf("no shipped CPU profile matches this CPU (%s)", c)
	if len(others) > 0 {
		why += ": " + strings.Join(others, "; ")
	}
	return "", why
}

// Efficiencies of a quick calibration: those of the shipped epyc-zen3-2core profile, what a
// SIMD engine (llama.cpp) reaches of the raw rates there: about 80% of the FMA peak in
// prefill, the whole read bandwidth in decode.
const (
	quickComputeEfficiency = 0.8
	quickMemoryEfficiency  = 1.0
)

// QuickCalibrate measures this machine's read bandwidth (a sum over readMiB of huge-page
// memory) and FMA peak at `threads` threads: well under a second.
// The profile has no kernel rates, so estimates use these raw rates times the efficiencies
// above, as for a shipped CPU profile; `tokenwise calibrate` measures tokenwise's kernels.
func QuickCalibrate(name string, threads, readMiB int) (*Profile, error) {
	if threads <= 0 {
		return nil, fmt.Errorf("quick calibration: %d threads: must be positive", threads)
	}
	if readMiB <= 0 {
		// Beyond the last-level cache, or the "memory" rate is the cache's.
		readMiB = min(1024, max(256, 4*lastLevelCacheMiB(sysCPUCache)))
	}
	arena, err := hugemem.Alloc(readMiB << 20)
	if err != nil {
		return nil, fmt.Errorf("quick calibration: %d MiB for the read probe: %w", readMiB, err)
	}
	defer hugemem.Free(arena)
	words := unsafe.Slice((*uint64)(unsafe.Pointer(&arena[0])), len(arena)/8)
	for i := range words {
		words[i] = uint64(i) // touch every page so the sweep measures memory, not page faults
	}
	// The FMA loop by CPU time where the system reports it: a core's FMA rate is its own,
	// and on a machine shared with busy processes elapsed time measures the neighbours as
	// much as the core. Not the read probe: threads that a busy machine runs one after the
	// other each get a lone thread's bandwidth, and by CPU time would add those up. It is
	// the best of five by the wall clock instead: noise only ever slows it down.
	fmaClock := "wall"
	if _, ok := processCPU(); ok {
		fmaClock = "cpu"
	}
	tr := ThreadRates{Threads: threads}
	tr.ReadGBs = best(5, func() float64 { return readGBs("wall", words, threads) })
	tr.FMAGFLOPS = best(3, func() float64 { g, _ := fmaGFLOPS(fmaClock, threads); return g })
	c := ThisCPU()
	p := &Profile{
		Name: name, Kind: "cpu",
		Source: fmt.Sprintf("tokenwise quick calibration on %s at %d threads: read %.1f GB/s (%d MiB, wall clock), FMA %.0f GFLOP/s (%s clock); efficiencies %.1f compute, %.1f memory (as epyc-zen3-2core's)",
			c, threads, tr.ReadGBs, readMiB, tr.FMAGFLOPS, fmaClock, quickComputeEfficiency, quickMemoryEfficiency),
		MemGB:             memTotalGB(),
		LLCMiB:            lastLevelCacheMiB(sysCPUCache),
		Interconnect:      Interconnect{Name: "none"},
		ComputeEfficiency: quickComputeEfficiency, MemoryEfficiency: quickMemoryEfficiency,
		Calibration: []ThreadRates{tr},
		MemBWGBs:    tr.ReadGBs,
		PeakTFLOPS:  map[string]float64{},
	}
	for _, k := range []string{"fp32", "fp16", "bf16", "fp8", "int8"} {
		p.PeakTFLOPS[k] = tr.FMAGFLOPS / 1000 // every dtype is widened to f32 for the multiply
	}
	return p, p.Validate()
}
