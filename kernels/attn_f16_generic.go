//go:build !(goexperiment.simd && amd64)

package kernels

func simdDotF16(q []float32, k []uint16) (float32, bool) { return 0, false }

func simdRoundF16(x []float32) bool { return false }

func simdMadRoundF16(y []float32, a float32, x []uint16) bool { return false }

func simdScaleRoundF16(y []float32, a float32) bool { return false }

func simdAttendF32(out, q, k, v []float32, rows []int32, off, stride int, scale float32, scores []float32) bool {
	return false
}

func simdAttendF32Shared(outs, qs [][]float32, ns []int, k, v []float32, rows []int32, off, stride int, scale float32, scratch []float32) bool {
	return false
}

// avx512AttnSwitch has no 512-bit passes to switch here.
func avx512AttnSwitch(bool) bool { return false }

// attnAsmSwitch has no assembly to switch here.
func attnAsmSwitch(bool) bool { return false }
