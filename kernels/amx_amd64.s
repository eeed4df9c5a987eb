//go:build amd64

#include "textflag.h"

// The AMX Q4_K product (amx_amd64.go). The assembler has no AMX mnemonics, so the tile
// instructions are written as bytes, each behind a macro that names it and fixes its
// registers (VEX encodings from the Intel SDM, checked against GNU as):
//   LDTILECFG (AX)                       C4 E2 78 49 00
//   TILERELEASE                          C4 E2 78 49 C0
//   TILEZERO tmm0 / tmm1                 C4 E2 7B 49 C0 / C8
//   TILELOADD tmm2, (SI)(DX*1)           C4 E2 7B 4B 14 16   A, low byte plane
//   TILELOADD tmm3, (DI)(DX*1)           C4 E2 7B 4B 1C 17   A, high byte plane
//   TILELOADD tmm4, (BX)(CX*1)           C4 E2 7B 4B 24 0B   B, activations
//   TDPBUSD tmm0, tmm2, tmm4             C4 E2 59 5E C2      C lo += A lo (u8) · B (s8)
//   TDPBUSD tmm1, tmm3, tmm4             C4 E2 59 5E CB      C hi += A hi (u8) · B (s8)
//   TILESTORED (R8)(CX*1), tmm0          C4 C2 7A 4B 04 08
//   TILESTORED (R9)(CX*1), tmm1          C4 C2 7A 4B 0C 09
#define LDTILECFG_AX BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x00
#define TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0
#define TILEZERO_T0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0
#define TILEZERO_T1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC8
#define TILELOADD_T2_SI_DX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x14; BYTE $0x16
#define TILELOADD_T3_DI_DX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x1C; BYTE $0x17
#define TILELOADD_T4_BX_CX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x0B
#define TDPBUSD_T0_T2_T4 BYTE $0xC4; BYTE $0xE2; BYTE $0x59; BYTE $0x5E; BYTE $0xC2
#define TDPBUSD_T1_T3_T4 BYTE $0xC4; BYTE $0xE2; BYTE $0x59; BYTE $0x5E; BYTE $0xCB
#define TILESTORED_R8_CX_T0 BYTE $0xC4; BYTE $0xC2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x08
#define TILESTORED_R9_CX_T1 BYTE $0xC4; BYTE $0xC2; BYTE $0x7A; BYTE $0x4B; BYTE $0x0C; BYTE $0x09

// func q4KAMXExpand(w *byte, nb int, side *byte, a *byte)
// One row's nb Q4_K super-blocks expanded to v = sc_j·q as two byte planes per
// super-block (a: 256 low bytes, then 256 high bytes, in column order); the scales come
// from side (entry of super-block b at b·1024: 16 rows of amxSide bytes, int16 scales at
// 32).
TEXT ·q4KAMXExpand(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ side+16(FP), DX
	MOVQ a+24(FP), DI
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	TESTQ CX, CX
	JZ expand_done
expand_block:
	VMOVDQU 16(SI), Y0
	VPAND Y15, Y0, Y1
	VPSRLW $4, Y0, Y2
	VPAND Y15, Y2, Y2
	VPMOVZXBW Y1, Z3
	VPBROADCASTW 32(DX), Z4
	VPMULLW Z4, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 0(DI)
	VPSRLW $8, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 256(DI)
	VPMOVZXBW Y2, Z3
	VPBROADCASTW 34(DX), Z4
	VPMULLW Z4, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 32(DI)
	VPSRLW $8, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 288(DI)
	VMOVDQU 48(SI), Y0
	VPAND Y15, Y0, Y1
	VPSRLW $4, Y0, Y2
	VPAND Y15, Y2, Y2
	VPMOVZXBW Y1, Z3
	VPBROADCASTW 36(DX), Z4
	VPMULLW Z4, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 64(DI)
	VPSRLW $8, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 320(DI)
	VPMOVZXBW Y2, Z3
	VPBROADCASTW 38(DX), Z4
	VPMULLW Z4, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 96(DI)
	VPSRLW $8, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 352(DI)
	VMOVDQU 80(SI), Y0
	VPAND Y15, Y0, Y1
	VPSRLW $4, Y0, Y2
	VPAND Y15, Y2, Y2
	VPMOVZXBW Y1, Z3
	VPBROADCASTW 40(DX), Z4
	VPMULLW Z4, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 128(DI)
	VPSRLW $8, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 384(DI)
	VPMOVZXBW Y2, Z3
	VPBROADCASTW 42(DX), Z4
	VPMULLW Z4, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 160(DI)
	VPSRLW $8, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 416(DI)
	VMOVDQU 112(SI), Y0
	VPAND Y15, Y0, Y1
	VPSRLW $4, Y0, Y2
	VPAND Y15, Y2, Y2
	VPMOVZXBW Y1, Z3
	VPBROADCASTW 44(DX), Z4
	VPMULLW Z4, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 192(DI)
	VPSRLW $8, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 448(DI)
	VPMOVZXBW Y2, Z3
	VPBROADCASTW 46(DX), Z4
	VPMULLW Z4, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 224(DI)
	VPSRLW $8, Z3, Z3
	VPMOVWB Z3, Y5
	VMOVDQU Y5, 480(DI)
	ADDQ $144, SI
	ADDQ $1024, DX
	ADDQ $512, DI
	DECQ CX
	JNZ expand_block
expand_done:
	VZEROUPPER
	RET

// func q4KAMXTile(cfg *[64]byte, a *byte, aStride int, b *byte, side *byte, ts *q4KTileSB, nb int, acc *float32, buf *int32)
// 16 rows (a: their expansions, aStride apart) times 16 tokens (b: their activations in
// TDPBUSD's layout, 4096 bytes per super-block) over nb super-blocks. Per super-block: the
// integer sums of the two byte planes in C lo and C hi (four TDPBUSD each), stored to buf,
// then for each row isum = lo + 256·hi, and the float steps of gemm_q4_K_8x8_q8_K on its 16
// tokens: acc += float(isum)·(d_w·d_x), accM += float(Σ mn·bsum)·(dmin_w·d_x), fused (acc:
// 32 floats per row, the 16 tokens' acc then their accM).
TEXT ·q4KAMXTile(SB), NOSPLIT, $0-72
	MOVQ cfg+0(FP), AX
	LDTILECFG_AX
	MOVQ a+8(FP), R10
	MOVQ aStride+16(FP), DX
	MOVQ b+24(FP), R11
	MOVQ side+32(FP), R12
	MOVQ ts+40(FP), R13
	MOVQ nb+48(FP), R15
	MOVQ acc+56(FP), R14
	MOVQ buf+64(FP), R8
	LEAQ 1024(R8), R9
	MOVQ $64, CX
	TESTQ R15, R15
	JZ tile_done
tile_block:
	TILEZERO_T0
	TILEZERO_T1
	LEAQ 0(R10), SI
	LEAQ 256(R10), DI
	LEAQ 0(R11), BX
	TILELOADD_T2_SI_DX
	TILELOADD_T3_DI_DX
	TILELOADD_T4_BX_CX
	TDPBUSD_T0_T2_T4
	TDPBUSD_T1_T3_T4
	LEAQ 64(R10), SI
	LEAQ 320(R10), DI
	LEAQ 1024(R11), BX
	TILELOADD_T2_SI_DX
	TILELOADD_T3_DI_DX
	TILELOADD_T4_BX_CX
	TDPBUSD_T0_T2_T4
	TDPBUSD_T1_T3_T4
	LEAQ 128(R10), SI
	LEAQ 384(R10), DI
	LEAQ 2048(R11), BX
	TILELOADD_T2_SI_DX
	TILELOADD_T3_DI_DX
	TILELOADD_T4_BX_CX
	TDPBUSD_T0_T2_T4
	TDPBUSD_T1_T3_T4
	LEAQ 192(R10), SI
	LEAQ 448(R10), DI
	LEAQ 3072(R11), BX
	TILELOADD_T2_SI_DX
	TILELOADD_T3_DI_DX
	TILELOADD_T4_BX_CX
	TDPBUSD_T0_T2_T4
	TDPBUSD_T1_T3_T4
	TILESTORED_R8_CX_T0
	TILESTORED_R9_CX_T1
	VMOVUPS (R13), Z20 // d_x of the 16 tokens
	MOVQ R8, SI
	MOVQ R12, DI
	MOVQ R14, BX
	MOVQ $16, AX
tile_row:
	VMOVDQU32 (SI), Z0
	VMOVDQU32 1024(SI), Z1
	VPSLLD $8, Z1, Z1
	VPADDD Z1, Z0, Z0
	VCVTDQ2PS Z0, Z0
	VBROADCASTSS (DI), Z2
	VMULPS Z20, Z2, Z2 // d_w·d_x
	VMOVUPS (BX), Z3
	VFMADD231PS Z2, Z0, Z3
	VMOVUPS Z3, (BX)
	VPBROADCASTD 8(DI), Z4
	VPMADDWD 64(R13), Z4, Z5
	VPBROADCASTD 12(DI), Z4
	VPMADDWD 128(R13), Z4, Z6
	VPADDD Z6, Z5, Z5
	VPBROADCASTD 16(DI), Z4
	VPMADDWD 192(R13), Z4, Z6
	VPADDD Z6, Z5, Z5
	VPBROADCASTD 20(DI), Z4
	VPMADDWD 256(R13), Z4, Z6
	VPADDD Z6, Z5, Z5
	VCVTDQ2PS Z5, Z5
	VBROADCASTSS 4(DI), Z2
	VMULPS Z20, Z2, Z2 // dmin_w·d_x
	VMOVUPS 64(BX), Z3
	VFMADD231PS Z2, Z5, Z3
	VMOVUPS Z3, 64(BX)
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $128, BX
	DECQ AX
	JNZ tile_row
	ADDQ $512, R10
	ADDQ $4096, R11
	ADDQ $1024, R12
	ADDQ $320, R13
	DECQ R15
	JNZ tile_block
tile_done:
	TILERELEASE
	VZEROUPPER
	RET
