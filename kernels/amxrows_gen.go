//go:build ignore

// amxrows_gen.go writes amxrows_amd64.s and amxrows_amd64_call.go: the Q4_1 and Q6_K
// products in the arithmetic of llama.cpp's AMX backend (GGMLAMX), one function per dtype
// and token count T (1..8), over the rows-interleaved repacks of amxrows.go. Run `go generate
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

func kernelQ4_1(T int) {
	name := fmt.Sprintf("q4_1AMXT%d", T)
	fmt.Fprintf(&s, "// func %s(w *byte, nb, groups int, x *int8, dT *float32, aux unsafe.Pointer, out *float32, ldo int)\n", name)
	fmt.Fprintf(&s, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	p("MOVQ w+0(FP), AX")
	p("MOVQ groups+16(FP), DX")
	p("MOVQ out+48(FP), R13")
	p("MOVL $0x0f0f0f0f, R12")
	p("VPBROADCASTD R12, Z24") // nibble mask
	fmt.Fprintf(&s, "group:\n")
	p("MOVQ x+24(FP), SI")
	p("MOVQ nb+8(FP), CX")
	p("MOVQ CX, R8")
	p("SHLQ $5, R8") // token stride: nb·32 bytes
	p("LEAQ (R8)(R8*2), R9")
	p("LEAQ (SI)(R8*4), DI")
	p("MOVQ dT+32(FP), R10")
	p("MOVQ aux+40(FP), R11")
	for t := range T {
		p("VPXORD Z%d, Z%d, Z%d", t, t, t)
	}
	fmt.Fprintf(&s, "block:\n")
	p("PREFETCHT0 2048(AX)")
	p("PREFETCHT0 2112(AX)")
	p("PREFETCHT0 2176(AX)")
	p("PREFETCHT0 2240(AX)")
	p("PREFETCHT0 2304(AX)")
	// Z12+k: the 16 rows' elements 4k..4k+3 (low nibbles of their bytes 4k..4k+3), one row
	// per dword lane; Z16+k: elements 16+4k..16+4k+3 (the high nibbles).
	for k := range 4 {
		p("VMOVDQU32 %d(AX), Z%d", 64*k, 16+k)
		p("VPANDD Z24, Z%d, Z%d", 16+k, 12+k)
		p("VPSRLD $4, Z%d, Z%d", 16+k, 16+k)
		p("VPANDD Z24, Z%d, Z%d", 16+k, 16+k)
	}
	p("VCVTPH2PS 256(AX), Z20") // d_w of the 16 rows
	p("VCVTPH2PS 288(AX), Z21") // m
	for t := range T {
		// The exact Σ q·x of the block for each row: unsigned nibbles by the token's
		// signed quants, four at a time, broadcast from memory.
		p("VPXORD Z22, Z22, Z22")
		for k := range 4 {
			p("VPDPBUSD.BCST %s, Z%d, Z22", tokAddr(t, 4*k), 12+k)
			p("VPDPBUSD.BCST %s, Z%d, Z22", tokAddr(t, 16+4*k), 16+k)
		}
		p("VCVTDQ2PS Z22, Z22")
		p("VMULPS.BCST %d(R10), Z20, Z23", 4*t) // d_w·d_x
		p("VFMADD231PS Z23, Z22, Z%d", t)
		p("VFMADD231PS.BCST %d(R11), Z21, Z%d", 4*t, t) // + m·s_x
	}
	p("ADDQ $320, AX")
	p("ADDQ $32, SI")
	p("ADDQ $32, DI")
	p("ADDQ $32, R10")
	p("ADDQ $32, R11")
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

// Registers: Z0..Z7 the tokens' float results, Z8..Z15 their integer super-block sums, Z16..Z19
// a sub-block's weights, Z20 its scales, Z21 the product, Z22 the super-block's d_w, Z23 a
// temporary.
func kernelQ6K(T int) {
	name := fmt.Sprintf("q6KAMXT%d", T)
	fmt.Fprintf(&s, "// func %s(w *byte, nb, groups int, x *int8, dT *float32, aux unsafe.Pointer, out *float32, ldo int)\n", name)
	fmt.Fprintf(&s, "TEXT ·%s(SB), NOSPLIT, $0-64\n", name)
	p("MOVQ w+0(FP), AX")
	p("MOVQ groups+16(FP), DX")
	p("MOVQ out+48(FP), R13")
	fmt.Fprintf(&s, "group:\n")
	p("MOVQ x+24(FP), SI")
	p("MOVQ nb+8(FP), CX")
	p("MOVQ CX, R8")
	p("SHLQ $8, R8") // token stride: nb·256 bytes
	p("LEAQ (R8)(R8*2), R9")
	p("LEAQ (SI)(R8*4), DI")
	p("MOVQ dT+32(FP), R11")
	p("MOVQ aux+40(FP), R10")
	for t := range T {
		p("VPXORD Z%d, Z%d, Z%d", t, t, t)
	}
	fmt.Fprintf(&s, "block:\n")
	for t := range T {
		p("VPXORD Z%d, Z%d, Z%d", 8+t, 8+t, 8+t)
	}
	for g := range 16 {
		for k := range 4 {
			p("VMOVDQU32 %d(AX), Z%d", 256*g+64*k, 16+k)
		}
		p("VPMOVSXBD %d(AX), Z20", 4096+16*g)
		for t := range T {
			// Σ q·x over the sub-block's 16 elements per row (q as 0..63), less 32·Σx, times
			// the row's scale, into the super-block's exact integer sum.
			p("VPXORD Z21, Z21, Z21")
			for k := range 4 {
				p("VPDPBUSD.BCST %s, Z%d, Z21", tokAddr(t, 16*g+4*k), 16+k)
			}
			p("VPSUBD.BCST %d(R10), Z21, Z21", 32*g+4*t)
			p("VPMULLD Z20, Z21, Z21")
			p("VPADDD Z21, Z%d, Z%d", 8+t, 8+t)
		}
	}
	p("VCVTPH2PS 4352(AX), Z22") // d_w of the 16 rows
	for t := range T {
		p("VCVTDQ2PS Z%d, Z%d", 8+t, 8+t)
		p("VMULPS.BCST %d(R11), Z22, Z23", 4*t) // d_w·d_x
		p("VFMADD231PS Z23, Z%d, Z%d", 8+t, t)
	}
	p("ADDQ $4384, AX")
	p("ADDQ $256, SI")
	p("ADDQ $256, DI")
	p("ADDQ $32, R11")
	p("ADDQ $512, R10")
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

func main() {
	fmt.Fprintf(&s, "// Code generated by amxrows_gen.go; DO NOT EDIT.\n\n#include \"textflag.h\"\n\n")
	fmt.Fprintf(&s, `// func q4_1AMXT<T>(w *byte, nb, groups int, x *int8, dT *float32, aux unsafe.Pointer, out *float32, ldo int)
//
// groups groups of 16 Q4_1 weight rows in amxrows.go's packQ4_1AMX (w: nb blocks of 320 bytes per
// group) times T activation rows of Q8_1 blocks (x, nb·32 bytes apart; dT[8b+t], aux[8b+t]
// token t's block-b d and s, float32): out[t·ldo + 16g + r] = row 16g+r · token t. A vector's 16
// lanes are the 16 rows, so each block is one exact integer sum per row (eight VPDPBUSD),
// one conversion, and two fused multiply-adds, c = fma(float(Σq·x), d_w·d_x, c) then
// c = fma(m, s_x, c): the arithmetic of llama.cpp's AMX backend (dotQ4_1AMX).

`)
	for T := 1; T <= maxT; T++ {
		kernelQ4_1(T)
	}
	fmt.Fprintf(&s, `// func q6KAMXT<T>(w *byte, nb, groups int, x *int8, dT *float32, aux unsafe.Pointer, out *float32, ldo int)
//
// groups groups of 16 Q6_K weight rows in amxrows.go's packQ6KAMX (w: nb super-blocks of 4384
// bytes per group) times T activation rows of Q8_K super-blocks (x, nb·256 bytes apart;
// dT[8b+t] token t's super-block-b d; aux[128b+8j+t] its 32·Σx over sub-block j, int32):
// out[t·ldo + 16g + r] = row 16g+r · token t. A vector's 16 lanes are the 16 rows; per
// super-block, the exact integer Σ_j sc_j·(Σ q·x − 32·Σx) (q as 0..63), then
// c = fma(float(sum), d_w·d_x, c): the arithmetic of llama.cpp's AMX backend (dotQ6_KAMX).

`)
	for T := 1; T <= maxT; T++ {
		kernelQ6K(T)
	}
	if err := os.WriteFile("amxrows_amd64.s", s.Bytes(), 0o644); err != nil {
		panic(err)
	}
	s.Reset()
	fmt.Fprintf(&s, "// Code generated by amxrows_gen.go; DO NOT EDIT.\n\n//go:build amd64\n\npackage kernels\n\nimport (\n\t\"unsafe\"\n\n\t\"github.com/tokenwise/tokenwise/tensor\"\n)\n\n")
	for _, name := range []string{"q4_1AMXT", "q6KAMXT"} {
		for T := 1; T <= maxT; T++ {
			fmt.Fprintf(&s, "//go:noescape\nfunc %s%d(w *byte, nb, groups int, x *int8, dT *float32, aux unsafe.Pointer, out *float32, ldo int)\n\n", name, T)
		}
	}
	fmt.Fprintf(&s, "// amxRowsCall runs dt's kernel (Q4_1 or Q6_K) for T tokens (1..%d); a switch, not a table,\n// so that the arguments do not escape.\nfunc amxRowsCall(dt tensor.DType, T int, w *byte, nb, groups int, x *int8, dT *float32, aux unsafe.Pointer, out *float32, ldo int) {\n\tswitch {\n", maxT)
	for _, k := range []struct{ dt, name string }{{"Q4_1", "q4_1AMXT"}, {"Q6_K", "q6KAMXT"}} {
		for T := 1; T <= maxT; T++ {
			fmt.Fprintf(&s, "\tcase dt == tensor.%s && T == %d:\n\t\t%s%d(w, nb, groups, x, dT, aux, out, ldo)\n", k.dt, T, k.name, T)
		}
	}
	fmt.Fprintf(&s, "\t}\n}\n")
	if err := os.WriteFile("amxrows_amd64_call.go", s.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
