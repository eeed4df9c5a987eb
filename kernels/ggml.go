package kernels

import (
	"fmt"
	"os"

	"golang.org/x/sys/cpu"
)

// GGMLBuild names the llama.cpp CPU build whose floating-point arithmetic the kernels
// reproduce, operation for operation. ggml ships one CPU library per instruction-set level
// and loads the best one the CPU runs; the levels differ in how they sum (8 or 16 float32
// lanes in ggml_vec_dot_f16 and the soft_max sums) and in their exp approximation, which on
// a quantized model moves logits by tenths (SmolLM2-135M Q4_1: 0.15–0.27 between the haswell
// and skylakex libraries). So "matches llama.cpp" needs a named build.
//
// Both builds run on any amd64 CPU with AVX2: the AVX-512 order is emulated with pairs of
// 8-lane registers where the CPU lacks AVX-512. The instruction set the kernels use is a
// separate choice (ISA, SetISA): the kernels that reproduce the build's arithmetic give the
// same bits under every ISA (ISA lists them; the float32/f16/bf16 weight products are not
// among them).
type GGMLBuild int

const (
	// GGMLAVX2 is ggml's AVX2 build (libggml-cpu-haswell: AVX2, FMA, F16C), the one
	// llama.cpp loads on a CPU with AVX2 but neither AVX-512 nor AVX-VNNI (AMD Zen 1–3,
	// Intel Haswell to Comet Lake).
	GGMLAVX2 GGMLBuild = iota
	// GGMLAVX512 is ggml's AVX-512 builds without AMX (libggml-cpu-skylakex; measured on
	// SmolLM2 Q4_1, the cannonlake, cascadelake and zen4 libraries give the same logits).
	// llama.cpp loads one of them on AVX-512 CPUs, except on Intel CPUs with AMX, where it
	// loads libggml-cpu-sapphirerapids (GGMLAMX).
	GGMLAVX512
	// GGMLAMX is ggml's sapphirerapids library, which llama.cpp loads on Intel CPUs with
	// AMX: the AVX-512 build's arithmetic, except that the weights of matrix products in a
	// quantized type it has AMX kernels for go to its AMX buffer (ggml-cpu/amx), whose
	// products sum each block into one integer and accumulate it per row and token
	// (ggmlAMX). The kernels reproduce that for Q4_0, Q4_1, Q8_0, Q4_K, Q5_K and Q6_K
	// (amxArithmetic; the rows-interleaved kernels of amxrows.go); F16 matrices, which that
	// library multiplies with f32 activations in 16-lane sums, keep the AVX-512 build's
	// arithmetic here. It is the default where the CPU has AMX, as it is llama.cpp's (and
	// TOKENWISE_GGML_BUILD=avx512 the way back). Its sums are cheaper than vec_dot's eight
	// float lanes per row and token, which is where llama.cpp's speed on such a CPU comes
	// from (docs/kernels.md); its repacks sit beside the file's bytes, as llama.cpp's AMX
	// buffer does beside its mapped file.
	GGMLAMX
)

func (b GGMLBuild) String() string {
	switch b {
	case GGMLAVX2:
		return "avx2"
	case GGMLAVX512:
		return "avx512"
	case GGMLAMX:
		return "amx"
	}
	return fmt.Sprintf("GGMLBuild(%d)", int(b))
}

// Library is the ggml CPU library (libggml-cpu-NAME.so) of the build that a parity test
// loads as its reference: the lowest instruction-set level with that arithmetic.
func (b GGMLBuild) Library() string {
	switch b {
	case GGMLAVX512:
		return "skylakex"
	case GGMLAMX:
		return "sapphirerapids"
	}
	return "haswell"
}

// ParseGGMLBuild reads a build name as String writes it.
func ParseGGMLBuild(s string) (GGMLBuild, error) {
	switch s {
	case "avx2":
		return GGMLAVX2, nil
	case "avx512":
		return GGMLAVX512, nil
	case "amx":
		return GGMLAMX, nil
	}
	return 0, fmt.Errorf("unknown ggml build %q (want avx2, avx512 or amx)", s)
}

// DefaultGGMLBuild is the build llama.cpp loads on this CPU (AMX on an Intel CPU with AMX,
// AVX-512 where the CPU has the skylakex library's instructions, else AVX2), unless
// TOKENWISE_GGML_BUILD (avx2, avx512, amx) says otherwise.
func DefaultGGMLBuild() GGMLBuild {
	if s := os.Getenv("TOKENWISE_GGML_BUILD"); s != "" {
		if b, err := ParseGGMLBuild(s); err == nil {
			return b
		}
	}
	if CPUHasGGMLBuild(GGMLAMX) {
		return GGMLAMX
	}
	if CPUHasGGMLBuild(GGMLAVX512) {
		return GGMLAVX512
	}
	return GGMLAVX2
}

// CPUHasGGMLBuild reports whether this CPU can load b's reference library (Library), so
// a parity test can run llama.cpp in that build here.
func CPUHasGGMLBuild(b GGMLBuild) bool {
	x := cpu.X86
	switch b {
	case GGMLAVX2:
		return x.HasAVX2 && x.HasFMA
	case GGMLAVX512:
		return x.HasAVX512F && x.HasAVX512CD && x.HasAVX512VL && x.HasAVX512DQ && x.HasAVX512BW
	case GGMLAMX:
		return CPUHasGGMLBuild(GGMLAVX512) && AMXAvailable()
	}
	return false
}

// CurrentGGMLBuild is the build the kernels reproduce now.
func CurrentGGMLBuild() GGMLBuild {
	if ggmlAMX {
		return GGMLAMX
	}
	if ggmlAVX512 {
		return GGMLAVX512
	}
	return GGMLAVX2
}

// SetGGMLBuild makes the kernels reproduce b and returns the build they reproduced before.
// It must not run concurrently with a forward pass: call it before loading a model, or
// between passes (tests run both builds in one process this way).
func SetGGMLBuild(b GGMLBuild) GGMLBuild {
	prev := CurrentGGMLBuild()
	ggmlAVX512 = b == GGMLAVX512 || b == GGMLAMX
	ggmlAMX = b == GGMLAMX
	return prev
}
