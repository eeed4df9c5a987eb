package cost

import "golang.org/x/sys/cpu"

//go:noescape
func fmaAVX2(n int)

//go:noescape
func fmaAVX512(n int)

// fmaLoop runs n iterations of the widest FMA loop this CPU has and returns the FLOPs
// done and the instruction set used.
func fmaLoop(n int) (flops float64, isa string) {
	switch {
	case cpu.X86.HasAVX512F:
		fmaAVX512(n)
		return float64(n) * 12 * 16 * 2, "avx512"
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		fmaAVX2(n)
		return float64(n) * 12 * 8 * 2, "avx2+fma"
	}
	return fmaScalar(n), "scalar"
}
