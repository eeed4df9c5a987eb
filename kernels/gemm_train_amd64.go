//go:build amd64

package kernels

//go:generate go run gemm_train_gen.go

//go:noescape
func gemmBcast1x16Y(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, fresh int)

//go:noescape
func gemmBcast2x16Y(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, fresh int)

//go:noescape
func gemmBcast3x16Y(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, fresh int)

//go:noescape
func gemmBcast4x16Y(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, fresh int)

//go:noescape
func gemmBcast5x16Y(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, fresh int)

//go:noescape
func gemmBcast6x16Y(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, fresh int)

var gemmBcastY = [...]func(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, fresh int){
	nil, gemmBcast1x16Y, gemmBcast2x16Y, gemmBcast3x16Y, gemmBcast4x16Y, gemmBcast5x16Y, gemmBcast6x16Y,
}

// gemmTileRows is the row count of the assembly tile (6×16: twelve accumulators, two B
// registers and one broadcast of the sixteen ymm registers).
const gemmTileRows = 6

// asmGemmTile runs the AVX2 tile of rows ≤ gemmTileRows rows × 16 columns; false where the
// assembly is off. The caller has checked the bounds (gemmTile).
func asmGemmTile(rows int, c []float32, ldc int, a []float32, ars, aks int, b []float32, ldb, k int, fresh bool) bool {
	if !useAsmGEMM {
		return false
	}
	f := 0
	if fresh {
		f = 1
	}
	_ = c[(rows-1)*ldc+15]
	_ = a[(rows-1)*ars+(k-1)*aks]
	_ = b[(k-1)*ldb+15]
	gemmBcastY[rows](&c[0], ldc, &a[0], ars, aks, &b[0], ldb, k, f)
	return true
}

func gemmAsm() bool { return useAsmGEMM }
