package cost

import "golang.org/x/sys/cpu"

//go:noescape
func fmaAVX2(n int)

//go:noescape
func fmaAVX512(n int)

// fmaISA is the widest FMA instruction set this CPU has: avx512, avx2+fma or scalar.
func fmaISA() string {
	switch {
	case cpu.X86.HasAVX512F:
		return "avx512"
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return "avx2+fma"
	}
	return "scalar"
}

// fmaLoop runs n iterations of the widest FMA loop this CPU has and returns the FLOPs
// done and the instruction set used.
func fmaLoop(n int) (flops float64, isa string) {
	switch isa = fmaISA(); isa {
	case "avx512":
		fmaAVX512(n)
		return float64(n) * 12 * 16 * 2, isa
	case "avx2+fma":
		fmaAVX2(n)
		return float64(n) * 12 * 8 * 2, isa
	}
	return fmaScalar(n), isa
}
