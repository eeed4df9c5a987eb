//go:build ignore

// kquant_tile_gen.go writes kquant_tile_amd64.s: the Q4_K prefill tile, a block of rows times
// eight or sixteen tokens per call (kquant_tile.go), in two forms: AVX2 (q4KTileAVX2) and
// 512-bit AVX-512 BW/VNNI (q4KTileZMM). Both are unrolled over groups of eight tokens,
// because the integer sums of a group's eight (row, token) pairs are reduced together in
// registers and the float steps then run on one vector of eight pairs; a second group
// reuses the row's unpacked weights and scales. Run `go generate ./kernels` after
// editing it; the generated file is committed.
package main

import (
	"bytes"
	"fmt"
	"os"
)

var s bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&s, "\t"+format+"\n", args...) }

func label(l string) { fmt.Fprintf(&s, "%s:\n", l) }

func comment(c string) { fmt.Fprintf(&s, "\t// %s\n", c) }

// tok is where token t's activations for the current super-block start: DI (tokens 0..3)
// or R11 (4..7) plus t%4 token strides (R12 = one, R13 = three), plus off bytes.
func tok(t, off int) string {
	base := "DI"
	if t >= 4 {
		base = "R11"
	}
	idx := [4]string{"", "(R12*1)", "(R12*2)", "(R13*1)"}[t%4]
	return fmt.Sprintf("%d(%s)%s", off, base, idx)
}

// prologue loads the arguments and starts the row loop; frame: 32(SP) the super-block's
// scales and mins widened to int16, 64(SP) (AVX2 only) the eight scale vectors.
func prologue(name string, frame int) {
	fmt.Fprintf(&s, "// func %s(w *byte, nb int, q *int8, qStride int, ts *q4KTileSB, acc *float32, rows, rowBytes, groups int)\n", name)
	fmt.Fprintf(&s, "TEXT ·%s(SB), NOSPLIT, $%d-72\n", name, frame)
	p("MOVQ w+0(FP), BX")
	p("MOVQ qStride+24(FP), R12")
	p("LEAQ (R12)(R12*2), R13")
	p("MOVQ acc+40(FP), R9")
	p("MOVQ rows+48(FP), R10")
	p("TESTQ R10, R10")
	p("JZ %s_done", name)
	p("MOVQ nb+8(FP), AX")
	p("TESTQ AX, AX")
	p("JZ %s_done", name)
	label(name + "_row")
	p("MOVQ BX, SI")
	p("MOVQ q+16(FP), DI")
	p("LEAQ (DI)(R12*4), R11")
	p("MOVQ ts+32(FP), R8")
	p("MOVQ nb+8(FP), CX")
}

// scales unpacks the block's 6-bit scales and mins as ggml does (kmask1..3) to int16 at
// 32(SP): the eight scales, then the eight mins. It also broadcasts d_w and dmin_w.
func scales() {
	p("MOVL 4(SI), AX")
	p("MOVL 8(SI), DX")
	p("MOVL 12(SI), R14")
	p("MOVL AX, R15")
	p("ANDL $0x3f3f3f3f, R15")
	p("VMOVD R15, X8")
	p("MOVL R14, R15")
	p("ANDL $0x0f0f0f0f, R15")
	p("SHRL $6, AX")
	p("ANDL $0x03030303, AX")
	p("SHLL $4, AX")
	p("ORL AX, R15")
	p("VPINSRD $1, R15, X8, X8")
	p("MOVL DX, R15")
	p("ANDL $0x3f3f3f3f, R15")
	p("VPINSRD $2, R15, X8, X8")
	p("SHRL $4, R14")
	p("ANDL $0x0f0f0f0f, R14")
	p("SHRL $6, DX")
	p("ANDL $0x03030303, DX")
	p("SHLL $4, DX")
	p("ORL DX, R14")
	p("VPINSRD $3, R14, X8, X8")
	p("VPMOVZXBW X8, Y8")
	p("VMOVDQU Y8, 32(SP)")
}

// tail finishes group g (tokens 8g..8g+7) of a super-block from its pairs' integer sums in
// Y8 (token order): the mins' sums Σ mn_j·(bs_2j+bs_2j+1) from the transposed pair sums in
// ts (VPMADDWD with (mn_2k, mn_2k+1) broadcast), then acc += float(isum)·(d_w·d_x) and
// accM += float(imin)·(dmin_w·d_x), fused, eight pairs per instruction:
// gemm_q4_K_8x8_q8_K's float steps. acc and accM are in accR and accMR, or, where those
// are empty, at 32g(R9) and 64+32g(R9).
func tail(g int, accR, accMR string) {
	for k := range 4 {
		p("VPBROADCASTD %d(SP), Y10", 48+4*k)
		if k == 0 {
			p("VPMADDWD %d(R8), Y10, Y9", 64+64*k+32*g)
		} else {
			p("VPMADDWD %d(R8), Y10, Y10", 64+64*k+32*g)
			p("VPADDD Y10, Y9, Y9")
		}
	}
	p("VCVTDQ2PS Y8, Y8")
	p("VCVTDQ2PS Y9, Y9")
	p("VPBROADCASTW 0(SI), X10")
	p("VCVTPH2PS X10, Y10")
	p("VMULPS %d(R8), Y10, Y10 // d_w·d_x", 32*g)
	p("VPBROADCASTW 2(SI), X11")
	p("VCVTPH2PS X11, Y11")
	p("VMULPS %d(R8), Y11, Y11 // dmin_w·d_x", 32*g)
	if accR == "" {
		p("VMOVUPS %d(R9), Y12", 32*g)
		p("VFMADD231PS Y10, Y8, Y12")
		p("VMOVUPS Y12, %d(R9)", 32*g)
		p("VMOVUPS %d(R9), Y12", 64+32*g)
		p("VFMADD231PS Y11, Y9, Y12")
		p("VMOVUPS Y12, %d(R9)", 64+32*g)
		return
	}
	p("VFMADD231PS Y10, Y8, %s", accR)
	p("VFMADD231PS Y11, Y9, %s", accMR)
}

// group2 runs body for tokens 8..15 where the call has two groups: DI and R11 moved on by
// eight token strides and back.
func group2(name string, body func()) {
	p("CMPQ groups+64(FP), $2")
	p("JNE %s_one", name)
	p("LEAQ (DI)(R12*8), DI")
	p("LEAQ (R11)(R12*8), R11")
	body()
	p("MOVQ R12, AX")
	p("SHLQ $3, AX")
	p("SUBQ AX, DI")
	p("SUBQ AX, R11")
	label(name + "_one")
}

// epilogue ends the super-block and row loops.
func epilogue(name string, accRegs []string) {
	p("ADDQ $144, SI")
	p("ADDQ $256, DI")
	p("ADDQ $256, R11")
	p("ADDQ $320, R8")
	p("DECQ CX")
	p("JNZ %s_block", name)
	for i, r := range accRegs {
		p("VMOVUPS %s, %d(R9)", r, 64*i)
	}
	p("ADDQ $128, R9")
	p("ADDQ rowBytes+56(FP), BX")
	p("DECQ R10")
	p("JNZ %s_row", name)
	label(name + "_done")
	p("VZEROUPPER")
	p("RET")
	s.WriteString("\n")
}

func avx2() {
	const name = "q4KTileAVX2"
	s.WriteString(`// q4KTileAVX2: per super-block, the row's eight runs of 32 unpacked to bytes once
// (Y0..Y7, runs 2j and 2j+1 the low and high nibbles of qs[32j:32j+32]) and each scale
// broadcast to a vector at 64(SP); per token, the run sums VPMADDUBSW, VPMADDWD by the
// scale, VPADDD into one vector; a group's eight token vectors reduced together (VPHADDD
// tree), so tail takes one vector of eight sums. acc/accM stay in the acc buffer (the
// registers are all taken).
`)
	prologue(name, 320)
	label(name + "_block")
	p("PREFETCHT1 4096(SI)")
	p("PREFETCHT1 4160(SI)")
	p("PREFETCHT1 4224(SI)")
	scales()
	for r := range 8 {
		p("VPBROADCASTW %d(SP), Y9", 32+2*r)
		p("VMOVDQU Y9, %d(SP)", 64+32*r)
	}
	p("VMOVDQU kqtM4<>(SB), Y15")
	for j := range 4 {
		p("VMOVDQU %d(SI), Y8", 16+32*j)
		p("VPAND Y15, Y8, Y%d", 2*j)
		p("VPSRLW $4, Y8, Y8")
		p("VPAND Y15, Y8, Y%d", 2*j+1)
	}
	// The reduction tree: A=Y8, B=Y9, C=Y10, D=Y11; Y12 the run products.
	dot := func(t int, dst string) {
		p("VPMADDUBSW %s, Y0, Y12", tok(t, 0))
		p("VPMADDWD 64(SP), Y12, %s", dst)
		for r := 1; r < 8; r++ {
			p("VPMADDUBSW %s, Y%d, Y12", tok(t, 32*r), r)
			p("VPMADDWD %d(SP), Y12, Y12", 64+32*r)
			p("VPADDD Y12, %s, %s", dst, dst)
		}
	}
	group := func(g int) {
		dot(0, "Y8")
		dot(1, "Y9")
		p("VPHADDD Y9, Y8, Y8")
		dot(2, "Y9")
		dot(3, "Y10")
		p("VPHADDD Y10, Y9, Y9")
		p("VPHADDD Y9, Y8, Y8 // per lane: tokens 0..3")
		dot(4, "Y9")
		dot(5, "Y10")
		p("VPHADDD Y10, Y9, Y9")
		dot(6, "Y10")
		dot(7, "Y11")
		p("VPHADDD Y11, Y10, Y10")
		p("VPHADDD Y10, Y9, Y9 // per lane: tokens 4..7")
		p("VPERM2I128 $0x20, Y9, Y8, Y10")
		p("VPERM2I128 $0x31, Y9, Y8, Y11")
		p("VPADDD Y11, Y10, Y8 // tokens 0..7")
		tail(g, "", "")
	}
	group(0)
	group2(name, func() { group(1) })
	epilogue(name, nil)
}

func zmm() {
	const name = "q4KTileZMM"
	s.WriteString(`// q4KTileZMM: q4KTileAVX2 in 512-bit registers (AVX-512 BW, VNNI): runs 2j and 2j+1 in
// one register (Z0..Z3, their activations are the 64 consecutive bytes x[64j:64j+64]), the
// scales in Z4..Z7 (sc_2j in the low half, sc_2j+1 in the high), so a token takes four
// VPMADDUBSW and four VPMADDWD/VPDPWSSD; its 16-lane sum goes to Z16+t%8. A group's eight
// sums are reduced by unpacks to two vectors of four tokens' partial sums per 128-bit lane
// (Z8, Z9; the second group's Z10, Z11), the four of them by VSHUFI64X2 to one vector of
// the sixteen tokens' sums, and the float steps run on sixteen pairs per instruction:
// acc/accM stay in Z12/Z13 for the whole row.
`)
	prologue(name, 64)
	p("VMOVUPS (R9), Z12")
	p("VMOVUPS 64(R9), Z13")
	label(name + "_block")
	p("PREFETCHT1 4096(SI)")
	p("PREFETCHT1 4160(SI)")
	p("PREFETCHT1 4224(SI)")
	scales()
	for j := range 4 {
		p("VPBROADCASTW %d(SP), Z%d", 32+4*j, 4+j)
		p("VPBROADCASTW %d(SP), Y24", 34+4*j)
		p("VINSERTI64X4 $1, Y24, Z%d, Z%d", 4+j, 4+j)
	}
	for j := range 4 {
		p("VMOVDQU64 %d(SI), Y24", 16+32*j)
		p("VPSRLW $4, Y24, Y25")
		p("VINSERTI64X4 $1, Y25, Z24, Z24")
		p("VPANDD kqtM4<>(SB), Z24, Z%d", j)
	}
	group := func(g int) {
		for t := range 8 {
			sum, tmp := fmt.Sprintf("Z%d", 16+t), fmt.Sprintf("Z%d", 24+t%4)
			p("VPMADDUBSW %s, Z0, %s", tok(t, 0), tmp)
			p("VPMADDWD Z4, %s, %s", tmp, sum)
			for j := 1; j < 4; j++ {
				p("VPMADDUBSW %s, Z%d, %s", tok(t, 64*j), j, tmp)
				p("VPDPWSSD Z%d, %s, %s", 4+j, tmp, sum)
			}
		}
		comment("Pairs of tokens: per 128-bit lane [a0+a2, b0+b2, a1+a3, b1+b3].")
		for k := range 4 {
			a, b := 16+2*k, 17+2*k
			p("VPUNPCKLDQ Z%d, Z%d, Z%d", b, a, 24+k)
			p("VPUNPCKHDQ Z%d, Z%d, Z%d", b, a, 28+k)
			p("VPADDD Z%d, Z%d, Z%d", 28+k, 24+k, 24+k)
		}
		comment("Quads: per lane the partial sums of four tokens.")
		for k := range 2 {
			a, b := 24+2*k, 25+2*k
			p("VPUNPCKLQDQ Z%d, Z%d, Z%d", b, a, 16+k)
			p("VPUNPCKHQDQ Z%d, Z%d, Z%d", b, a, 18+k)
			p("VPADDD Z%d, Z%d, Z%d", 18+k, 16+k, 8+2*g+k)
		}
	}
	group(0)
	p("CMPQ groups+64(FP), $2")
	p("JEQ %s_two", name)
	p("VPXORD Z10, Z10, Z10")
	p("VPXORD Z11, Z11, Z11")
	p("JMP %s_sums", name)
	label(name + "_two")
	p("LEAQ (DI)(R12*8), DI")
	p("LEAQ (R11)(R12*8), R11")
	group(1)
	p("MOVQ R12, AX")
	p("SHLQ $3, AX")
	p("SUBQ AX, DI")
	p("SUBQ AX, R11")
	label(name + "_sums")
	comment("The four quads' lanes added: [tokens 0..3, 4..7, 8..11, 12..15].")
	p("VSHUFI64X2 $0x88, Z9, Z8, Z16")
	p("VSHUFI64X2 $0xdd, Z9, Z8, Z17")
	p("VPADDD Z17, Z16, Z16")
	p("VSHUFI64X2 $0x88, Z11, Z10, Z18")
	p("VSHUFI64X2 $0xdd, Z11, Z10, Z19")
	p("VPADDD Z19, Z18, Z18")
	p("VSHUFI64X2 $0x88, Z18, Z16, Z20")
	p("VSHUFI64X2 $0xdd, Z18, Z16, Z21")
	p("VPADDD Z21, Z20, Z8")
	comment("tail's steps for sixteen pairs.")
	for k := range 4 {
		p("VPBROADCASTD %d(SP), Z10", 48+4*k)
		if k == 0 {
			p("VPMADDWD %d(R8), Z10, Z9", 64+64*k)
		} else {
			p("VPMADDWD %d(R8), Z10, Z10", 64+64*k)
			p("VPADDD Z10, Z9, Z9")
		}
	}
	p("VCVTDQ2PS Z8, Z8")
	p("VCVTDQ2PS Z9, Z9")
	p("VPBROADCASTW 0(SI), Y10")
	p("VCVTPH2PS Y10, Z10")
	p("VMULPS (R8), Z10, Z10 // d_w·d_x")
	p("VFMADD231PS Z10, Z8, Z12")
	p("VPBROADCASTW 2(SI), Y11")
	p("VCVTPH2PS Y11, Z11")
	p("VMULPS (R8), Z11, Z11 // dmin_w·d_x")
	p("VFMADD231PS Z11, Z9, Z13")
	epilogue(name, []string{"Z12", "Z13"})
}

func main() {
	s.WriteString(`// Code generated by kquant_tile_gen.go; DO NOT EDIT.

//go:build amd64

#include "textflag.h"

// The Q4_K prefill tile (kquant_tile.go): rows consecutive Q4_K rows (rowBytes apart) of nb
// super-blocks times eight Q8_K activation rows (q, qStride bytes apart), with the tokens'
// scales and mins' pair sums transposed per super-block (ts: q4KTileSB, 160 bytes), adding
// to acc (per row: acc for tokens 0..7, then accM; loaded at the row's start, stored at its
// end). The integer sums are exact, the float steps those of ggml_gemm_q4_K_8x8_q8_K.

DATA kqtM4<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqtM4<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqtM4<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqtM4<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqtM4<>+32(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqtM4<>+40(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqtM4<>+48(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqtM4<>+56(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kqtM4<>(SB), RODATA|NOPTR, $64

`)
	avx2()
	zmm()
	if err := os.WriteFile("kquant_tile_amd64.s", s.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
