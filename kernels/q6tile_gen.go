//go:build ignore

// q6tile_gen.go writes q6tile_amd64.s: the Q6_K prefill product on the AMX tile unit
// (q6tile_amd64.go says why and how). Run `go generate ./kernels` after editing it; the
// generated file is committed.
package main

import (
	"bytes"
	"fmt"
	"os"
)

var s bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&s, "\t"+format+"\n", args...) }

// The tile instructions as bytes (the assembler has no AMX mnemonics), registers fixed: C
// (the low and the high plane's sums) in tmm0/tmm1; two operand sets for alternate
// 64-column chunks, A (16 tokens' quants, from SI with the token stride BX) in tmm2/tmm5 and
// B (the chunk's low and high planes, 16 rows of 64 bytes from AX and 4096(AX), stride CX =
// 64) in tmm3, tmm4 / tmm6, tmm7. Encodings checked against GNU as (objdump gives these bytes
// for the AT&T forms in the comments).
const macros = `// tileloadd (%rsi,%rbx,1),%tmm2 / %tmm5: the tokens' quants of a 64-column chunk
#define TILELOADD_T2_SI_BX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x14; BYTE $0x1E
#define TILELOADD_T5_SI_BX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x2C; BYTE $0x1E
// tileloadd (%rax,%rcx,1),%tmm3 / %tmm6 and 0x1000(%rax,%rcx,1),%tmm4 / %tmm7: the chunk's planes
#define TILELOADD_T3_AX_CX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x1C; BYTE $0x08
#define TILELOADD_T4_AX4096_CX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0xA4; BYTE $0x08; BYTE $0x00; BYTE $0x10; BYTE $0x00; BYTE $0x00
#define TILELOADD_T6_AX_CX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x34; BYTE $0x08
#define TILELOADD_T7_AX4096_CX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0xBC; BYTE $0x08; BYTE $0x00; BYTE $0x10; BYTE $0x00; BYTE $0x00
// tdpbsud %tmm3,%tmm2,%tmm0 / %tmm6,%tmm5,%tmm0: C lo += A (signed) · B lo (unsigned)
#define TDPBSUD_T0_T2_T3 BYTE $0xC4; BYTE $0xE2; BYTE $0x62; BYTE $0x5E; BYTE $0xC2
#define TDPBSUD_T0_T5_T6 BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5E; BYTE $0xC5
// tdpbssd %tmm4,%tmm2,%tmm1 / %tmm7,%tmm5,%tmm1: C hi += A (signed) · B hi (signed)
#define TDPBSSD_T1_T2_T4 BYTE $0xC4; BYTE $0xE2; BYTE $0x5B; BYTE $0x5E; BYTE $0xCA
#define TDPBSSD_T1_T5_T7 BYTE $0xC4; BYTE $0xE2; BYTE $0x43; BYTE $0x5E; BYTE $0xCD
// tilestored %tmm0,(%rdi,%rcx,1) / %tmm1,0x400(%rdi,%rcx,1): the sums to the scratch
#define TILESTORED_DI_CX_T0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x0F
#define TILESTORED_DI1024_CX_T1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x8C; BYTE $0x0F; BYTE $0x00; BYTE $0x04; BYTE $0x00; BYTE $0x00
// tilezero %tmm0 / %tmm1; ldtilecfg (%rax); tilerelease
#define TILEZERO_T0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0
#define TILEZERO_T1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC8
#define LDTILECFG_AX BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x00
#define TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0
`

// expand writes q6KTileExpand: a group of 16 rows' nb super-blocks from the rows-interleaved
// repack (amxrows.go: the nibble plane, the two-bit plane, the scales, d; run k = the 16
// rows' elements 4k..4k+3) to v = sc_j·(q − 32) in two byte planes per super-block, in the
// same runs (TDPBSUD's and TDPBSSD's B layout): lo = v & 255 (4096 bytes), then hi = v >> 8
// (4096 bytes, −16..15). q is put together as the rows kernels do (nibble | top bits & 0x30),
// the product taken in 16-bit lanes, the sub-block's 16 scales widened to words and spread
// four to a row by VPERMW (idx: 32 word indexes for rows 0..7, 32 for rows 8..15).
func expand() {
	fmt.Fprintf(&s, "// func q6KTileExpand(w *byte, nb int, dst *byte, idx *uint16)\n")
	fmt.Fprintf(&s, "TEXT ·q6KTileExpand(SB), NOSPLIT, $0-32\n")
	p("MOVQ w+0(FP), AX")
	p("MOVQ nb+8(FP), DX")
	p("MOVQ dst+16(FP), DI")
	p("MOVQ idx+24(FP), R8")
	p("VMOVDQU16 (R8), Z30")
	p("VMOVDQU16 64(R8), Z31")
	p("MOVL $0x0f0f0f0f, R9")
	p("VPBROADCASTD R9, Z24")
	p("MOVL $0x30303030, R9")
	p("VPBROADCASTD R9, Z27")
	p("MOVL $0x20202020, R9")
	p("VPBROADCASTD R9, Z26")
	fmt.Fprintf(&s, "sb:\n")
	for g := range 16 {
		p("VPMOVSXBW %d(AX), Y28", 3072+16*g)
		p("VPERMW Z28, Z30, Z29") // rows 0..7's scales, each four times
		p("VPERMW Z28, Z31, Z28") // rows 8..15's
		for u := range 4 {
			k := 4*g + u
			p("VMOVDQU32 %d(AX), Z16", 64*(k%32))
			if k >= 32 {
				p("VPSRLD $4, Z16, Z16")
			}
			p("VPANDD Z24, Z16, Z16")
			p("VMOVDQU32 %d(AX), Z17", 2048+64*(k%16))
			switch sh := 4 - 2*(k/16); {
			case sh > 0:
				p("VPSLLD $%d, Z17, Z17", sh)
			case sh < 0:
				p("VPSRLD $%d, Z17, Z17", -sh)
			}
			p("VPTERNLOGD $0xf8, Z27, Z17, Z16") // q = nibble | top & 0x30
			p("VPSUBB Z26, Z16, Z16")            // q − 32
			p("VPMOVSXBW Y16, Z18")
			p("VEXTRACTI64X4 $1, Z16, Y19")
			p("VPMOVSXBW Y19, Z19")
			p("VPMULLW Z29, Z18, Z18")
			p("VPMULLW Z28, Z19, Z19")
			p("VPMOVWB Z18, %d(DI)", 64*k) // the low bytes: lo
			p("VPMOVWB Z19, %d(DI)", 64*k+32)
			p("VPSRAW $8, Z18, Z18")
			p("VPSRAW $8, Z19, Z19")
			p("VPMOVWB Z18, %d(DI)", 4096+64*k) // hi
			p("VPMOVWB Z19, %d(DI)", 4096+64*k+32)
		}
	}
	p("ADDQ $3360, AX")
	p("ADDQ $8192, DI")
	p("DECQ DX")
	p("JNZ sb")
	p("VZEROUPPER")
	p("RET")
	fmt.Fprintf(&s, "\n")
}

// tile writes q6KTileSB: super-block b of a panel of G groups of 16 rows (planes: their
// q6KTileExpand planes of b, planesStride apart; w: their repack's super-block b, wStride
// apart, for d) times tiles·16 tokens (x: token 0's quants of b, tokBytes apart; dT: token 0's
// d of b in amxD, dTStride bytes per eight tokens). Per 16 tokens and group, the four
// 64-column chunks' products go into C lo and C hi, which are stored; then per token, exactly
// as the rows kernels (amxrows_gen.go, bodyQ6K): isum = lo + hi·256 (the exact
// Σ_j sc_j·(Σ q·x − 32·Σx)), converted, times d_w·d_x, fused-added into the token's 16
// floats of acc (group gi's tokens accStride bytes after group gi−1's, 64 bytes a token).
// The caller runs b = 0, 1, … over the panel, so each (row, token) gets the rows kernels'
// sums in their order, while a super-block's operands (G·8 KiB of planes, 4 KiB of a tile's
// quants) are read from the near caches by every token tile and group.
func tile() {
	fmt.Fprintf(&s, "// func q6KTileSB(cfg *[64]byte, planes *byte, planesStride int, w *byte, wStride, G int, x *int8, tokBytes, tiles int, dT *float32, dTStride int, acc *float32, accStride int, buf *byte)\n")
	fmt.Fprintf(&s, "TEXT ·q6KTileSB(SB), NOSPLIT, $0-112\n")
	p("MOVQ cfg+0(FP), AX")
	p("LDTILECFG_AX")
	p("MOVQ x+48(FP), SI")
	p("MOVQ tokBytes+56(FP), BX")
	p("MOVQ BX, DX")
	p("SHLQ $4, DX") // 16 tokens
	p("MOVQ dT+72(FP), R10")
	p("MOVQ acc+88(FP), R15")
	p("MOVQ buf+104(FP), DI")
	p("MOVQ $64, CX")
	p("MOVQ tiles+64(FP), R13")
	fmt.Fprintf(&s, "tile:\n")
	p("MOVQ R10, R9")
	p("ADDQ dTStride+80(FP), R9") // tokens 8..15's d
	p("MOVQ planes+8(FP), AX")
	p("MOVQ w+24(FP), R8")
	p("MOVQ R15, R11")
	p("MOVQ G+40(FP), R12")
	fmt.Fprintf(&s, "group:\n")
	p("TILEZERO_T0")
	p("TILEZERO_T1")
	for c := range 4 {
		if c%2 == 0 {
			p("TILELOADD_T2_SI_BX")
			p("TILELOADD_T3_AX_CX")
			p("TILELOADD_T4_AX4096_CX")
			p("TDPBSUD_T0_T2_T3")
			p("TDPBSSD_T1_T2_T4")
		} else {
			p("TILELOADD_T5_SI_BX")
			p("TILELOADD_T6_AX_CX")
			p("TILELOADD_T7_AX4096_CX")
			p("TDPBSUD_T0_T5_T6")
			p("TDPBSSD_T1_T5_T7")
		}
		p("ADDQ $64, SI")
		p("ADDQ $1024, AX")
	}
	p("SUBQ $256, SI")
	p("SUBQ $4096, AX")
	p("TILESTORED_DI_CX_T0")
	p("TILESTORED_DI1024_CX_T1")
	p("VCVTPH2PS 3328(R8), Z20") // d_w of the 16 rows
	for t := range 16 {
		dReg := "R10"
		if t >= 8 {
			dReg = "R9"
		}
		p("VMOVDQU32 %d(DI), Z22", 64*t)
		p("VMOVDQU32 %d(DI), Z21", 1024+64*t)
		p("VPSLLD $8, Z21, Z21")
		p("VPADDD Z21, Z22, Z22")
		p("VCVTDQ2PS Z22, Z22")
		p("VMULPS.BCST %d(%s), Z20, Z23", 4*(t%8), dReg) // d_w·d_x
		p("VMOVUPS %d(R11), Z%d", 64*t, t)
		p("VFMADD231PS Z23, Z22, Z%d", t)
		p("VMOVUPS Z%d, %d(R11)", t, 64*t)
	}
	p("ADDQ planesStride+16(FP), AX")
	p("ADDQ wStride+32(FP), R8")
	p("ADDQ accStride+96(FP), R11")
	p("DECQ R12")
	p("JNZ group")
	p("ADDQ DX, SI")
	p("MOVQ dTStride+80(FP), R14")
	p("LEAQ (R10)(R14*2), R10")
	p("ADDQ $1024, R15")
	p("DECQ R13")
	p("JNZ tile")
	p("TILERELEASE")
	p("VZEROUPPER")
	p("RET")
	fmt.Fprintf(&s, "\n")
}

func main() {
	fmt.Fprintf(&s, "// Code generated by q6tile_gen.go; DO NOT EDIT.\n\n#include \"textflag.h\"\n\n%s\n", macros)
	expand()
	tile()
	if err := os.WriteFile("q6tile_amd64.s", s.Bytes(), 0o644); err != nil {
		panic(err)
	}
}
