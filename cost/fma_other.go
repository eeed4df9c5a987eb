//go:build !amd64

package cost

// fmaLoop is the portable fallback: scalar multiply-adds in eight independent chains. It
// measures what plain Go reaches, not the vector peak.
func fmaLoop(n int) (flops float64, isa string) { return fmaScalar(n), "scalar" }

// fmaISA is the instruction set fmaLoop uses here.
func fmaISA() string { return "scalar" }
