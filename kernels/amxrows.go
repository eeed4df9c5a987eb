package kernels

import (
	"sync"

	"github.com/tokenwise/tokenwise/tensor"
)

//go:generate go run amxrows_gen.go

// The products of GGMLAMX, llama.cpp's AMX backend's arithmetic, over weights repacked so
// that a 512-bit register's 16 dword lanes are 16 rows (amxrows_amd64.s). The references are
// dotQ4_1AMX (quant_dot.go) and dotQ6_KAMX (below).

// amxPack holds a Q4_1 or Q6_K matrix's repack (packQ4_1AMX, packQ6KAMX), made once, on the
// first product that needs it, and kept beside the matrix's own bytes (which everything else
// reads): under that build such a model holds those weights twice.
type amxPack struct {
	once sync.Once
	data []byte
}

// amxPacked returns w's repack, making it on the first call (the workers of that product
// wait for it).
func amxPacked(w *Mat) []byte {
	w.amx.once.Do(func() {
		if w.DType == tensor.Q4_1 {
			w.amx.data = packQ4_1AMX(w)
		} else {
			w.amx.data = packQ6KAMX(w)
		}
	})
	return w.amx.data
}

// packQ4_1AMX: for each group of 16 rows and each block, 320 bytes: four runs of 64 bytes,
// run k holding bytes 4k..4k+3 of each of the 16 rows' quants in row order (low nibbles
// elements 4k..4k+3, high nibbles 16+4k..16+4k+3), then the 16 rows' f16 d, then their f16
// m: the shape of llama.cpp's AMX packing, which lets a block cost one integer sum per row
// instead of vec_dot's eight float lanes. The row count is a multiple of 32 (amxArithmetic).
func packQ4_1AMX(w *Mat) []byte {
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
	return out
}

// packQ6KAMX: for each group of 16 rows and each super-block, 4384 bytes: 64 runs of 64
// bytes, run k holding elements 4k..4k+3 of each of the 16 rows as bytes 0..63, then the 16
// sub-block scales of each row by sub-block (16 bytes per sub-block), then the 16 rows' f16
// d. Unpacked to bytes, it is 1.3× the file's 210 bytes per row and super-block: simpler and
// quicker to multiply, more to read.
func packQ6KAMX(w *Mat) []byte {
	nb := w.Cols / 256
	out := make([]byte, w.Rows/16*nb*4384)
	for g := range w.Rows / 16 {
		for b := range nb {
			dst := out[(g*nb+b)*4384:][:4384]
			for r := range 16 {
				blk := (*[210]byte)(w.Data[(16*g+r)*w.rowBytes+210*b:])
				for e := range 256 {
					dst[64*(e/4)+4*r+e%4] = q6Value(blk, e)
				}
				for j := range 16 {
					dst[4096+16*j+r] = blk[192+j]
				}
				dst[4352+2*r], dst[4352+2*r+1] = blk[208], blk[209]
			}
		}
	}
	return out
}

// amxArithmeticK reports whether llama.cpp's sapphirerapids library (GGMLAMX) multiplies the
// k-quant matrix w in its AMX backend with an arithmetic tokenwise reproduces: Q6_K (Q4_K
// and Q5_K keep the AVX-512 build's arithmetic, not reproduced yet), row count a multiple
// of 32 (amx.cpp's supports_op), not kept out of that backend (SetOutsideAMX).
func amxArithmeticK(w *Mat) bool {
	return ggmlAMX && w.DType == tensor.Q6_K && w.Rows%32 == 0 && !w.outsideAMX
}

// q6Value is element e (0..255) of a Q6_K super-block as 0..63 (ggml's layout: two halves of
// 128, each four runs of 32 from ql's low and high nibbles and qh's bit pairs).
func q6Value(blk *[210]byte, e int) byte {
	j, t, b := e/128, e%128/32, e%32
	l1, l2, h := blk[64*j:], blk[64*j+32:], blk[128+32*j:]
	switch t {
	case 0:
		return l1[b]&15 | (h[b]&3)<<4
	case 1:
		return l2[b]&15 | (h[b]>>2&3)<<4
	case 2:
		return l1[b]>>4 | (h[b]>>4&3)<<4
	}
	return l2[b]>>4 | (h[b]>>6&3)<<4
}

// dotQ6_KAMX is a Q6_K row times one Q8_K activation row in the arithmetic of llama.cpp's AMX
// backend (tinygemm_kernel_vnni for block_q6_K in ggml-cpu/amx/mmq.cpp; its tile path's
// scale_C and acc_C do the same sums): per super-block the exact integer
// Σ_j sc_j·(Σ q·x − 32·Σx) over the 16 sub-blocks j (q as 0..63), converted and
// fused-multiply-added with d_w·d_x into one float.
func dotQ6_KAMX(row []byte, d []float32, q []int8, bsums []int16) float32 {
	var c float32
	nb := len(row) / 210
	for i := range nb {
		blk := (*[210]byte)(row[i*210:])
		xq := (*[256]int8)(q[i*256:])
		var acc int32
		for j := range 16 {
			var s int32
			for e := 16 * j; e < 16*j+16; e++ {
				s += int32(q6Value(blk, e)) * int32(xq[e])
			}
			s -= 32 * int32(bsums[i*16+j])
			acc += int32(int8(blk[192+j])) * s
		}
		c = fma32(float32(acc), f16Table[uint16(blk[208])|uint16(blk[209])<<8]*d[i], c)
	}
	return c
}

// amxKernelsFor reports whether the AMX-arithmetic kernels may take products of w's dtype,
// so that prepare makes their activation layouts: for every matrix of a MatMulMany call,
// which share w's dtype but not its row count or SetOutsideAMX (amxArithmetic and
// amxArithmeticK decide each matrix's product).
func amxKernelsFor(w *Mat) bool {
	return ggmlAMX && amxRowsRun() && (w.DType == tensor.Q4_1 || w.DType == tensor.Q6_K)
}

// prepQ4_1AMX makes the transposed scales the AMX-arithmetic Q4_1 kernels take, a.sn.dT and
// a.sn.sT (the small-n kernels' layout), where prepSmallN did not make them for this product.
func prepQ4_1AMX(a *qact, w *Mat, n int) {
	if !amxKernelsFor(w) {
		return
	}
	if a.sn.n != n || a.sn.dt != tensor.Q4_1 {
		nb := w.Cols / 32
		groups := (n + 7) / 8
		a.sn.dT = grow(a.sn.dT, groups*nb*8)
		a.sn.sT = grow(a.sn.sT, groups*nb*8)
		byTokenGroups(a.sn.dT, a.d, n, nb)
		byTokenGroups(a.sn.sT, a.s, n, nb)
	}
	a.amxN = n
}

// prepQ6KAMX makes a's AMX-kernel layouts for the Q6_K product of n tokens: d and 32·Σx per
// sub-block, by super-block and then token in groups of eight tokens.
func prepQ6KAMX(a *qactK, w *Mat, n int) {
	if !amxKernelsFor(w) {
		return
	}
	nb := w.Cols / 256
	groups := (n + 7) / 8
	a.amxD = grow(a.amxD, groups*nb*8)
	a.amxComp = grow(a.amxComp, groups*nb*128)
	byTokenGroups(a.amxD, a.d, n, nb)
	for t := range n {
		g, j := t/8, t%8
		for b := range nb {
			for k := range 16 {
				a.amxComp[(g*nb+b)*128+8*k+j] = 32 * int32(a.bsums[(t*nb+b)*16+k])
			}
		}
	}
	a.amxN = n
}
