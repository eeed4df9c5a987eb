package kernels

import "sync"

//go:generate go run q4_1amx_gen.go

// q4_1Pack holds a Q4_1 matrix's weights repacked for the AMX-arithmetic kernels
// (GGMLAMX), made once, on the first product that needs them, and kept beside the matrix's
// own bytes (which everything else reads): under that build a Q4_1 model holds its weights
// twice. For each group of 16 rows and each block, 320 bytes: four runs of 64 bytes, run k
// holding bytes 4k..4k+3 of each of the 16 rows' quants in row order (so a 512-bit
// register's dword lanes are the rows, and its low nibbles elements 4k..4k+3, its high
// nibbles 16+4k..16+4k+3), then the 16 rows' f16 d, then their f16 m: the shape of
// llama.cpp's AMX packing, which lets a block cost one integer sum per row instead of
// vec_dot's eight float lanes.
type q4_1Pack struct {
	once sync.Once
	data []byte
}

// q4_1Packed returns w's repack (amxArithmetic(w) holds: the row count is a multiple of 32),
// making it on the first call; the workers of that product wait for it.
func q4_1Packed(w *Mat) []byte {
	w.amx.once.Do(func() {
		nb := w.Cols / 32
		out := make([]byte, w.Rows/16*nb*320)
		for g := range w.Rows / 16 {
			for b := range nb {
				dst := out[(g*nb+b)*320:][:320]
				for r := range 16 {
					blk := w.Data[(16*g+r)*w.rowBytes+20*b:][:20]
					for k := range 4 {
						copy(dst[64*k+4*r:][:4], blk[4+4*k:][:4])
					}
					copy(dst[256+2*r:][:2], blk[0:2])
					copy(dst[288+2*r:][:2], blk[2:4])
				}
			}
		}
		w.amx.data = out
	})
	return w.amx.data
}

// prepQ4_1AMX makes a's amxD and amxS for w's product of n tokens (and of the other
// matrices of a MatMulMany call, which share the activations) where the AMX-arithmetic
// kernels take it.
func prepQ4_1AMX(a *qact, w *Mat, n int) {
	if !amxArithmetic(w) || !q4_1AMXRuns() {
		return
	}
	nb := w.Cols / 32
	groups := (n + 7) / 8
	a.amxD = grow(a.amxD, groups*nb*8)
	a.amxS = grow(a.amxS, groups*nb*8)
	for t := range n {
		g, j := t/8, t%8
		for b := range nb {
			a.amxD[g*nb*8+8*b+j] = a.d[t*nb+b]
			a.amxS[g*nb*8+8*b+j] = a.s[t*nb+b]
		}
	}
}
