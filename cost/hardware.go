package cost

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
)

// Profile is one device: its peak rates, memory and interconnect. GPU profiles carry the
// vendor's datasheet numbers (Source says which) and an efficiency factor per resource,
// because no real kernel reaches the peak; CPU profiles written by Calibrate carry measured
// rates per thread count instead, both the raw machine (a plain memory sweep, an FMA loop)
// and what tokenwise's own kernels achieve on each weight dtype.
type Profile struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // "gpu" or "cpu"
	Source string `json:"source"`
	// PeakTFLOPS is dense (not 2:4 sparse) peak throughput in 10¹² operations per second,
	// keyed by compute type: fp32, tf32, fp16, bf16, fp8, int8.
	PeakTFLOPS   map[string]float64 `json:"peak_tflops"`
	MemBWGBs     float64            `json:"mem_bw_gb_s"` // 10⁹ bytes per second
	MemGB        float64            `json:"mem_gb"`      // 10⁹ bytes
	Interconnect Interconnect       `json:"interconnect"`
	// ComputeEfficiency and MemoryEfficiency scale the peaks to what a tuned engine
	// achieves: large GEMMs in serving reach ~60% of the tensor-core peak, decode GEMVs
	// ~80% of the HBM bandwidth.
	ComputeEfficiency float64 `json:"compute_efficiency"`
	MemoryEfficiency  float64 `json:"memory_efficiency"`
	// Calibration holds measured rates, one entry per thread count (CPU profiles).
	Calibration []ThreadRates `json:"calibration,omitempty"`
	// Clock says how the kernel rates were timed: "wall" or "cpu" (CPU time per thread).
	Clock string `json:"clock,omitempty"`
	// LLCMiB is the last-level cache as the operating system reports it (calibrate; 0 where
	// unknown). Weights cycled through per step beyond half of it are predicted at the
	// memory rate (Rates.matVecBW).
	LLCMiB int `json:"llc_mib,omitempty"`
	// Match, in a shipped CPU profile, says which machines it describes (MatchProfile).
	Match *CPUMatch `json:"match,omitempty"`
}

// Interconnect is how devices of this kind talk to each other.
type Interconnect struct {
	Name string  `json:"name"`
	GBs  float64 `json:"gb_s"` // per-device, one direction
	// LatencyUs is the fixed cost of one collective (all-reduce) step.
	LatencyUs float64 `json:"latency_us"`
}

// ThreadRates is what Calibrate measured with a given number of threads.
type ThreadRates struct {
	Threads int `json:"threads"`
	// ReadGBs is a plain sum over a large array: the machine's read bandwidth.
	ReadGBs float64 `json:"read_gb_s"`
	// FMAGFLOPS is a register-only loop of fused multiply-adds (f32).
	FMAGFLOPS float64 `json:"fma_gflops"`
	// Kernels are tokenwise's own kernels on each weight dtype: the decode product
	// (matrix×vector, as bytes of weight read per second) and the prefill product
	// (matrix×matrix, as FLOP/s).
	Kernels map[string]KernelRates `json:"kernels,omitempty"`
	// Engine is what the forward pass costs besides its matrix products (engine.go). With
	// it and the kernels' MatVec table, predictions time the engine's calls one by one;
	// without it (GPU profiles, older calibrations) they are the plain roofline.
	Engine *EngineCosts `json:"engine,omitempty"`
}

// KernelRates are measured rates of the project's kernels on one weight dtype.
type KernelRates struct {
	GEMVGBs    float64     `json:"gemv_gb_s"`
	GEMMGFLOPS float64     `json:"gemm_gflops"`    // the best of GEMM
	GEMM       []TokenRate `json:"gemm,omitempty"` // by tokens per pass
	// MatVec is the decode product's streaming rate by row width and by the bytes of
	// weights cycled through (a model's weights per step: caches hold part of a small
	// model). MatMul is the prefill product's rate by row width and tokens. CallUs is
	// the fixed cost of one product call (activation conversion, hand-over to the
	// workers and back). Absent in profiles calibrated before they were measured.
	MatVec []MatVecRate `json:"matvec,omitempty"`
	MatMul []MatMulRate `json:"matmul,omitempty"`
	CallUs float64      `json:"call_us,omitempty"`
}

// MatVecRate is the matrix×vector rate on rows of Cols weights, cycling through SetMiB of
// weights held as matrices of a few MiB each, with the per-call cost taken out.
type MatVecRate struct {
	Cols   int     `json:"cols"`
	SetMiB int     `json:"set_mib"`
	GBs    float64 `json:"gb_s"`
}

// MatMulRate is the matrix×matrix rate on rows of Cols weights for Tokens tokens per pass:
// GFLOPS per additional row, CallUs what a call costs whatever its rows (converting the
// tokens' activations, the hand-over).
type MatMulRate struct {
	Cols   int     `json:"cols"`
	Tokens int     `json:"tokens"`
	GFLOPS float64 `json:"gflops"`
	CallUs float64 `json:"call_us,omitempty"`
}

// TokenRate is the matrix×matrix rate at a number of tokens per pass.
type TokenRate struct {
	Tokens int     `json:"tokens"`
	GFLOPS float64 `json:"gflops"`
}

//go:embed profiles/*.json
var profileFS embed.FS

// Profiles lists the names of the shipped profiles.
func Profiles() []string {
	entries, _ := fs.ReadDir(profileFS, "profiles")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(names)
	return names
}

// LoadProfile returns a shipped profile by name (h100-sxm, epyc-zen3-2core, ...) or reads
// a profile file, such as one written by `tokenwise calibrate`.
func LoadProfile(nameOrFile string) (*Profile, error) {
	data, err := profileFS.ReadFile(path.Join("profiles", strings.ToLower(nameOrFile)+".json"))
	src := "profile " + nameOrFile
	if err != nil {
		data, err = os.ReadFile(nameOrFile)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("hardware %q: neither a shipped profile (%s) nor a file", nameOrFile, strings.Join(Profiles(), ", "))
			}
			return nil, err
		}
		src = nameOrFile
	}
	var p Profile
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	return &p, nil
}

// Validate checks that the profile can produce rates.
func (p *Profile) Validate() error {
	if p.Kind != "gpu" && p.Kind != "cpu" {
		return fmt.Errorf("kind %q: want gpu or cpu", p.Kind)
	}
	if len(p.Calibration) == 0 {
		if p.MemBWGBs <= 0 {
			return fmt.Errorf("mem_bw_gb_s = %g: must be positive", p.MemBWGBs)
		}
		if len(p.PeakTFLOPS) == 0 {
			return errors.New("peak_tflops: empty")
		}
		if p.ComputeEfficiency <= 0 || p.ComputeEfficiency > 1 || p.MemoryEfficiency <= 0 || p.MemoryEfficiency > 1 {
			return fmt.Errorf("efficiencies %g (compute), %g (memory): must be in (0, 1]", p.ComputeEfficiency, p.MemoryEfficiency)
		}
	}
	for i, c := range p.Calibration {
		if c.Threads <= 0 || c.ReadGBs <= 0 || c.FMAGFLOPS <= 0 {
			return fmt.Errorf("calibration[%d]: threads, read_gb_s and fma_gflops must be positive", i)
		}
		if err := c.validateEngine(); err != nil {
			return fmt.Errorf("calibration[%d]: %w", i, err)
		}
	}
	return nil
}

// Rates are the effective rates the roofline uses for one weight dtype.
type Rates struct {
	FLOPS    float64 `json:"flops"`     // FLOP/s for the products
	WeightBW float64 `json:"weight_bw"` // bytes/s for streaming weights (decode's matrix×vector)
	OtherBW  float64 `json:"other_bw"`  // bytes/s for KV cache and activations
	Threads  int     `json:"threads,omitempty"`
	Basis    string  `json:"basis"` // where the numbers come from
	// MatVecFLOPS, when set, is the FLOP rate of the measured matrix×vector kernel: a
	// decode step of one sequence runs that kernel, not the matrix×matrix one that FLOPS
	// measures, and its measured bandwidth already includes whatever limits it.
	MatVecFLOPS float64 `json:"matvec_flops,omitempty"`
	// GEMM, when set, is the matrix×matrix rate by tokens per pass; forBatch interpolates it.
	GEMM []TokenRate `json:"gemm,omitempty"`
	// MatVec, MatMul, CallUs and Engine, when set (a CPU profile from a calibrate that
	// measured them), time a pass call by call as the engine runs it (engine.go).
	MatVec []MatVecRate `json:"matvec,omitempty"`
	MatMul []MatMulRate `json:"matmul,omitempty"`
	CallUs float64      `json:"call_us,omitempty"`
	Engine *EngineCosts `json:"engine,omitempty"`
	// LLCBytes is the profile's last-level cache (0: unknown).
	LLCBytes float64 `json:"llc_bytes,omitempty"`
}

// forBatch is the rates for a pass of `tokens` tokens per weight read: one token runs the
// matrix×vector kernel.
func (r Rates) forBatch(tokens int) Rates {
	if tokens == 1 && r.MatVecFLOPS > 0 {
		r.FLOPS = r.MatVecFLOPS
		return r
	}
	if g := r.GEMM; len(g) > 0 {
		// Linear in log(tokens) between measured points, flat beyond them.
		switch {
		case tokens <= g[0].Tokens:
			r.FLOPS = g[0].GFLOPS * 1e9
		case tokens >= g[len(g)-1].Tokens:
			r.FLOPS = g[len(g)-1].GFLOPS * 1e9
		default:
			for i := 1; i < len(g); i++ {
				if tokens <= g[i].Tokens {
					f := math.Log(float64(tokens)/float64(g[i-1].Tokens)) / math.Log(float64(g[i].Tokens)/float64(g[i-1].Tokens))
					r.FLOPS = (g[i-1].GFLOPS + f*(g[i].GFLOPS-g[i-1].GFLOPS)) * 1e9
					break
				}
			}
		}
	}
	return r
}

// Rates picks the rates for weights stored as dt. A calibrated profile uses the entry with
// the most threads not above threads (threads <= 0: the most measured) and, when it has
// them, the kernel rates for dt — what tokenwise itself reaches — else the raw machine
// rates times the efficiencies. Other profiles use peak times efficiency.
func (p *Profile) Rates(dt Precision, threads int) (Rates, error) {
	if len(p.Calibration) == 0 {
		peak, ok := p.PeakTFLOPS[dt.Compute]
		if !ok || peak <= 0 {
			return Rates{}, fmt.Errorf("%s: no %s peak for dtype %s", p.Name, dt.Compute, dt.Name)
		}
		bw := p.MemBWGBs * 1e9 * p.MemoryEfficiency
		return Rates{FLOPS: peak * 1e12 * p.ComputeEfficiency, WeightBW: bw, OtherBW: bw,
			Basis: fmt.Sprintf("datasheet peak × efficiency (compute %.2f, memory %.2f)", p.ComputeEfficiency, p.MemoryEfficiency)}, nil
	}
	c := p.Calibration[0]
	for _, e := range p.Calibration {
		if (threads <= 0 || e.Threads <= threads) && e.Threads >= c.Threads {
			c = e
		}
	}
	if threads > 0 && c.Threads > threads {
		return Rates{}, fmt.Errorf("%s: no calibration at %d threads or fewer", p.Name, threads)
	}
	ce, me := p.ComputeEfficiency, p.MemoryEfficiency
	if ce <= 0 {
		ce = 1
	}
	if me <= 0 {
		me = 1
	}
	r := Rates{FLOPS: c.FMAGFLOPS * 1e9 * ce, WeightBW: c.ReadGBs * 1e9 * me, OtherBW: c.ReadGBs * 1e9 * me, Threads: c.Threads,
		Basis: fmt.Sprintf("calibrated machine peaks at %d threads × efficiency (compute %.2f, memory %.2f)", c.Threads, ce, me)}
	if k, ok := c.Kernels[dt.Name]; ok && k.GEMVGBs > 0 && k.GEMMGFLOPS > 0 {
		r.FLOPS, r.WeightBW = k.GEMMGFLOPS*1e9, k.GEMVGBs*1e9
		r.MatVecFLOPS = 2 * r.WeightBW / dt.Bytes
		r.GEMM = k.GEMM
		r.Basis = fmt.Sprintf("calibrated tokenwise kernels (%s) at %d threads", dt.Name, c.Threads)
		if p.Clock == "cpu" {
			r.Basis += ", CPU-time clock"
		}
		if f, ok := c.Kernels["f32"]; ok && f.GEMVGBs > 0 {
			r.OtherBW = f.GEMVGBs * 1e9 // the KV cache is f32 and read by the same loops
		}
		if len(k.MatVec) > 0 && c.Engine != nil {
			r.MatVec, r.MatMul, r.CallUs, r.Engine = k.MatVec, k.MatMul, k.CallUs, c.Engine
			r.LLCBytes = float64(p.LLCMiB) * (1 << 20)
			r.Basis += ", engine calls timed one by one"
		}
	}
	return r, nil
}

// Time is the roofline time of w: compute and memory overlap, so the slower one decides.
func (r Rates) Time(w Work) (seconds, compute, memory float64) {
	compute = w.FLOPs / r.FLOPS
	memory = w.WeightBytes/r.WeightBW + (w.Bytes()-w.WeightBytes)/r.OtherBW
	return max(compute, memory), compute, memory
}

// MemBytes is the device memory in bytes (0 if unknown).
func (p *Profile) MemBytes() float64 { return p.MemGB * 1e9 }

// validateEngine checks the engine model's measurements where a profile has them: every
// rate must be positive and every cost non-negative, or a prediction would divide by zero
// or run backwards.
func (c ThreadRates) validateEngine() error {
	if e := c.Engine; e != nil {
		if e.RunUs < 0 || e.NormNs < 0 || e.AddNs < 0 || e.SiLUNs < 0 || e.RopeNs < 0 || e.AnglesNs < 0 {
			return errors.New("engine: per-call and per-element costs must not be negative")
		}
		if len(e.AttnF32) == 0 {
			return errors.New("engine: attn_f32 is empty")
		}
		for _, a := range append(slices.Clone(e.AttnF32), e.AttnF16...) {
			if a.HeadDim <= 0 || a.Ns <= 0 || a.HeadNs < 0 {
				return fmt.Errorf("engine: attention at head_dim %d: %g ns per position, %g ns per head: want positive, not negative", a.HeadDim, a.Ns, a.HeadNs)
			}
		}
		for _, a := range e.AttnTiled {
			if a.HeadDim <= 0 || a.TileNs <= 0 || a.HeadNs < 0 {
				return fmt.Errorf("engine: tiled attention at head_dim %d: %g ns per tile, %g ns per query tile: want positive, not negative", a.HeadDim, a.TileNs, a.HeadNs)
			}
		}
	}
	for d, k := range c.Kernels {
		if k.CallUs < 0 {
			return fmt.Errorf("kernels[%s]: call_us %g is negative", d, k.CallUs)
		}
		for _, m := range k.MatVec {
			if m.Cols <= 0 || m.SetMiB <= 0 || m.GBs <= 0 {
				return fmt.Errorf("kernels[%s].matvec: cols %d, set %d MiB, %g GB/s: all must be positive", d, m.Cols, m.SetMiB, m.GBs)
			}
		}
		for _, m := range k.MatMul {
			if m.Cols <= 0 || m.Tokens <= 0 || m.GFLOPS <= 0 || m.CallUs < 0 {
				return fmt.Errorf("kernels[%s].matmul: cols %d, %d tokens, %g GFLOP/s: all must be positive", d, m.Cols, m.Tokens, m.GFLOPS)
			}
		}
	}
	return nil
}
