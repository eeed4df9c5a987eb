//go:build !(goexperiment.simd && amd64)

package kernels

// Without GOEXPERIMENT=simd on amd64 the plain-Go kernels run; these report "not handled".

// simdCPU: no archsimd kernels in this build.
func simdCPU() bool { return false }

func simdMatVecRows(out []float32, w *Mat, x []float32, lo, hi int) bool { return false }

func simdBlock4(out, w, x []float32, n, cols, rows, r int) bool { return false }

func simdQuantRows(out []float32, w *Mat, a *qact, n, lo, hi int) bool { return false }

func simdDot(a, b []float32) (float32, bool) { return 0, false }

func simdAddScaled(y []float32, a float32, x []float32) bool { return false }

func simdWidenRow(dst []float32, src []uint16, half bool) bool { return false }

func simdSiLUMul(gate, up []float32) bool { return false }

func simdRopeHalf(x, cos, sin []float32) bool { return false }
