//go:build !amd64

package kernels

const gemmTileRows = 6

func asmGemmTile(rows int, c []float32, ldc int, a []float32, ars, aks int, b []float32, ldb, k int, fresh bool) bool {
	return false
}

func gemmAsm() bool { return false }
