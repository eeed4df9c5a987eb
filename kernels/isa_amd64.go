//go:build amd64

package kernels

import (
	"os"

	"golang.org/x/sys/cpu"
)

// cpuISA is BestISA: AVX2 and FMA for the 256-bit kernels, AVX-512F as well for the
// 512-bit ones.
var cpuISA = func() ISA {
	x := cpu.X86
	switch {
	case x.HasAVX2 && x.HasFMA && x.HasAVX512F:
		return ISAAVX512
	case x.HasAVX2 && x.HasFMA:
		return ISAAVX2
	}
	return ISAGo
}()

// The path switches, all derived by setISA from the ISA and the CPU's features.
var (
	// useSIMD enables the archsimd kernels (GOEXPERIMENT=simd): AVX2 and FMA.
	useSIMD bool
	// useAsmGEMM enables the AVX2/FMA assembly.
	useAsmGEMM bool
	// useAsmQ8 enables the kernels that widen f16 values with F16C: Q8_0 rows (their block
	// scales) and f16 weights.
	useAsmQ8 bool
	// useAVX512Attn selects the 512-bit attention passes and f16/bf16 decode products.
	useAVX512Attn bool
	// useAVX512Tile enables the 16-lane float32 prefill tile (tile4x4F32Z) and the tiled
	// attention's GEMM.
	useAVX512Tile bool
	// useVNNI enables the Q8_0 prefill tiles and the AVX-512 activation quantizer: AVX-512
	// VNNI, VL and BW (the small-n kernels shift words and broadcast them under masks).
	useVNNI bool
	// kqTile selects the Q4_K prefill tile (kquant_tile.go): AVX2 with the k-quant rows,
	// 512-bit where AVX-512 BW and VNNI are on as well.
	kqTile int
)

// noKQTile is TOKENWISE_KQ_TILE=0: the Q4_K prefill tile stays off.
var noKQTile = os.Getenv("TOKENWISE_KQ_TILE") == "0"

// setISA sets every path switch for ISA i (which the CPU runs) and returns i. It is the
// one place the switches are decided: TOKENWISE_NO_ASM (noAsm) keeps the assembly off
// under any ISA.
func setISA(i ISA) ISA {
	x := cpu.X86
	vec := i >= ISAAVX2 && x.HasAVX2 && x.HasFMA
	wide := vec && i >= ISAAVX512 && x.HasAVX512F
	useSIMD = vec && simdCPU()
	useAsmGEMM = vec && !noAsm
	useAsmQ8 = useAsmGEMM && x.HasF16C
	useAVX512Attn = useAsmQ8 && wide
	useAVX512Tile = useAsmGEMM && wide
	useVNNI = useAsmQ8 && wide && x.HasAVX512VNNI && x.HasAVX512VL && x.HasAVX512BW
	switch {
	case !useAsmQ8 || noKQTile:
		kqTile = kqTileOff
	case useVNNI && x.HasAVX512BW:
		kqTile = kqTileZMM
	default:
		kqTile = kqTileAVX2
	}
	useAMX = amxAllowed()
	return i
}

// pathSwitches names the switches that are on, for tests and diagnostics.
func pathSwitches() map[string]bool {
	return map[string]bool{
		"simd": useSIMD, "asm": useAsmGEMM, "asmF16C": useAsmQ8, "avx512Attn": useAVX512Attn,
		"avx512Tile": useAVX512Tile, "vnni": useVNNI, "kqTileAVX2": kqTile == kqTileAVX2,
		"kqTileZMM": kqTile == kqTileZMM, "kqDecode": kqDecode && useAsmQ8, "amx": useAMX,
	}
}
