package kernels

import (
	"fmt"
	"os"
)

// ISA names the instruction set the kernels run with: which of the Go assembly
// (gemm_amd64.s), the simd/archsimd code (GOEXPERIMENT=simd) and the plain Go loops do the
// work. It is chosen in code (SetISA), so a test can run every path in one process; the
// environment only sets the default (DefaultISA).
//
// The ISA is a different axis from GGMLBuild, which names the llama.cpp build whose
// arithmetic the kernels reproduce. The kernels that reproduce ggml's arithmetic give the
// same bits under every ISA: the quantized products (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K weights,
// activations quantized to 8 bits), the f16 KV cache's attention (DotF16, FlashF16,
// FlashTiled), SiLUMul, RopeHalf and the f16/bf16 conversions (up to the double rounding
// of plain Go's float32 fused multiply-add, fma32, in ties too rare to have shown). The
// float32, f16 and bf16 weight products and Dot and AddScaled do not: each path sums in its
// own lane order (16 lanes in the AVX-512 prefill tile, 8 in the AVX2 kernels, scalar
// accumulators in plain Go), so their results move in the last bits between ISAs, within
// float32 rounding of the exact product. (The f16 matrix×vector product has DotF16's bits
// under ISAAVX2 and ISAAVX512 where the rows are a multiple of 64 columns, not under ISAGo;
// bf16 decode differs between ISAAVX2 and ISAAVX512 too.)
type ISA int

const (
	// ISAGo is plain Go only: no assembly and no simd/archsimd code. It runs everywhere,
	// and is the only ISA on architectures other than amd64.
	ISAGo ISA = iota
	// ISAAVX2 is the AVX2/FMA/F16C assembly and, built with GOEXPERIMENT=simd, the
	// archsimd kernels: the kernels a CPU without AVX-512 runs.
	ISAAVX2
	// ISAAVX512 adds the AVX-512 kernels (f16/bf16 decode, the float32 prefill tile, VNNI
	// Q8_0 tiles and k-quant rows, 512-bit attention passes, the tiled attention's GEMM and softmax), each
	// where the CPU has the extensions it needs (AVX-512F; VNNI and VL, DQ for some).
	ISAAVX512
)

func (i ISA) String() string {
	switch i {
	case ISAGo:
		return "go"
	case ISAAVX2:
		return "avx2"
	case ISAAVX512:
		return "avx512"
	}
	return fmt.Sprintf("ISA(%d)", int(i))
}

// ParseISA reads an ISA name as String writes it (go, avx2, avx512).
func ParseISA(s string) (ISA, error) {
	switch s {
	case "go":
		return ISAGo, nil
	case "avx2":
		return ISAAVX2, nil
	case "avx512":
		return ISAAVX512, nil
	}
	return 0, fmt.Errorf("unknown instruction set %q (want go, avx2 or avx512)", s)
}

// BestISA is the widest ISA this CPU (and this build's architecture) runs.
func BestISA() ISA { return cpuISA }

// SupportedISAs lists the ISAs this CPU runs, ISAGo first.
func SupportedISAs() []ISA {
	var s []ISA
	for i := ISAGo; i <= BestISA(); i++ {
		s = append(s, i)
	}
	return s
}

// DefaultISA is the ISA the kernels start with: BestISA, lowered by the environment, which
// is read once when the program starts: TOKENWISE_ISA=go|avx2|avx512 asks for that ISA
// (where the CPU runs it, else BestISA), TOKENWISE_NO_AVX512=1 for ISAAVX2 at most.
//
// Two more variables stay user overrides under any ISA: TOKENWISE_NO_ASM=1 turns the
// assembly off and leaves the archsimd and Go code (to measure one against the other), and
// TOKENWISE_Q8_TILE=256 / TOKENWISE_F16_DECODE=rows4 / TOKENWISE_KQ_TILE=0 pick variants
// of single kernels.
func DefaultISA() ISA { return defaultISA }

var defaultISA = envISA(os.Getenv, BestISA())

// envISA is DefaultISA for the environment getenv reads on a CPU whose best ISA is best.
func envISA(getenv func(string) string, best ISA) ISA {
	i := best
	if s := getenv("TOKENWISE_ISA"); s != "" {
		if want, err := ParseISA(s); err == nil && want <= i {
			i = want
		}
	}
	if getenv("TOKENWISE_NO_AVX512") != "" {
		i = min(i, ISAAVX2)
	}
	return i
}

// noAsm is TOKENWISE_NO_ASM: the assembly stays off under every ISA.
var noAsm = os.Getenv("TOKENWISE_NO_ASM") != ""

// isa is the ISA the kernels run with now; setISA derives every path switch from it.
var isa = setISA(defaultISA)

// CurrentISA is the ISA the kernels run with now.
func CurrentISA() ISA { return isa }

// SetISA makes the kernels run with instruction set i and returns the one they ran with
// before; it fails, and changes nothing, where this CPU cannot run i. Like SetGGMLBuild it
// must not run concurrently with a forward pass or any other kernel call: call it before
// loading a model, or between passes (the tests run every ISA in one process this way).
func SetISA(i ISA) (prev ISA, err error) {
	prev = isa
	if i < ISAGo || i > BestISA() {
		return prev, fmt.Errorf("kernels: instruction set %v not available on this CPU (best: %v)", i, BestISA())
	}
	isa = setISA(i)
	return prev, nil
}
