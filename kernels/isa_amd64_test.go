//go:build amd64

package kernels

import "testing"

// The assembly tests also run under every ISA (TestKernelsEveryISA): under ISAAVX2 on an
// AVX-512 CPU they test the AVX2 kernels that CPUs without AVX-512 run.
func init() {
	isaTests = append(isaTests, []struct {
		name string
		f    func(*testing.T)
	}{
		{"AsmDotQ8_0", TestAsmDotQ8_0},
		{"AsmDotF16BothOrders", TestAsmDotF16BothOrders},
		{"Tile4x4F32Z", TestTile4x4F32Z},
		{"WidenRowsAllValues", TestWidenRowsAllValues},
		{"MatVecF16RowOrder", TestMatVecF16RowOrder},
		{"MatVecBF16RowOrder", TestMatVecBF16RowOrder},
		{"SumWordsAVX2", TestSumWordsAVX2},
		{"MatVecQ8_0Stream", TestMatVecQ8_0Stream},
	}...)
}
