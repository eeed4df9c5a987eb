//go:build !amd64

package kernels

func asmPairs(out, w, x []float32, n, cols, rows, r int) int { return 0 }

func asmDotQ8_0(row []byte, d8 []float32, q []int8) (float32, bool) { return 0, false }

func asmDot4F16(w []uint16, n int, x []float32, acc *[32]float32) int { return 0 }

func asmWidenF16(dst []float32, src []uint16) int { return 0 }

func asmDotF16(q []float32, k []uint16, lanes16 bool) (float32, bool) { return 0, false }

func asmMadRoundF16(y []float32, a float32, x []uint16) int { return 0 }

func asmScaleRoundF16(y []float32, a float32) int { return 0 }

func asmAttendF16(hd int) bool { return false }

func asmAttendPairF16(hd int) bool { return false }

func asmAttnScoresPairF16(out, q []float32, k []uint16, rows []int32, off, stride int, scale float32) {
	panic("kernels: no assembly attention on this architecture")
}

func asmAttnMadPairF16(acc0, acc1 []float32, v []uint16, rows []int32, off, stride int, ms0, vs0, ms1, vs1 []float32) {
	panic("kernels: no assembly attention on this architecture")
}

func asmAttnScoresF16(out, q []float32, k []uint16, rows []int32, off, stride int, scale float32, lanes16 bool) {
	panic("kernels: no assembly attention on this architecture")
}

func asmAttnMadSeqF16(acc []float32, v []uint16, rows []int32, off, stride int, ms, vs []float32) {
	panic("kernels: no assembly attention on this architecture")
}

func asmQ8Tiles(out []float32, w *Mat, a *qact, n, lo, hi int) (r4, n4 int) { return lo, 0 }

func asmTiles4x4(out, w, x []float32, n, cols, rows, r, nr int, acc []float32) bool { return false }

func asmWidenBF16(dst []float32, src []uint16) int { return 0 }

const useAVX512Tile = false

const useVNNI = false

// useAsmQ8: the F16C kernels, among them the one-token k-quant ones (prepDecode), are amd64
// assembly.
const useAsmQ8 = false

func asmRoundF16(dst, src []float32) int { return 0 }

func asmEncodeF16(dst []uint16, src []float32) int { return 0 }

var q8Wide = false

func asmMatVecF16(out []float32, w []uint16, x []float32) bool { return false }

func asmQuantQ8(x []float32, q []int8, d []float32, sum []int32) bool { return false }

func asmAdd(y, x []float32) int { return 0 }

func asmSumSquares4(x []float32, d int, sums *[4]float64) bool { return false }

func asmScaleMul(out, x, w []float32, scale float32) int { return 0 }

func asmArgMax(x []float32) (int, bool, bool) { return 0, false, false }

func asmRopeInterleaved(x, cos, sin []float32) int { return 0 }

func asmQ8Scales(raw []float32, sums []int32, d, s, d8, s8 []float32, withSum bool) int { return 0 }

func asmMatVecBF16(out []float32, w []uint16, x []float32) bool { return false }

func asmGemmBcast4(c []float32, ldc int, a []float32, ars, aks int, b []float32, ldb, k, cols int, fresh bool, scale float32) bool {
	return false
}

func asmColMax64(kq []float32, out *[64]float32) bool { return false }

func asmSoftmaxTile64(kq []float32, m *[64]float32, sums *[64]float64) bool { return false }

func asmSumWords(w []uint64) (uint64, int) { return 0, 0 }
func useAVX512Softmax() bool               { return false }

func asmMatVecQ8_0(out []float32, w *Mat, a *qact, lo, hi int) bool { return false }

func asmMatVecTiled(out []float32, w *Mat, x []float32, lo, hi int) int { return lo }
