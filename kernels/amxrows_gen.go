//go:build ignore

// amxrows_gen.go writes amxrows_amd64.s and amxrows_amd64_call.go: the Q4_0, Q4_1, Q8_0,
// Q4_K, Q5_K and Q6_K products in the arithmetic of llama.cpp's AMX backend (GGMLAMX), one
// function per dtype and token count T (1..8), over the rows-interleaved repacks of
// amxrows.go. Run `go generate
// ./kernels` after editing it; the generated files are committed.
package main

import (
	"bytes"
	"fmt"
	"os"
)

const maxT = 8

var s bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&s, "\t"+format+"\n", args...) }

// tokAddr is where token t's block starts, plus off bytes: SI (tokens 0..3) or DI (4..7)
// plus t%4 token strides (R8 = one stride, R9 = three).
func tokAddr(t, off int) string {
	base := "SI"
	if t >= 4 {
		base = "DI"
	}
	d := ""
	if off != 0 {
		d = fmt.Sprint(off)
	}
	switch t % 4 {
	case 1:
		return fmt.Sprintf("%s(%s)(R8*1)", d, base)
	case 2:
		return fmt.Sprintf("%s(%s)(R8*2)", d, base)
	case 3:
		return fmt.Sprintf("%s(%s)(R9*1)", d, base)
	}
	return fmt.Sprintf("%s(%s)", d, base)
}

// outAddr is where token t's 16 results go: R13 (tokens 0..3) or R15 (4..7) plus t%4 output
// strides (R12 = one, R14 = three).
func outAddr(t int) string {
	base := "R13"
	if t >= 4 {
		base = "R15"
	}
	switch t % 4 {
	case 1:
		return fmt.Sprintf("(%s)(R12*1)", base)
	case 2:
		return fmt.Sprintf("(%s)(R12*2)", base)
	case 3:
		return fmt.Sprintf("(%s)(R14*1)", base)
	}
	return fmt.Sprintf("(%s)", base)
}

// kernel writes one function: the loop over groups of 16 rows and, within one, over nb
// blocks (super-blocks), with T tokens' results in Z0..Z(T-1). Per block, body emits the
// dtype's arithmetic; the activation pointers then advance by xBlock bytes (SI, DI: tokens
// 0..3 and 4..7), dT (R10) by one block's eight floats, aux (R11) by auxBlock bytes, and the
// weights (AX) by wBlock bytes.
func kernel(name string, T, xShift, wBlock, auxBlock int, consts []uint32, body func(T int)) {
	fmt.Fprintf(&s, "// func %s(w *byte, nb, groups int, x *int8, dT *float32, aux unsafe.Pointer, out *float32, ldo int)\n", name)
	fmt.Fprintf(&s, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	p("MOVQ w+0(FP), AX")
	p("MOVQ groups+16(FP), DX")
	p("MOVQ out+48(FP), R13")
	for i, c := range consts { // byte masks in Z24, Z27
		p("MOVL $0x%08x, R12", c)
		p("VPBROADCASTD R12, Z%d", []int{24, 27}[i])
	}
	fmt.Fprintf(&s, "group:\n")
	p("MOVQ x+24(FP), SI")
	p("MOVQ nb+8(FP), CX")
	p("MOVQ CX, R8")
	p("SHLQ $%d, R8", xShift) // token stride: nb blocks
	p("LEAQ (R8)(R8*2), R9")
	p("LEAQ (SI)(R8*4), DI")
	p("MOVQ dT+32(FP), R10")
	p("MOVQ aux+40(FP), R11")
	for t := range T {
		p("VPXORD Z%d, Z%d, Z%d", t, t, t)
	}
	fmt.Fprintf(&s, "block:\n")
	body(T)
	p("ADDQ $%d, AX", wBlock)
	p("ADDQ $%d, SI", 1<<xShift)
	p("ADDQ $%d, DI", 1<<xShift)
	p("ADDQ $32, R10")
	p("ADDQ $%d, R11", auxBlock)
	p("DECQ CX")
	p("JNZ block")
	p("MOVQ ldo+56(FP), R12")
	p("SHLQ $2, R12")
	p("LEAQ (R12)(R12*2), R14")
	p("LEAQ (R13)(R12*4), R15")
	for t := range T {
		p("VMOVUPS Z%d, %s", t, outAddr(t))
	}
	p("ADDQ $64, R13")
	p("DECQ DX")
	p("JNZ group")
	p("VZEROUPPER")
	p("RET")
	fmt.Fprintf(&s, "\n")
}

// prefetch asks for the weights 2 KiB on, one block's worth (bytes) per block, into L1
// (PREFETCHT0): what the Q4_0, Q4_1 and Q8_0 kernels do, whose models (SmolLM2-135M) sit
// mostly in the last-level cache. Q4_1 times one token on two threads, against a twin with
// the k-quants' prefetch below, alternating in one process: 1536×576 13.6-15.0 µs against
// 13.9-15.3, 49152×576 410-418 against 432-469. (On a 1.2 GB matrix, from memory, the other
// way round: 23.6 against 25.4 GB/s.)
func prefetch(bytes int) {
	for off := 0; off < bytes; off += 64 {
		p("PREFETCHT0 %d(AX)", 2048+off)
	}
}

// prefetchK asks for the weights 8 KiB on into L2 (PREFETCHT1), for the k-quant kernels: their
// models (0.6B parameters and up) stream from memory in a decode step, and without it a core
// stays short of the read probe. A 1.2 GB matrix times one token in huge pages, Xeon Emerald
// Rapids, two threads, each kernel against its twin without the prefetch in alternating
// rounds: Q4_K 22.5 → 26.3 GB/s, Q6_K 21.5 → 24.1 (PREFETCHT0 at 4096 and PREFETCHT1 at 4096
// or 16384 fell between); with it, scripts/bench-llamacpp.sh's decode runs at 67-75% of the
// probe on the Qwen3-0.6B and Llama-3.2-1B shapes. Eight tokens, bound by the arithmetic,
// neither gain nor lose (Q5_K 3072×1024: 193-210 µs either way).
func prefetchK(bytes int) {
	for off := 0; off < bytes; off += 64 {
		p("PREFETCHT1 %d(AX)", 8192+off)
	}
}

// nibbles loads a block of 32 packed nibbles in four runs: Z12+k the 16 rows' elements
// 4k..4k+3 (low nibbles of their bytes 4k..4k+3), Z16+k elements 16+4k..16+4k+3 (high).
func nibbles() {
	for k := range 4 {
		p("VMOVDQU32 %d(AX), Z%d", 64*k, 16+k)
		p("VPANDD Z24, Z%d, Z%d", 16+k, 12+k)
		p("VPSRLD $4, Z%d, Z%d", 16+k, 16+k)
		p("VPANDD Z24, Z%d, Z%d", 16+k, 16+k)
	}
}

// blockSum is token t's exact Σ q·x over a block of 32 into Z22: the weights' runs in
// regs (unsigned bytes, four elements per row and dword), the token's quants broadcast
// from memory four at a time. The runs go into two accumulators (Z22, Z25) added at the end:
// one chain of eight VPDPBUSD waits on each one's latency, two chains of four let a block's
// tokens overlap (the integer sum is exact, so the order changes no bit). BenchmarkSmallN,
// Q4_1 1536×576 on two threads, Xeon Emerald Rapids: 18.5 → 16.1 µs at two tokens, 25.2 →
// 21.3 at three, 55.8 → 45.8 at eight; one token unchanged (12.9); four chains gain nothing
// more. (An AMX tile kernel for 2..8 tokens, one TDPBSUD per block, was slower on that
// matrix at every count, 46–61 µs against 16–47, its tile loads, products and stores running
// one after the other: docs/kernels.md.)
func blockSum(t int, regs []int) {
	p("VPXORD Z22, Z22, Z22")
	p("VPXORD Z25, Z25, Z25")
	for k, r := range regs {
		acc := 22
		if k%2 == 1 {
			acc = 25
		}
		p("VPDPBUSD.BCST %s, Z%d, Z%d", tokAddr(t, 4*k), r, acc)
	}
	p("VPADDD Z25, Z22, Z22")
}

// Q4_0 (amxPackRow, 288 bytes per block): per token c = fma(float(Σ q·x − 8·Σx), d_w·d_x, c)
// (aux: 8·Σx, int32).
func bodyQ4_0(T int) {
	prefetch(288)
	nibbles()
	p("VCVTPH2PS 256(AX), Z20") // d_w of the 16 rows
	for t := range T {
		blockSum(t, []int{12, 13, 14, 15, 16, 17, 18, 19})
		p("VPSUBD.BCST %d(R11), Z22, Z22", 4*t)
		p("VCVTDQ2PS Z22, Z22")
		p("VMULPS.BCST %d(R10), Z20, Z23", 4*t) // d_w·d_x
		p("VFMADD231PS Z23, Z22, Z%d", t)
	}
}

// Q4_1 (amxPackRow, 320 bytes per block): c = fma(float(Σ q·x), d_w·d_x, c), then
// c = fma(m, s_x, c) (aux: s_x, float32).
func bodyQ4_1(T int) {
	prefetch(320)
	nibbles()
	p("VCVTPH2PS 256(AX), Z20") // d_w of the 16 rows
	p("VCVTPH2PS 288(AX), Z21") // m
	for t := range T {
		blockSum(t, []int{12, 13, 14, 15, 16, 17, 18, 19})
		p("VCVTDQ2PS Z22, Z22")
		p("VMULPS.BCST %d(R10), Z20, Z23", 4*t) // d_w·d_x
		p("VFMADD231PS Z23, Z22, Z%d", t)
		p("VFMADD231PS.BCST %d(R11), Z21, Z%d", 4*t, t) // + m·s_x
	}
}

// Q8_0 (amxPackRow, 544 bytes per block: the quants + 128 as unsigned bytes): per token
// c = fma(float(Σ (q+128)·x − 128·Σx), d_w·d_x, c) (aux: 128·Σx, int32).
func bodyQ8_0(T int) {
	prefetch(576)
	for k := range 8 {
		p("VMOVDQU32 %d(AX), Z%d", 64*k, 12+k)
	}
	p("VCVTPH2PS 512(AX), Z20")
	for t := range T {
		blockSum(t, []int{12, 13, 14, 15, 16, 17, 18, 19})
		p("VPSUBD.BCST %d(R11), Z22, Z22", 4*t)
		p("VCVTDQ2PS Z22, Z22")
		p("VMULPS.BCST %d(R10), Z20, Z23", 4*t)
		p("VFMADD231PS Z23, Z22, Z%d", t)
	}
}

// Registers of the k-quant bodies: Z0..Z7 the tokens' float results, Z8..Z15 their integer
// super-block sums, Z16..Z23 a sub-block's weights, Z25 its scales, Z26 a product, Z24 and
// Z27 masks, Z28 the high bits (Q5_K, Q6_K).

// Q6_K (3360 bytes per super-block: the low-nibble plane, the two-bit plane, the scales,
// d): the exact Σ_j sc_j·(Σ q·x − 32·Σx) over the 16 sub-blocks (q as 0..63, put together
// from the planes per run: nibble | (top bits & 0x30)), then c = fma(float(sum), d_w·d_x, c)
// (aux: 32·Σx per sub-block and token, int32, [j][t]).
func bodyQ6K(T int) {
	prefetchK(3360)
	for t := range T {
		p("VPXORD Z%d, Z%d, Z%d", 8+t, 8+t, 8+t)
	}
	for g := range 16 {
		for u := range 4 {
			k := 4*g + u
			p("VMOVDQU32 %d(AX), Z%d", 64*(k%32), 16+u)
			if k >= 32 {
				p("VPSRLD $4, Z%d, Z%d", 16+u, 16+u)
			}
			p("VPANDD Z24, Z%d, Z%d", 16+u, 16+u)
			p("VMOVDQU32 %d(AX), Z28", 2048+64*(k%16))
			switch sh := 4 - 2*(k/16); { // bits 2m, 2m+1 to 4, 5
			case sh > 0:
				p("VPSLLD $%d, Z28, Z28", sh)
			case sh < 0:
				p("VPSRLD $%d, Z28, Z28", -sh)
			}
			p("VPTERNLOGD $0xf8, Z27, Z28, Z%d", 16+u) // z |= top & 0x30
		}
		p("VPMOVSXBD %d(AX), Z25", 3072+16*g)
		for t := range T {
			p("VPXORD Z26, Z26, Z26")
			for k := range 4 {
				p("VPDPBUSD.BCST %s, Z%d, Z26", tokAddr(t, 16*g+4*k), 16+k)
			}
			p("VPSUBD.BCST %d(R11), Z26, Z26", 32*g+4*t)
			p("VPMULLD Z25, Z26, Z26")
			p("VPADDD Z26, Z%d, Z%d", 8+t, 8+t)
		}
	}
	p("VCVTPH2PS 3328(AX), Z20") // d_w of the 16 rows
	for t := range T {
		p("VCVTDQ2PS Z%d, Z%d", 8+t, 8+t)
		p("VMULPS.BCST %d(R10), Z20, Z23", 4*t) // d_w·d_x
		p("VFMADD231PS Z23, Z%d, Z%d", 8+t, t)
	}
}

// Q4_K and Q5_K (amxPackRow: 2496 and 3008 bytes per super-block): the exact
// Σ_j sc_j·Σ q·x over the eight sub-blocks and the exact Σ_j m_j·Σx, then
// c = fma(float(Σ sc·q·x), d_w·d_x, c) and c = c − float(Σ m·Σx)·(dmin_w·d_x), fused (aux:
// each token's pairs (Σx_2k, Σx_2k+1) as int16 in a dword, [k][t]). high: Q5_K, whose fifth
// bits sit in 512 bytes after the nibbles.
func bodyK(high bool) func(T int) {
	sc, mins := 2048, 2176
	if high {
		sc, mins = 2560, 2688
	}
	d := mins + 256
	return func(T int) {
		prefetchK(d + 64)
		for t := range T {
			p("VPXORD Z%d, Z%d, Z%d", 8+t, 8+t, 8+t)
		}
		for g := range 8 {
			j := g / 2
			for k := range 8 {
				p("VMOVDQU32 %d(AX), Z%d", 512*j+64*k, 16+k)
				if g%2 == 1 {
					p("VPSRLD $4, Z%d, Z%d", 16+k, 16+k)
				}
				p("VPANDD Z24, Z%d, Z%d", 16+k, 16+k)
				if high { // bit g of each qh byte to bit 4, or-ed into the nibble
					p("VMOVDQU32 %d(AX), Z28", 2048+64*k)
					switch {
					case g < 4:
						p("VPSLLD $%d, Z28, Z28", 4-g)
					case g > 4:
						p("VPSRLD $%d, Z28, Z28", g-4)
					}
					p("VPTERNLOGD $0xf8, Z27, Z28, Z%d", 16+k) // z |= qh & 0x10
				}
			}
			p("VPMOVZXBD %d(AX), Z25", sc+16*g)
			for t := range T {
				p("VPXORD Z26, Z26, Z26")
				for k := range 8 {
					p("VPDPBUSD.BCST %s, Z%d, Z26", tokAddr(t, 32*g+4*k), 16+k)
				}
				p("VPMULLD Z25, Z26, Z26")
				p("VPADDD Z26, Z%d, Z%d", 8+t, 8+t)
			}
		}
		for k := range 4 {
			p("VMOVDQU32 %d(AX), Z%d", mins+64*k, 16+k)
		}
		p("VCVTPH2PS %d(AX), Z20", d)    // d_w
		p("VCVTPH2PS %d(AX), Z21", d+32) // dmin_w
		for t := range T {
			p("VCVTDQ2PS Z%d, Z%d", 8+t, 8+t)
			p("VMULPS.BCST %d(R10), Z20, Z23", 4*t) // d_w·d_x
			p("VFMADD231PS Z23, Z%d, Z%d", 8+t, t)
			p("VPXORD Z26, Z26, Z26")
			for k := range 4 {
				p("VPDPWSSD.BCST %d(R11), Z%d, Z26", 32*k+4*t, 16+k)
			}
			p("VCVTDQ2PS Z26, Z26")
			p("VMULPS.BCST %d(R10), Z21, Z23", 4*t) // dmin_w·d_x
			p("VFNMADD231PS Z23, Z26, Z%d", t)
		}
	}
}

// kinds are the generated kernels: name prefix, dtype, activation block bytes (log2),
// weight block bytes, aux bytes per block, masks, body.
var kinds = []struct {
	name, dt       string
	xShift, w, aux int
	consts         []uint32
	body           func(T int)
	doc            string
}{
	{"q4_0AMXT", "Q4_0", 5, 288, 32, []uint32{0x0f0f0f0f}, bodyQ4_0, "Q4_0 (the Q4_0 repack; aux[8b+t] 8·Σx of token t's block b, int32): c = fma(float(Σ q·x − 8·Σx), d_w·d_x, c) per block (dotQ4_0AMX)"},
	{"q4_1AMXT", "Q4_1", 5, 320, 32, []uint32{0x0f0f0f0f}, bodyQ4_1, "Q4_1 (the Q4_1 repack; aux[8b+t] s_x, float32): c = fma(float(Σ q·x), d_w·d_x, c), c = fma(m, s_x, c) per block (dotQ4_1AMX)"},
	{"q8_0AMXT", "Q8_0", 5, 544, 32, nil, bodyQ8_0, "Q8_0 (the Q8_0 repack; aux[8b+t] 128·Σx, int32): c = fma(float(Σ q·x), d_w·d_x, c) per block (dotQ8_0AMX)"},
	{"q4KAMXT", "Q4_K", 8, 2496, 128, []uint32{0x0f0f0f0f}, bodyK(false), "Q4_K (the Q4_K repack; aux[32b+8k+t] token t's (Σx_2k, Σx_2k+1) as two int16): c = fma(float(Σ sc·q·x), d_w·d_x, c), c −= float(Σ m·Σx)·(dmin_w·d_x) fused, per super-block (dotQ4_KAMX)"},
	{"q5KAMXT", "Q5_K", 8, 3008, 128, []uint32{0x0f0f0f0f, 0x10101010}, bodyK(true), "Q5_K (the Q5_K repack; aux as Q4_K's), Q4_K's arithmetic (dotQ5_KAMX)"},
	{"q6KAMXT", "Q6_K", 8, 3360, 512, []uint32{0x0f0f0f0f, 0x30303030}, bodyQ6K, "Q6_K (the Q6_K repack; aux[128b+8j+t] 32·Σx over sub-block j, int32): c = fma(float(Σ_j sc_j·(Σ q·x − 32·Σx)), d_w·d_x, c) per super-block (dotQ6_KAMX)"},
}

func main() {
	fmt.Fprintf(&s, "// Code generated by amxrows_gen.go; DO NOT EDIT.\n\n#include \"textflag.h\"\n\n")
	fmt.Fprintf(&s, `// func <kind>AMXT<T>(w *byte, nb, groups int, x *int8, dT *float32, aux unsafe.Pointer, out *float32, ldo int)
//
// groups groups of 16 weight rows in amxrows.go's repack (nb blocks or super-blocks per
// group) times T activation rows (x, nb blocks apart; dT[8b+t] token t's block-b d,
// float32; aux per kind): out[t·ldo + 16g + r] = row 16g+r · token t. A vector's 16 lanes are
// the 16 rows, so each block is one exact integer sum per row and token, converted once and
// fused-multiply-added: the arithmetic of llama.cpp's AMX backend.
`)
	for _, k := range kinds {
		fmt.Fprintf(&s, "\n// %s\n\n", k.doc)
		for T := 1; T <= maxT; T++ {
			kernel(fmt.Sprintf("%s%d", k.name, T), T, k.xShift, k.w, k.aux, k.consts, k.body)
		}
	}
	if err := os.WriteFile("amxrows_amd64.s", s.Bytes(), 0o644); err != nil {
		panic(err)
	}
	s.Reset()
	fmt.Fprintf(&s, "// Code generated by amxrows_gen.go; DO NOT EDIT.\n\n//go:build amd64\n\npackage kernels\n\nimport (\n\t\"unsafe\"\n\n\t\"github.com/tokenwise/tokenwise/tensor\"\n)\n\n")
	for _, k := range kinds {
		for T := 1; T <= maxT; T++ {
			fmt.Fprintf(&s, "//go:noescape\nfunc %s%d(w *byte, nb, groups int, x *int8, dT *float32, aux unsafe.Pointer, out *float32, ldo int)\n\n", k.name, T)
		}
	}
	fmt.Fprintf(&s, "// amxRowsCall runs dt's kernel for T tokens (1..%d); a switch, not a table,\n// so that the arguments do not escape.\nfunc amxRowsCall(dt tensor.DType, T int, w *byte, nb, groups int, x *int8, dT *float32, aux unsafe.Pointer, out *float32, ldo int) {\n\tswitch {\n", maxT)
	for _, k := range kinds {
		for T := 1; T <= maxT; T++ {
			fmt.Fprintf(&s, "\tcase dt == tensor.%s && T == %d:\n\t\t%s%d(w, nb, groups, x, dT, aux, out, ldo)\n", k.dt, T, k.name, T)
		}
	}
	fmt.Fprintf(&s, "\t}\n}\n")
	if err := os.WriteFile("amxrows_amd64_call.go", s.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
