package kernels

import (
	"encoding/binary"
	"runtime"
	"sync"

	"github.com/tokenwise/tokenwise/tensor"
)

//go:generate go run amxrows_gen.go

// GGMLAMX's products: the arithmetic of llama.cpp's AMX backend (ggml-cpu/amx/mmq.cpp), where
// each block (super-block for the k-quants) of a row and token is one exact integer sum,
// converted once and fused-multiply-added into one float per row and token, for Q4_0, Q4_1,
// Q8_0, Q4_K, Q5_K and Q6_K weights. Its one-token kernels (tinygemm_kernel_vnni) and its
// tile kernels (the integer tile, then acc_C, and scale_C for the k-quants) give a row and
// token the same sums in the same order, so one reference per dtype (dot*AMX below) covers
// decode, prefill and verification. The kernels (amxrows_amd64.s, amxrows_gen.go) run over
// weights repacked so that a 512-bit register's 16 dword lanes are 16 rows.

// amxArithmetic reports whether llama.cpp's sapphirerapids library (GGMLAMX) multiplies w in
// its AMX backend, in the arithmetic above: a dtype it has AMX kernels for, a row count that
// is a multiple of 32 (amx.cpp's supports_op; the column counts of these dtypes always meet
// its alignment), and not a matrix it keeps out of that backend (SetOutsideAMX).
func amxArithmetic(w *Mat) bool {
	return ggmlAMX && w.amx != nil && w.Rows%32 == 0 && !w.outsideAMX
}

// amxRowsRunBytes is how much of a repack asmAMXRows takes through all the tokens of a pass
// of more than eight at a time: a kernel call takes eight tokens, and without the runs each
// call streamed all of a worker's rows, a prefill of n tokens reading them n/8 times from
// wherever they fit (on Llama-3.2-1B's 2048×8192 Q6_K matrices, a worker's half is 6.9 MB,
// past a core's L2). 0: no runs (benchmarks). BenchmarkAMXRowsRuns, two threads, Xeon Emerald
// Rapids, 512 tokens: Q6_K 8192×2048 46.9 → 41.9 ms, Q8_0 27.6 → 25.7; 1536×576 Q4_1 (a
// worker's rows fit L2) unchanged; 128 KiB to 1 MiB runs within a few percent of each other.
var amxRowsRunBytes = 256 << 10

// amxPack holds a matrix's repack (amxGroupBytes per block and group of 16 rows), made once,
// on the first product that needs it, and kept beside the matrix's own bytes (which
// everything else reads): under that build such a model holds those weights twice.
type amxPack struct {
	once sync.Once
	data []byte
}

// amxGroupBytes is the repack's size per block (super-block) and group of 16 rows.
func amxGroupBytes(dt tensor.DType) int {
	switch dt {
	case tensor.Q4_0:
		return 288
	case tensor.Q4_1:
		return 320
	case tensor.Q8_0:
		return 544
	case tensor.Q4_K:
		return 2496
	case tensor.Q5_K:
		return 3008
	}
	return 3360 // Q6_K
}

// amxPacked returns w's repack, making it on the first call (the workers of that product
// wait for it). The groups of 16 rows are repacked by one goroutine per CPU: the other
// workers of the product are blocked on the Once meanwhile, and a model repacks every
// matrix on its first request: Qwen3-0.6B Q4_K_M's first one-token prefill, two cores, took
// 3.15-3.21 s with one goroutine (3.06 s of CPU in amxPackRow), 2.06-2.61 s with this, and
// 1.43-1.53 s (against 3.5-4.3 in the same minutes) with Q6_K decoded run by run (q6Values).
func amxPacked(w *Mat) []byte {
	w.amx.once.Do(func() {
		bs := w.DType.BlockSize()
		nb, gb := w.Cols/bs, amxGroupBytes(w.DType)
		groups := w.Rows / 16
		out := make([]byte, groups*nb*gb)
		blockBytes := w.rowBytes / nb
		pack := func(g0, g1 int) {
			for g := g0; g < g1; g++ {
				for b := range nb {
					dst := out[(g*nb+b)*gb:][:gb]
					for r := range 16 {
						blk := w.Data[(16*g+r)*w.rowBytes+blockBytes*b:][:blockBytes]
						amxPackRow(w.DType, dst, r, blk)
					}
				}
			}
		}
		parts := min(runtime.GOMAXPROCS(0), groups)
		var wg sync.WaitGroup
		for i := 1; i < parts; i++ {
			wg.Go(func() { pack(groups*i/parts, groups*(i+1)/parts) })
		}
		pack(0, groups/parts)
		wg.Wait()
		w.amx.data = out
	})
	return w.amx.data
}

// amxPackRow writes row r's block blk into its group's repacked block dst. The quants go in
// runs of 64 bytes, run k holding four bytes of each of the 16 rows in row order, so that a
// dword lane is a row:
//
//   - Q4_0 (288 bytes): runs k = 0..3 hold bytes 4k..4k+3 of the quants (low nibbles
//     elements 4k..4k+3, high nibbles 16+4k..16+4k+3); then the 16 rows' f16 d.
//   - Q4_1 (320): the same, then the f16 d, then the f16 m.
//   - Q8_0 (544): runs k = 0..7, elements 4k..4k+3 plus 128 as unsigned bytes (VPDPBUSD
//     multiplies unsigned by signed bytes; the kernel subtracts 128·Σx); then the f16 d.
//   - Q4_K (2496): for each 64-element chunk j, runs 8j+k (k = 0..7) hold bytes 4k..4k+3 of
//     the chunk's 32 quant bytes (sub-block 2j in the low nibbles, 2j+1 in the high); then
//     the eight 6-bit scales by sub-block (16 bytes each); then the mins as int16 pairs
//     (m_2k, m_2k+1) per row, four runs of 64 bytes; then the f16 d and the f16 dmin. The
//     file's 144 bytes per row and super-block become 156.
//   - Q5_K (3008): Q4_K's quants, then eight runs of the fifth bits (bytes 4k..4k+3 of qh),
//     then Q4_K's scales, mins, d and dmin.
//   - Q6_K (3360, the file's size): element runs k = 0..63 (elements 4k..4k+3) as 6-bit
//     values split in two planes: 32 runs of 64 bytes whose low nibbles hold runs 0..31's low
//     four bits and whose high nibbles hold runs 32..63's; then 16 runs of 64 bytes holding
//     the top two bits of runs j, j+16, j+32 and j+48 at bits 0, 2, 4 and 6; then the 16
//     sub-block scales by sub-block (16 bytes each); then the f16 d. (Unpacked to bytes it
//     was 1.3× the file: a decode step, which streams the weights, read 30% more.)
func amxPackRow(dt tensor.DType, dst []byte, r int, blk []byte) {
	switch dt {
	case tensor.Q4_0:
		for k := range 4 {
			copy(dst[64*k+4*r:][:4], blk[2+4*k:][:4])
		}
		copy(dst[256+2*r:][:2], blk[0:2])
	case tensor.Q4_1:
		for k := range 4 {
			copy(dst[64*k+4*r:][:4], blk[4+4*k:][:4])
		}
		copy(dst[256+2*r:][:2], blk[0:2])
		copy(dst[288+2*r:][:2], blk[2:4])
	case tensor.Q8_0:
		for e := range 32 {
			dst[64*(e/4)+4*r+e%4] = blk[2+e] ^ 0x80
		}
		copy(dst[512+2*r:][:2], blk[0:2])
	case tensor.Q4_K, tensor.Q5_K:
		qs, sc := blk[16:144], 2048
		if dt == tensor.Q5_K {
			qs, sc = blk[48:176], 2560
			for k := range 8 {
				copy(dst[2048+64*k+4*r:][:4], blk[16+4*k:][:4])
			}
		}
		for j := range 4 {
			for k := range 8 {
				copy(dst[512*j+64*k+4*r:][:4], qs[32*j+4*k:][:4])
			}
		}
		s, m := q4KScales((*[12]byte)(blk[4:16]))
		for j := range 8 {
			dst[sc+16*j+r] = byte(s[j])
		}
		for k := range 4 {
			binary.LittleEndian.PutUint16(dst[sc+128+64*k+4*r:], uint16(m[2*k]))
			binary.LittleEndian.PutUint16(dst[sc+128+64*k+4*r+2:], uint16(m[2*k+1]))
		}
		copy(dst[sc+384+2*r:][:2], blk[0:2])
		copy(dst[sc+416+2*r:][:2], blk[2:4])
	case tensor.Q6_K:
		// Run k is elements 4k..4k+3. Each byte of the row's lanes is written once: the
		// nibble plane's run k holds runs k (low nibble) and k+32 (high), the two-bit plane's
		// run k the top bits of runs k, k+16, k+32 and k+48 at bits 0, 2, 4 and 6. (Or-ing
		// element by element into zeroed bytes took 2.3× as long: `generate --max-tokens 2`
		// on Llama-3.2-1B Q6_K, model load and warm-up included, 5.7-6.2 → 2.4-2.6 s.)
		var v [256]byte
		q6Values(&v, (*[210]byte)(blk))
		for k := range 32 {
			d, lo, hi := dst[64*k+4*r:][:4], v[4*k:][:4], v[4*(k+32):][:4]
			for i := range 4 {
				d[i] = lo[i]&15 | (hi[i]&15)<<4
			}
		}
		for k := range 16 {
			d := dst[2048+64*k+4*r:][:4]
			a, b, c, e := v[4*k:][:4], v[4*(k+16):][:4], v[4*(k+32):][:4], v[4*(k+48):][:4]
			for i := range 4 {
				d[i] = a[i]>>4 | (b[i]>>4)<<2 | (c[i]>>4)<<4 | (e[i]>>4)<<6
			}
		}
		for j := range 16 {
			dst[3072+16*j+r] = blk[192+j]
		}
		copy(dst[3328+2*r:][:2], blk[208:210])
	}
}

// q6Values is every element of a Q6_K super-block as 0..63, in order (q6Value's layout),
// decoded run by run: the repack takes all 256 of each super-block, and q6Value's switch and
// bounds checks per element were 1.2 of the 3.1 s of CPU that Qwen3-0.6B Q4_K_M's repack took.
func q6Values(vals *[256]byte, blk *[210]byte) {
	for j := range 2 {
		l1, l2, h := blk[64*j:][:32], blk[64*j+32:][:32], blk[128+32*j:][:32]
		v := vals[128*j:][:128]
		for b := range 32 {
			v[b] = l1[b]&15 | (h[b]&3)<<4
			v[32+b] = l2[b]&15 | (h[b]>>2&3)<<4
			v[64+b] = l1[b]>>4 | (h[b]>>4&3)<<4
			v[96+b] = l2[b]>>4 | (h[b]>>6&3)<<4
		}
	}
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

// q5Value is element e (0..255) of a Q5_K super-block as 0..31: the nibble of qs byte
// 32·(e/64) + e%32 (low for even sub-blocks e/32, high for odd) and bit e/32 of qh byte e%32.
func q5Value(blk *[176]byte, e int) byte {
	g, b := e/32, e%32
	v := blk[48+32*(g/2)+b]
	if g%2 == 1 {
		v >>= 4
	}
	return v&15 | (blk[16+b]>>uint(g)&1)<<4
}

// dotQ4_0AMX is a Q4_0 row times a Q8_0 activation row in the AMX backend's arithmetic
// (tinygemm_kernel_vnni and acc_C for block_q4_0): per block the exact Σ (q−8)·x, then
// c = fma(float(sum), d_w·d_x, c).
func dotQ4_0AMX(row []byte, d []float32, q []int8) float32 {
	return dotAMX32(row, 18, d, nil, q, func(blk []byte, e int) int32 { return nibble(blk[2:], e) - 8 })
}

// dotQ4_1AMX is dotQ4_0AMX for Q4_1 and Q8_1 activations: c = fma(float(Σ q·x), d_w·d_x, c),
// then c = fma(m, s_x, c).
func dotQ4_1AMX(row []byte, d, sx []float32, q []int8) float32 {
	return dotAMX32(row, 20, d, sx, q, func(blk []byte, e int) int32 { return nibble(blk[4:], e) })
}

// dotQ8_0AMX is dotQ4_0AMX for Q8_0 weights: c = fma(float(Σ q·x), d_w·d_x, c) per block.
func dotQ8_0AMX(row []byte, d []float32, q []int8) float32 {
	return dotAMX32(row, 34, d, nil, q, func(blk []byte, e int) int32 { return int32(int8(blk[2+e])) })
}

// nibble is element e (0..31) of 16 bytes of packed 4-bit quants: low nibbles first.
func nibble(qs []byte, e int) int32 {
	if e < 16 {
		return int32(qs[e] & 15)
	}
	return int32(qs[e-16] >> 4)
}

// dotAMX32 is the loop of the 32-element-block references: per block of size bytes (d_w at
// its start, and Q4_1's m after it where sx is given) the exact Σ value(e)·x_e, then
// c = fma(float(sum), d_w·d_x, c), and c = fma(m, s_x, c) for Q4_1.
func dotAMX32(row []byte, size int, d, sx []float32, q []int8, value func(blk []byte, e int) int32) float32 {
	var c float32
	for b := range len(row) / size {
		blk := row[b*size:][:size]
		var sum int32
		for e := range 32 {
			sum += value(blk, e) * int32(q[32*b+e])
		}
		c = fma32(float32(sum), f16Table[uint16(blk[0])|uint16(blk[1])<<8]*d[b], c)
		if sx != nil {
			c = fma32(f16Table[uint16(blk[2])|uint16(blk[3])<<8], sx[b], c)
		}
	}
	return c
}

// dotQ4_KAMX is a Q4_K row times one Q8_K activation row in the AMX backend's arithmetic
// (tinygemm_kernel_vnni, scale_C and acc_C for block_q4_K): per super-block the exact
// integers Σ_j sc_j·Σ q·x and Σ_j m_j·Σx over the eight sub-blocks, then
// c = fma(float(first), d_w·d_x, c) and c = fma(float(second), −(dmin_w·d_x), c).
func dotQ4_KAMX(row []byte, d []float32, q []int8, bsums []int16) float32 {
	return dotKAMX(row, 144, d, q, bsums, func(blk []byte, e int) int32 {
		v := blk[16+32*(e/64)+e%32]
		if e%64 >= 32 {
			v >>= 4
		}
		return int32(v & 15)
	})
}

// dotQ5_KAMX is dotQ4_KAMX for Q5_K.
func dotQ5_KAMX(row []byte, d []float32, q []int8, bsums []int16) float32 {
	return dotKAMX(row, 176, d, q, bsums, func(blk []byte, e int) int32 { return int32(q5Value((*[176]byte)(blk), e)) })
}

func dotKAMX(row []byte, size int, d []float32, q []int8, bsums []int16, value func(blk []byte, e int) int32) float32 {
	var c float32
	for i := range len(row) / size {
		blk := row[i*size:][:size]
		sc, mn := q4KScales((*[12]byte)(blk[4:16]))
		var isum, imin int32
		for j := range 8 {
			var s int32
			for e := 32 * j; e < 32*j+32; e++ {
				s += value(blk, e) * int32(q[256*i+e])
			}
			isum += sc[j] * s
			imin += mn[j] * (int32(bsums[16*i+2*j]) + int32(bsums[16*i+2*j+1]))
		}
		c = fma32(float32(isum), f16Table[uint16(blk[0])|uint16(blk[1])<<8]*d[i], c)
		c = fma32(float32(imin), -(f16Table[uint16(blk[2])|uint16(blk[3])<<8] * d[i]), c)
	}
	return c
}

// dotQ6_KAMX is a Q6_K row times one Q8_K activation row in the AMX backend's arithmetic
// (tinygemm_kernel_vnni for block_q6_K; its tile path's scale_C and acc_C do the same sums):
// per super-block the exact integer Σ_j sc_j·(Σ q·x − 32·Σx) over the 16 sub-blocks j (q as
// 0..63), converted and fused-multiply-added with d_w·d_x into one float.
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

// dotKAMXFor is the reference of w's k-quant product under GGMLAMX.
func dotKAMXFor(dt tensor.DType) func(row []byte, d []float32, q []int8, bsums []int16) float32 {
	switch dt {
	case tensor.Q4_K:
		return dotQ4_KAMX
	case tensor.Q5_K:
		return dotQ5_KAMX
	}
	return dotQ6_KAMX
}

// amxKernelsFor reports whether the AMX-arithmetic kernels may take products of w's dtype,
// so that prepare makes their activation layouts: for every matrix of a MatMulMany call,
// which share w's dtype but not its row count or SetOutsideAMX (amxArithmetic decides each
// matrix's product).
func amxKernelsFor(w *Mat) bool {
	return ggmlAMX && amxRowsRun() && w.amx != nil
}

// prepAMX makes the layouts the AMX-arithmetic Q4_0, Q4_1 and Q8_0 kernels take: the
// transposed scales a.sn.dT (and Q4_1's a.sn.sT, the small-n kernels' layout, where
// prepSmallN did not make them for this product), and for Q4_0 and Q8_0 a.amxComp, the
// offset's share c·Σx of each block (c = 8, 128) by token in groups of eight.
func prepAMX(a *qact, w *Mat, n int) {
	if !amxKernelsFor(w) {
		return
	}
	nb := w.Cols / 32
	groups := (n + 7) / 8
	if a.sn.n != n || a.sn.dt != w.DType {
		a.sn.dT = grow(a.sn.dT, groups*nb*8)
		byTokenGroups(a.sn.dT, a.d, n, nb)
		if w.DType == tensor.Q4_1 {
			a.sn.sT = grow(a.sn.sT, groups*nb*8)
			byTokenGroups(a.sn.sT, a.s, n, nb)
		}
	}
	if w.DType != tensor.Q4_1 {
		c := int32(8)
		if w.DType == tensor.Q8_0 {
			c = 128
		}
		a.amxComp = grow(a.amxComp, groups*nb*8)
		for t := range n {
			g, j := t/8, t%8
			for b, s := range a.sums[t*nb : (t+1)*nb] {
				a.amxComp[g*nb*8+8*b+j] = c * s
			}
		}
	}
	a.amxN = n
}

// prepKAMX makes a's AMX-kernel layouts for the k-quant product of n tokens, by super-block
// and then token in groups of eight: d, and per token Q6_K's 32·Σx of each of the 16
// sub-blocks, or Q4_K's and Q5_K's sums of the eight 32-element sub-blocks paired as two
// int16 in a dword (VPDPWSSD's operand, as the AMX backend's _mm_hadd_epi16 makes them).
func prepKAMX(a *qactK, w *Mat, n int) {
	if !amxKernelsFor(w) {
		return
	}
	nb := w.Cols / 256
	groups := (n + 7) / 8
	a.amxD = grow(a.amxD, groups*nb*8)
	byTokenGroups(a.amxD, a.d, n, nb)
	if w.DType == tensor.Q6_K {
		a.amxComp = grow(a.amxComp, groups*nb*128)
		for t := range n {
			g, j := t/8, t%8
			for b := range nb {
				for k := range 16 {
					a.amxComp[(g*nb+b)*128+8*k+j] = 32 * int32(a.bsums[(t*nb+b)*16+k])
				}
			}
		}
	} else {
		a.amxComp = grow(a.amxComp, groups*nb*32)
		for t := range n {
			g, j := t/8, t%8
			for b := range nb {
				bs := a.bsums[(t*nb+b)*16:][:16]
				for k := range 4 {
					lo := uint16(bs[4*k] + bs[4*k+1])
					hi := uint16(bs[4*k+2] + bs[4*k+3])
					a.amxComp[(g*nb+b)*32+8*k+j] = int32(uint32(lo) | uint32(hi)<<16)
				}
			}
		}
	}
	a.amxN = n
}
