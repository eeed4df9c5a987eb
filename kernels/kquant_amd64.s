//go:build amd64

#include "textflag.h"

// k-quant row kernels (kquant_amd64.go): rows consecutive weight rows (rowBytes apart) of nb
// super-blocks times nt Q8_K activation rows (q: nt rows of nb·256 int8; d: nt rows of nb
// float32; bs: nt rows of nb·16 int16), each super-block's weights unpacked to bytes once
// (Y0..Y7, the eight runs of 32) and multiplied with every token, so a prefill reads and
// unpacks a row once per nt tokens. acc gets 16 float32 per row and token (row-major, the
// kernel zeroes them first); what goes there is the
// arithmetic of ggml's AVX2 code for the dtype (quant_k.go): the integer sums are exact
// (VPMADDUBSW pairs stay below 2¹⁵: 2·63·127), so only the float steps had to be copied.

DATA kqM4<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqM4<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqM4<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqM4<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kqM4<>(SB), RODATA|NOPTR, $32
DATA kqM3<>+0(SB)/8, $0x0303030303030303
DATA kqM3<>+8(SB)/8, $0x0303030303030303
DATA kqM3<>+16(SB)/8, $0x0303030303030303
DATA kqM3<>+24(SB)/8, $0x0303030303030303
GLOBL kqM3<>(SB), RODATA|NOPTR, $32
DATA kqM12<>+0(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA kqM12<>+8(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA kqM12<>+16(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA kqM12<>+24(SB)/8, $0x0c0c0c0c0c0c0c0c
GLOBL kqM12<>(SB), RODATA|NOPTR, $32
DATA kqM48<>+0(SB)/8, $0x3030303030303030
DATA kqM48<>+8(SB)/8, $0x3030303030303030
DATA kqM48<>+16(SB)/8, $0x3030303030303030
DATA kqM48<>+24(SB)/8, $0x3030303030303030
GLOBL kqM48<>(SB), RODATA|NOPTR, $32
DATA kqMC0<>+0(SB)/8, $0xc0c0c0c0c0c0c0c0
DATA kqMC0<>+8(SB)/8, $0xc0c0c0c0c0c0c0c0
DATA kqMC0<>+16(SB)/8, $0xc0c0c0c0c0c0c0c0
DATA kqMC0<>+24(SB)/8, $0xc0c0c0c0c0c0c0c0
GLOBL kqMC0<>(SB), RODATA|NOPTR, $32
DATA kqM1<>+0(SB)/8, $0x0101010101010101
DATA kqM1<>+8(SB)/8, $0x0101010101010101
DATA kqM1<>+16(SB)/8, $0x0101010101010101
DATA kqM1<>+24(SB)/8, $0x0101010101010101
GLOBL kqM1<>(SB), RODATA|NOPTR, $32

// K4SCALES_X8 unpacks a Q4_K or Q5_K super-block's 6-bit scales and mins (its bytes 4..15,
// at SI) as ggml does (kmask1..3) and widens them to int16 in Y8: the eight scales in the
// low lane, the eight mins in the high one. It uses AX, DX, R14, R15 and X8.
#define K4SCALES_X8 \
	MOVL 4(SI), AX; \
	MOVL 8(SI), DX; \
	MOVL 12(SI), R14; \
	MOVL AX, R15; \
	ANDL $0x3f3f3f3f, R15; \
	VMOVD R15, X8; \
	MOVL R14, R15; \
	ANDL $0x0f0f0f0f, R15; \
	SHRL $6, AX; \
	ANDL $0x03030303, AX; \
	SHLL $4, AX; \
	ORL AX, R15; \
	VPINSRD $1, R15, X8, X8; \
	MOVL DX, R15; \
	ANDL $0x3f3f3f3f, R15; \
	VPINSRD $2, R15, X8, X8; \
	SHRL $4, R14; \
	ANDL $0x0f0f0f0f, R14; \
	SHRL $6, DX; \
	ANDL $0x03030303, DX; \
	SHLL $4, DX; \
	ORL DX, R14; \
	VPINSRD $3, R14, X8, X8; \
	VPMOVZXBW X8, Y8

// Q4K_STEPS is Q4_K's float steps for a super-block and token, in ggml's repacked order
// (gemv_q4_K_8x8_q8_K): Y11 holds the integer sums of sc·q·x (its lanes summed here), Y10
// the mins doubled, (R14) the token's bsums, (DX) its d_x, X14/X15 d_w/dmin_w; acc[0] +=
// float(Σ sc·q·x)·(d_w·d_x) and acc[1] += float(Σ mn·bsum)·(dmin_w·d_x) at R15, both fused.
// The AVX2 and 512-bit kernels share it, so they share its bits.
#define Q4K_STEPS \
	VPMADDWD (R14), Y10, Y12; \
	VPHADDD Y12, Y11, Y11; \
	VEXTRACTI128 $1, Y11, X13; \
	VPADDD X13, X11, X11; \
	VPHADDD X11, X11, X11; \
	VCVTDQ2PS X11, X11; \
	VMULSS (DX), X14, X12; \
	VMULSS (DX), X15, X13; \
	VMOVSS 0(R15), X9; \
	VFMADD231SS X12, X11, X9; \
	VMOVSS X9, 0(R15); \
	VMOVSHDUP X11, X11; \
	VMOVSS 4(R15), X9; \
	VFMADD231SS X13, X11, X9; \
	VMOVSS X9, 4(R15)

// Q5K_STEPS is Q5_K's float steps for a super-block and token, in
// ggml_vec_dot_q5_K_q8_K's AVX2 order: acc[8] (at R15) += −(d_x·dmin_w)·float(Σ mn·bsum)
// (VFNMADD231SS, the rounding of ggml's vfmadd231ss of the negated scale), then its eight
// lanes acc[0:8] += (d_x·d_w)·float(Y11's lanes), fused. Shared by the AVX2 and 512-bit
// kernels.
#define Q5K_STEPS \
	VPMADDWD (R14), Y10, Y12; \
	VEXTRACTI128 $1, Y12, X13; \
	VPADDD X13, X12, X12; \
	VPHADDD X12, X12, X12; \
	VPHADDD X12, X12, X12; \
	VCVTDQ2PS X12, X12; \
	VMULSS (DX), X15, X13; \
	VMOVSS 32(R15), X9; \
	VFNMADD231SS X13, X12, X9; \
	VMOVSS X9, 32(R15); \
	VCVTDQ2PS Y11, Y11; \
	VMULSS (DX), X14, X12; \
	VBROADCASTSS X12, Y12; \
	VMOVUPS (R15), Y9; \
	VFMADD231PS Y12, Y11, Y9; \
	VMOVUPS Y9, (R15)

// Q6K_STEPS is Q6_K's float steps for a super-block and token, in
// ggml_vec_dot_q6_K_q8_K's AVX2 order: the −32 offset taken off Y11's lanes as 32·Σ sc·bsum
// (Y13 the int16 scales, (R14) the bsums), then acc[0:8] (at R15) += (d_x·d_w)·float(lane),
// fused. Shared by the AVX2 and 512-bit kernels.
#define Q6K_STEPS \
	VPMADDWD (R14), Y13, Y9; \
	VPSLLD $5, Y9, Y9; \
	VPSUBD Y9, Y11, Y11; \
	VCVTDQ2PS Y11, Y11; \
	VMULSS (DX), X14, X12; \
	VBROADCASTSS X12, Y12; \
	VMOVUPS (R15), Y9; \
	VFMADD231PS Y12, Y11, Y9; \
	VMOVUPS Y9, (R15)

DATA kqQ6Shuf<>+0(SB)/8, $0x0000000000000000
DATA kqQ6Shuf<>+8(SB)/8, $0x0101010101010101
DATA kqQ6Shuf<>+16(SB)/8, $0x0202020202020202
DATA kqQ6Shuf<>+24(SB)/8, $0x0303030303030303
DATA kqQ6Shuf<>+32(SB)/8, $0x0404040404040404
DATA kqQ6Shuf<>+40(SB)/8, $0x0505050505050505
DATA kqQ6Shuf<>+48(SB)/8, $0x0606060606060606
DATA kqQ6Shuf<>+56(SB)/8, $0x0707070707070707
DATA kqQ6Shuf<>+64(SB)/8, $0x0808080808080808
DATA kqQ6Shuf<>+72(SB)/8, $0x0909090909090909
DATA kqQ6Shuf<>+80(SB)/8, $0x0a0a0a0a0a0a0a0a
DATA kqQ6Shuf<>+88(SB)/8, $0x0b0b0b0b0b0b0b0b
DATA kqQ6Shuf<>+96(SB)/8, $0x0c0c0c0c0c0c0c0c
DATA kqQ6Shuf<>+104(SB)/8, $0x0d0d0d0d0d0d0d0d
DATA kqQ6Shuf<>+112(SB)/8, $0x0e0e0e0e0e0e0e0e
DATA kqQ6Shuf<>+120(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kqQ6Shuf<>(SB), RODATA|NOPTR, $128

DATA kqK4Shuf<>+0(SB)/8, $0x0100010001000100
DATA kqK4Shuf<>+8(SB)/8, $0x0100010001000100
DATA kqK4Shuf<>+16(SB)/8, $0x0100010001000100
DATA kqK4Shuf<>+24(SB)/8, $0x0100010001000100
DATA kqK4Shuf<>+32(SB)/8, $0x0302030203020302
DATA kqK4Shuf<>+40(SB)/8, $0x0302030203020302
DATA kqK4Shuf<>+48(SB)/8, $0x0302030203020302
DATA kqK4Shuf<>+56(SB)/8, $0x0302030203020302
DATA kqK4Shuf<>+64(SB)/8, $0x0504050405040504
DATA kqK4Shuf<>+72(SB)/8, $0x0504050405040504
DATA kqK4Shuf<>+80(SB)/8, $0x0504050405040504
DATA kqK4Shuf<>+88(SB)/8, $0x0504050405040504
DATA kqK4Shuf<>+96(SB)/8, $0x0706070607060706
DATA kqK4Shuf<>+104(SB)/8, $0x0706070607060706
DATA kqK4Shuf<>+112(SB)/8, $0x0706070607060706
DATA kqK4Shuf<>+120(SB)/8, $0x0706070607060706
DATA kqK4Shuf<>+128(SB)/8, $0x0908090809080908
DATA kqK4Shuf<>+136(SB)/8, $0x0908090809080908
DATA kqK4Shuf<>+144(SB)/8, $0x0908090809080908
DATA kqK4Shuf<>+152(SB)/8, $0x0908090809080908
DATA kqK4Shuf<>+160(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kqK4Shuf<>+168(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kqK4Shuf<>+176(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kqK4Shuf<>+184(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kqK4Shuf<>+192(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kqK4Shuf<>+200(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kqK4Shuf<>+208(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kqK4Shuf<>+216(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kqK4Shuf<>+224(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kqK4Shuf<>+232(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kqK4Shuf<>+240(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kqK4Shuf<>+248(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL kqK4Shuf<>(SB), RODATA|NOPTR, $256

// func q4KRowAVX2(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)
//
// Q4_K in ggml's repacked order (gemv_q4_K_8x8_q8_K): per super-block and token,
// acc[0] += float(Σ sc·q·x)·(d_w·d_x) and acc[1] += float(Σ mn·bsum)·(dmin_w·d_x), both fused.
TEXT ·q4KRowAVX2(SB), NOSPLIT, $352-72
	MOVQ nb+8(FP), CX
	MOVQ CX, R12
	SHLQ $8, R12 // token stride of q: nb·256 bytes
	MOVQ CX, R13
	SHLQ $2, R13 // of d: nb·4
	MOVQ CX, BX
	SHLQ $5, BX // of bs: nb·32
	TESTQ CX, CX
	JZ q4done
	// The row loop's state, in the frame: the row, its accumulators, the rows left.
	MOVQ w+0(FP), AX
	MOVQ AX, 320(SP)
	MOVQ acc+48(FP), AX
	MOVQ AX, 328(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 336(SP)

q4row:
	MOVQ 320(SP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ bs+32(FP), R9
	MOVQ 328(SP), R11
	MOVQ nt+40(FP), R10
	SHLQ $6, R10
	ADDQ R11, R10 // end of this row's accumulators: nt·64 bytes
	VPXOR Y0, Y0, Y0
	MOVQ R11, AX
q4zero:
	VMOVDQU Y0, (AX)
	VMOVDQU Y0, 32(AX)
	ADDQ $64, AX
	CMPQ AX, R10
	JLT q4zero

q4block:
	// 4 KiB ahead into L2, as the other decode kernels do (docs/kernels.md; not measured
	// apart here, on a machine at load 20): the rows of a call are consecutive in memory.
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	VPBROADCASTW 0(SI), X14
	VCVTPH2PS X14, X14 // d_w
	VPBROADCASTW 2(SI), X15
	VCVTPH2PS X15, X15 // dmin_w
	K4SCALES_X8 // Y8: the scales (low lane) and mins (high lane)
	// Each scale broadcast to a whole vector (VPSHUFB of the scales in both lanes), for
	// VPMADDWD's memory operand in the token loop: eight vectors at 64(SP). Built in
	// registers: a 16-byte load of four 4-byte stores cannot be forwarded and stalled a
	// decode product for a quarter of its time (perf annotate: Q4_K 3.5 GB/s, Q6_K 26).
	VPERMQ $0x44, Y8, Y13
	VPSHUFB kqK4Shuf<>+0(SB), Y13, Y9
	VMOVDQU Y9, 64(SP)
	VPSHUFB kqK4Shuf<>+32(SB), Y13, Y9
	VMOVDQU Y9, 96(SP)
	VPSHUFB kqK4Shuf<>+64(SB), Y13, Y9
	VMOVDQU Y9, 128(SP)
	VPSHUFB kqK4Shuf<>+96(SB), Y13, Y9
	VMOVDQU Y9, 160(SP)
	VPSHUFB kqK4Shuf<>+128(SB), Y13, Y9
	VMOVDQU Y9, 192(SP)
	VPSHUFB kqK4Shuf<>+160(SB), Y13, Y9
	VMOVDQU Y9, 224(SP)
	VPSHUFB kqK4Shuf<>+192(SB), Y13, Y9
	VMOVDQU Y9, 256(SP)
	VPSHUFB kqK4Shuf<>+224(SB), Y13, Y9
	VMOVDQU Y9, 288(SP)
	// Each min twice, so VPMADDWD with the 16 bsums gives lane j = mn_j·(bs_2j + bs_2j+1).
	VEXTRACTI128 $1, Y8, X9
	VPUNPCKLWD X9, X9, X10
	VPUNPCKHWD X9, X9, X11
	VINSERTI128 $1, X11, Y10, Y10

	// Runs 2j and 2j+1 are the low and high nibbles of qs[32j:32j+32].
	VMOVDQU kqM4<>(SB), Y13
	VMOVDQU 16(SI), Y8
	VPAND Y13, Y8, Y0
	VPSRLW $4, Y8, Y8
	VPAND Y13, Y8, Y1
	VMOVDQU 48(SI), Y8
	VPAND Y13, Y8, Y2
	VPSRLW $4, Y8, Y8
	VPAND Y13, Y8, Y3
	VMOVDQU 80(SI), Y8
	VPAND Y13, Y8, Y4
	VPSRLW $4, Y8, Y8
	VPAND Y13, Y8, Y5
	VMOVDQU 112(SI), Y8
	VPAND Y13, Y8, Y6
	VPSRLW $4, Y8, Y8
	VPAND Y13, Y8, Y7
	MOVQ DI, AX
	MOVQ R8, DX
	MOVQ R9, R14
	MOVQ R11, R15

q4tok:
	VPXOR Y11, Y11, Y11
	VPMADDUBSW 0(AX), Y0, Y12
	VPMADDWD 64(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 32(AX), Y1, Y12
	VPMADDWD 96(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 64(AX), Y2, Y12
	VPMADDWD 128(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 96(AX), Y3, Y12
	VPMADDWD 160(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 128(AX), Y4, Y12
	VPMADDWD 192(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 160(AX), Y5, Y12
	VPMADDWD 224(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 192(AX), Y6, Y12
	VPMADDWD 256(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 224(AX), Y7, Y12
	VPMADDWD 288(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	Q4K_STEPS
	ADDQ R12, AX
	ADDQ R13, DX
	ADDQ BX, R14
	ADDQ $64, R15
	CMPQ R15, R10
	JLT q4tok

	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ q4block
	MOVQ 320(SP), AX
	ADDQ rowBytes+64(FP), AX
	MOVQ AX, 320(SP)
	MOVQ R10, 328(SP) // the next row's accumulators follow
	DECQ 336(SP)
	JNZ q4row
q4done:
	VZEROUPPER
	RET


// func q5KRowAVX2(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)
//
// Q5_K in ggml_vec_dot_q5_K_q8_K's AVX2 order: acc[0:8] are its eight lanes
// (+= (d_x·d_w)·float(lane sum), fused), acc[8] its scalar summs += (−d_x·dmin_w)·float(Σ mn·bsum),
// fused (vfmadd231ss in ggml's build; VFNMADD231SS here, the same rounding).
TEXT ·q5KRowAVX2(SB), NOSPLIT, $352-72
	MOVQ nb+8(FP), CX
	MOVQ CX, R12
	SHLQ $8, R12 // token stride of q: nb·256 bytes
	MOVQ CX, R13
	SHLQ $2, R13 // of d: nb·4
	MOVQ CX, BX
	SHLQ $5, BX // of bs: nb·32
	TESTQ CX, CX
	JZ q5done
	// The row loop's state, in the frame: the row, its accumulators, the rows left.
	MOVQ w+0(FP), AX
	MOVQ AX, 320(SP)
	MOVQ acc+48(FP), AX
	MOVQ AX, 328(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 336(SP)

q5row:
	MOVQ 320(SP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ bs+32(FP), R9
	MOVQ 328(SP), R11
	MOVQ nt+40(FP), R10
	SHLQ $6, R10
	ADDQ R11, R10 // end of this row's accumulators: nt·64 bytes
	VPXOR Y0, Y0, Y0
	MOVQ R11, AX
q5zero:
	VMOVDQU Y0, (AX)
	VMOVDQU Y0, 32(AX)
	ADDQ $64, AX
	CMPQ AX, R10
	JLT q5zero

q5block:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	VPBROADCASTW 0(SI), X14
	VCVTPH2PS X14, X14 // d_w
	VPBROADCASTW 2(SI), X15
	VCVTPH2PS X15, X15 // dmin_w
	// Run j: the low (j even) or high nibbles of qs[32(j/2):], bit j of qh as the 5th bit.
	VMOVDQU 16(SI), Y8 // qh
	VMOVDQU 48(SI), Y9
	VPAND kqM4<>(SB), Y9, Y0
	VPAND kqM1<>(SB), Y8, Y11
	VPSLLW $4, Y11, Y11
	VPOR Y11, Y0, Y0
	VPSRLW $4, Y9, Y9
	VPAND kqM4<>(SB), Y9, Y1
	VPSRLW $1, Y8, Y11
	VPAND kqM1<>(SB), Y11, Y11
	VPSLLW $4, Y11, Y11
	VPOR Y11, Y1, Y1
	VMOVDQU 80(SI), Y9
	VPAND kqM4<>(SB), Y9, Y2
	VPSRLW $2, Y8, Y11
	VPAND kqM1<>(SB), Y11, Y11
	VPSLLW $4, Y11, Y11
	VPOR Y11, Y2, Y2
	VPSRLW $4, Y9, Y9
	VPAND kqM4<>(SB), Y9, Y3
	VPSRLW $3, Y8, Y11
	VPAND kqM1<>(SB), Y11, Y11
	VPSLLW $4, Y11, Y11
	VPOR Y11, Y3, Y3
	VMOVDQU 112(SI), Y9
	VPAND kqM4<>(SB), Y9, Y4
	VPSRLW $4, Y8, Y11
	VPAND kqM1<>(SB), Y11, Y11
	VPSLLW $4, Y11, Y11
	VPOR Y11, Y4, Y4
	VPSRLW $4, Y9, Y9
	VPAND kqM4<>(SB), Y9, Y5
	VPSRLW $5, Y8, Y11
	VPAND kqM1<>(SB), Y11, Y11
	VPSLLW $4, Y11, Y11
	VPOR Y11, Y5, Y5
	VMOVDQU 144(SI), Y9
	VPAND kqM4<>(SB), Y9, Y6
	VPSRLW $6, Y8, Y11
	VPAND kqM1<>(SB), Y11, Y11
	VPSLLW $4, Y11, Y11
	VPOR Y11, Y6, Y6
	VPSRLW $4, Y9, Y9
	VPAND kqM4<>(SB), Y9, Y7
	VPSRLW $7, Y8, Y11
	VPAND kqM1<>(SB), Y11, Y11
	VPSLLW $4, Y11, Y11
	VPOR Y11, Y7, Y7
	K4SCALES_X8 // Y8: the scales (low lane) and mins (high lane)
	// Each scale broadcast to a whole vector (VPSHUFB of the scales in both lanes), for
	// VPMADDWD's memory operand in the token loop: eight vectors at 64(SP). Built in
	// registers: a 16-byte load of four 4-byte stores cannot be forwarded and stalled a
	// decode product for a quarter of its time (perf annotate: Q4_K 3.5 GB/s, Q6_K 26).
	VPERMQ $0x44, Y8, Y13
	VPSHUFB kqK4Shuf<>+0(SB), Y13, Y9
	VMOVDQU Y9, 64(SP)
	VPSHUFB kqK4Shuf<>+32(SB), Y13, Y9
	VMOVDQU Y9, 96(SP)
	VPSHUFB kqK4Shuf<>+64(SB), Y13, Y9
	VMOVDQU Y9, 128(SP)
	VPSHUFB kqK4Shuf<>+96(SB), Y13, Y9
	VMOVDQU Y9, 160(SP)
	VPSHUFB kqK4Shuf<>+128(SB), Y13, Y9
	VMOVDQU Y9, 192(SP)
	VPSHUFB kqK4Shuf<>+160(SB), Y13, Y9
	VMOVDQU Y9, 224(SP)
	VPSHUFB kqK4Shuf<>+192(SB), Y13, Y9
	VMOVDQU Y9, 256(SP)
	VPSHUFB kqK4Shuf<>+224(SB), Y13, Y9
	VMOVDQU Y9, 288(SP)
	// Each min twice, so VPMADDWD with the 16 bsums gives lane j = mn_j·(bs_2j + bs_2j+1).
	VEXTRACTI128 $1, Y8, X9
	VPUNPCKLWD X9, X9, X10
	VPUNPCKHWD X9, X9, X11
	VINSERTI128 $1, X11, Y10, Y10

	MOVQ DI, AX
	MOVQ R8, DX
	MOVQ R9, R14
	MOVQ R11, R15

q5tok:
	VPXOR Y11, Y11, Y11
	VPMADDUBSW 0(AX), Y0, Y12
	VPMADDWD 64(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 32(AX), Y1, Y12
	VPMADDWD 96(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 64(AX), Y2, Y12
	VPMADDWD 128(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 96(AX), Y3, Y12
	VPMADDWD 160(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 128(AX), Y4, Y12
	VPMADDWD 192(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 160(AX), Y5, Y12
	VPMADDWD 224(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 192(AX), Y6, Y12
	VPMADDWD 256(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 224(AX), Y7, Y12
	VPMADDWD 288(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	Q5K_STEPS
	ADDQ R12, AX
	ADDQ R13, DX
	ADDQ BX, R14
	ADDQ $64, R15
	CMPQ R15, R10
	JLT q5tok

	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ q5block
	MOVQ 320(SP), AX
	ADDQ rowBytes+64(FP), AX
	MOVQ AX, 320(SP)
	MOVQ R10, 328(SP) // the next row's accumulators follow
	DECQ 336(SP)
	JNZ q5row
q5done:
	VZEROUPPER
	RET


// func q6KRowAVX2(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)
//
// Q6_K in ggml_vec_dot_q6_K_q8_K's AVX2 order: the 6-bit values taken as 0..63, the −32
// offset subtracted as 32·Σ sc·bsum per lane, acc[0:8] += (d_x·d_w)·float(lane), fused.
// Run m's two halves of 16 have scales sc_2m and sc_2m+1: a table of eight scale vectors
// at 64(SP), made once per super-block.
TEXT ·q6KRowAVX2(SB), NOSPLIT, $352-72
	MOVQ nb+8(FP), CX
	MOVQ CX, R12
	SHLQ $8, R12 // token stride of q: nb·256 bytes
	MOVQ CX, R13
	SHLQ $2, R13 // of d: nb·4
	MOVQ CX, BX
	SHLQ $5, BX // of bs: nb·32
	TESTQ CX, CX
	JZ q6done
	// The row loop's state, in the frame: the row, its accumulators, the rows left.
	MOVQ w+0(FP), AX
	MOVQ AX, 320(SP)
	MOVQ acc+48(FP), AX
	MOVQ AX, 328(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 336(SP)

q6row:
	MOVQ 320(SP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ bs+32(FP), R9
	MOVQ 328(SP), R11
	MOVQ nt+40(FP), R10
	SHLQ $6, R10
	ADDQ R11, R10 // end of this row's accumulators: nt·64 bytes
	VPXOR Y0, Y0, Y0
	MOVQ R11, AX
q6zero:
	VMOVDQU Y0, (AX)
	VMOVDQU Y0, 32(AX)
	ADDQ $64, AX
	CMPQ AX, R10
	JLT q6zero

q6block:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4288(SI)
	VPBROADCASTW 208(SI), X14
	VCVTPH2PS X14, X14 // d_w
	VMOVDQU 0(SI), Y8 // l1
	VMOVDQU 32(SI), Y9 // l2
	VMOVDQU 128(SI), Y10 // qh
	VPAND kqM3<>(SB), Y10, Y11
	VPSLLW $4, Y11, Y11
	VPAND kqM4<>(SB), Y8, Y0
	VPOR Y11, Y0, Y0
	VPAND kqM12<>(SB), Y10, Y11
	VPSLLW $2, Y11, Y11
	VPAND kqM4<>(SB), Y9, Y1
	VPOR Y11, Y1, Y1
	VPAND kqM48<>(SB), Y10, Y11
	VPSRLW $4, Y8, Y8
	VPAND kqM4<>(SB), Y8, Y2
	VPOR Y11, Y2, Y2
	VPAND kqMC0<>(SB), Y10, Y11
	VPSRLW $2, Y11, Y11
	VPSRLW $4, Y9, Y9
	VPAND kqM4<>(SB), Y9, Y3
	VPOR Y11, Y3, Y3
	VMOVDQU 64(SI), Y8 // l1
	VMOVDQU 96(SI), Y9 // l2
	VMOVDQU 160(SI), Y10 // qh
	VPAND kqM3<>(SB), Y10, Y11
	VPSLLW $4, Y11, Y11
	VPAND kqM4<>(SB), Y8, Y4
	VPOR Y11, Y4, Y4
	VPAND kqM12<>(SB), Y10, Y11
	VPSLLW $2, Y11, Y11
	VPAND kqM4<>(SB), Y9, Y5
	VPOR Y11, Y5, Y5
	VPAND kqM48<>(SB), Y10, Y11
	VPSRLW $4, Y8, Y8
	VPAND kqM4<>(SB), Y8, Y6
	VPOR Y11, Y6, Y6
	VPAND kqMC0<>(SB), Y10, Y11
	VPSRLW $2, Y11, Y11
	VPSRLW $4, Y9, Y9
	VPAND kqM4<>(SB), Y9, Y7
	VPOR Y11, Y7, Y7
	VMOVDQU 192(SI), X8 // the 16 int8 scales
	VPSHUFB kqQ6Shuf<>+0(SB), X8, X9
	VPMOVSXBW X9, Y9
	VMOVDQU Y9, 64(SP)
	VPSHUFB kqQ6Shuf<>+16(SB), X8, X9
	VPMOVSXBW X9, Y9
	VMOVDQU Y9, 96(SP)
	VPSHUFB kqQ6Shuf<>+32(SB), X8, X9
	VPMOVSXBW X9, Y9
	VMOVDQU Y9, 128(SP)
	VPSHUFB kqQ6Shuf<>+48(SB), X8, X9
	VPMOVSXBW X9, Y9
	VMOVDQU Y9, 160(SP)
	VPSHUFB kqQ6Shuf<>+64(SB), X8, X9
	VPMOVSXBW X9, Y9
	VMOVDQU Y9, 192(SP)
	VPSHUFB kqQ6Shuf<>+80(SB), X8, X9
	VPMOVSXBW X9, Y9
	VMOVDQU Y9, 224(SP)
	VPSHUFB kqQ6Shuf<>+96(SB), X8, X9
	VPMOVSXBW X9, Y9
	VMOVDQU Y9, 256(SP)
	VPSHUFB kqQ6Shuf<>+112(SB), X8, X9
	VPMOVSXBW X9, Y9
	VMOVDQU Y9, 288(SP)
	VPMOVSXBW X8, Y13 // for the −32 offset: lane k is bs_2k·sc_2k + bs_2k+1·sc_2k+1

	MOVQ DI, AX
	MOVQ R8, DX
	MOVQ R9, R14
	MOVQ R11, R15

q6tok:
	VPXOR Y11, Y11, Y11
	VPMADDUBSW 0(AX), Y0, Y12
	VPMADDWD 64(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 32(AX), Y1, Y12
	VPMADDWD 96(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 64(AX), Y2, Y12
	VPMADDWD 128(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 96(AX), Y3, Y12
	VPMADDWD 160(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 128(AX), Y4, Y12
	VPMADDWD 192(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 160(AX), Y5, Y12
	VPMADDWD 224(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 192(AX), Y6, Y12
	VPMADDWD 256(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	VPMADDUBSW 224(AX), Y7, Y12
	VPMADDWD 288(SP), Y12, Y12
	VPADDD Y12, Y11, Y11
	Q6K_STEPS
	ADDQ R12, AX
	ADDQ R13, DX
	ADDQ BX, R14
	ADDQ $64, R15
	CMPQ R15, R10
	JLT q6tok

	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ q6block
	MOVQ 320(SP), AX
	ADDQ rowBytes+64(FP), AX
	MOVQ AX, 320(SP)
	MOVQ R10, 328(SP) // the next row's accumulators follow
	DECQ 336(SP)
	JNZ q6row
q6done:
	VZEROUPPER
	RET

// K4ZMM_SCALES spreads K4SCALES_X8's Y8 for the 512-bit Q4_K and Q5_K kernels: Z16+j =
// [scale 2j ×16 | scale 2j+1 ×16] as int16 (kqK4Shuf's entries 2j and 2j+1 are one 64-byte
// control over the scales in all four 128-bit lanes), and Y10 each min twice, so that
// VPMADDWD with the 16 bsums gives lane j = mn_j·(bs_2j + bs_2j+1). It uses Z13, X9, X11.
#define K4ZMM_SCALES \
	VSHUFI32X4 $0, Z8, Z8, Z13; \
	VPSHUFB kqK4Shuf<>+0(SB), Z13, Z16; \
	VPSHUFB kqK4Shuf<>+64(SB), Z13, Z17; \
	VPSHUFB kqK4Shuf<>+128(SB), Z13, Z18; \
	VPSHUFB kqK4Shuf<>+192(SB), Z13, Z19; \
	VEXTRACTI128 $1, Y8, X9; \
	VPUNPCKLWD X9, X9, X10; \
	VPUNPCKHWD X9, X9, X11; \
	VINSERTI128 $1, X11, Y10, Y10

// KZMM_DOT is the integer core of the 512-bit k-quant row kernels for one token: the four
// weight vectors Z20..Z23 ([run 2j | run 2j+1], unsigned) times the token's 256 activations
// at AX, each pair of products scaled by Z16..Z19 (int16), summed into Y11 with the upper
// half folded onto the lower (lane k of Y11 sums bytes 4k..4k+3 of every run). It uses
// Z24..Z27 and Y12.
#define KZMM_DOT \
	VPMADDUBSW 0(AX), Z20, Z24; \
	VPMADDUBSW 64(AX), Z21, Z25; \
	VPMADDUBSW 128(AX), Z22, Z26; \
	VPMADDUBSW 192(AX), Z23, Z27; \
	VPMADDWD Z16, Z24, Z24; \
	VPDPWSSD Z17, Z25, Z24; \
	VPDPWSSD Z18, Z26, Z24; \
	VPDPWSSD Z19, Z27, Z24; \
	VEXTRACTI64X4 $1, Z24, Y12; \
	VPADDD Y12, Y24, Y11

// The 512-bit k-quant row kernels, where useVNNI is on (AVX-512 BW, VL and VNNI): the
// integers and float steps of q4KRowAVX2, q5KRowAVX2 and q6KRowAVX2, with two runs of 32 in each vector
// instead of one, so half the vector instructions per super-block. A decode product (one
// token a call) was bound by them: on an Ice Lake Xeon (2 vCPUs) the 256-bit Q4_K kernel
// streamed 18.8 GB/s against Q6_K's 21.8, whose super-blocks carry 46% more bytes for about
// the same work. These replaced the 256-bit VPDPWSSD kernels (the AVX2 ones with VPDPWSSD
// for VPMADDWD and VPADDD), same machine, alternating in one process:
//   - Llama-3.2-1B's decode products in one dtype (112 matrices and the head), Q4_K
//     40.2/39.5 → 34.1/32.5 ms, Q6_K 42.1/41.8 → 35.5/40.1 ms;
//   - one 3072×1024 matrix at 4, 7 and 128 tokens: Q4_K 1.2×, Q6_K 1.25–1.5×;
//   - whole decode steps (model.Decode, 40 alternating rounds): Qwen3-0.6B Q4_K_M 24.1 →
//     21.2 ms, Llama-3.2-1B Q4_K_M 45.0 → 39.9, Qwen3-0.6B Q6_K 30.1 → 27.2, Llama-3.2-1B
//     Q6_K 53.4 → 48.7;
//   - Q5_K, 24 matrices of 8192×2048 (277 MB), three alternating rounds: 1 token 1.06–1.13×,
//     4 tokens 1.20–1.44×, 128 tokens 1.19–1.33×.
//
// q4KRowZMM: each 32 bytes of qs hold runs 2j (low nibbles) and 2j+1 (high); broadcast to
// both halves of a register and shifted by 0 and 4 (VPSRLVQ per quadword, then the 0x0f
// mask), they become [run 2j | run 2j+1], which multiplies the activations' bytes
// 64j..64j+63 as they lie. Q4_K's float steps take the super-block's two integer sums, which
// are exact, so the order of the lanes does not change them.

DATA kqZShift<>+0(SB)/8, $0
DATA kqZShift<>+8(SB)/8, $0
DATA kqZShift<>+16(SB)/8, $0
DATA kqZShift<>+24(SB)/8, $0
DATA kqZShift<>+32(SB)/8, $4
DATA kqZShift<>+40(SB)/8, $4
DATA kqZShift<>+48(SB)/8, $4
DATA kqZShift<>+56(SB)/8, $4
GLOBL kqZShift<>(SB), RODATA|NOPTR, $64

// func q4KRowZMM(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)
TEXT ·q4KRowZMM(SB), NOSPLIT, $32-72
	MOVQ nb+8(FP), CX
	MOVQ CX, R12
	SHLQ $8, R12 // token stride of q: nb·256 bytes
	MOVQ CX, R13
	SHLQ $2, R13 // of d: nb·4
	MOVQ CX, BX
	SHLQ $5, BX // of bs: nb·32
	TESTQ CX, CX
	JZ q4zdone
	VMOVDQU64 kqZShift<>(SB), Z30
	VPBROADCASTQ kqM4<>(SB), Z31
	MOVQ w+0(FP), AX
	MOVQ AX, 0(SP)
	MOVQ acc+48(FP), AX
	MOVQ AX, 8(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 16(SP)

q4zrow:
	MOVQ 0(SP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ bs+32(FP), R9
	MOVQ 8(SP), R11
	MOVQ nt+40(FP), R10
	SHLQ $6, R10
	ADDQ R11, R10 // end of this row's accumulators: nt·64 bytes
	VPXOR Y0, Y0, Y0
	MOVQ R11, AX
q4zzero:
	VMOVDQU Y0, (AX)
	VMOVDQU Y0, 32(AX)
	ADDQ $64, AX
	CMPQ AX, R10
	JLT q4zzero

q4zblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	VPBROADCASTW 0(SI), X14
	VCVTPH2PS X14, X14 // d_w
	VPBROADCASTW 2(SI), X15
	VCVTPH2PS X15, X15 // dmin_w
	K4SCALES_X8 // Y8: the scales (low lane) and mins (high lane)
	K4ZMM_SCALES
	// Z20+j = [run 2j | run 2j+1].
	VBROADCASTI64X4 16(SI), Z20
	VBROADCASTI64X4 48(SI), Z21
	VBROADCASTI64X4 80(SI), Z22
	VBROADCASTI64X4 112(SI), Z23
	VPSRLVQ Z30, Z20, Z20
	VPSRLVQ Z30, Z21, Z21
	VPSRLVQ Z30, Z22, Z22
	VPSRLVQ Z30, Z23, Z23
	VPANDQ Z31, Z20, Z20
	VPANDQ Z31, Z21, Z21
	VPANDQ Z31, Z22, Z22
	VPANDQ Z31, Z23, Z23
	MOVQ DI, AX
	MOVQ R8, DX
	MOVQ R9, R14
	MOVQ R11, R15

q4ztok:
	KZMM_DOT
	Q4K_STEPS
	ADDQ R12, AX
	ADDQ R13, DX
	ADDQ BX, R14
	ADDQ $64, R15
	CMPQ R15, R10
	JLT q4ztok

	ADDQ $144, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ q4zblock
	MOVQ 0(SP), AX
	ADDQ rowBytes+64(FP), AX
	MOVQ AX, 0(SP)
	MOVQ R10, 8(SP) // the next row's accumulators follow
	DECQ 16(SP)
	JNZ q4zrow
q4zdone:
	VZEROUPPER
	RET

// Q6_K's masks and shifts for the 512-bit kernel: qh's bits 2r and 2r+1 go to bits 4 and 5
// of run r's bytes (r = 0..3): left by 4 and 2 for runs 0 and 1, right by 0 and 2 for 2 and 3.
DATA kqZShl6<>+0(SB)/8, $4
DATA kqZShl6<>+8(SB)/8, $4
DATA kqZShl6<>+16(SB)/8, $4
DATA kqZShl6<>+24(SB)/8, $4
DATA kqZShl6<>+32(SB)/8, $2
DATA kqZShl6<>+40(SB)/8, $2
DATA kqZShl6<>+48(SB)/8, $2
DATA kqZShl6<>+56(SB)/8, $2
GLOBL kqZShl6<>(SB), RODATA|NOPTR, $64
DATA kqZShr6<>+0(SB)/8, $0
DATA kqZShr6<>+8(SB)/8, $0
DATA kqZShr6<>+16(SB)/8, $0
DATA kqZShr6<>+24(SB)/8, $0
DATA kqZShr6<>+32(SB)/8, $2
DATA kqZShr6<>+40(SB)/8, $2
DATA kqZShr6<>+48(SB)/8, $2
DATA kqZShr6<>+56(SB)/8, $2
GLOBL kqZShr6<>(SB), RODATA|NOPTR, $64

// func q6KRowZMM(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)
//
// q6KRowAVX2 with two runs of 32 per 512-bit vector, [run 2j | run 2j+1], which multiply the
// activations' bytes 64j..64j+63 as they lie. Q6_K's float steps are per lane: acc[0:8] +=
// (d_x·d_w)·float(lane k), where lane k sums bytes 4k..4k+3 of every run. The upper half's
// lane 8+k sums the same bytes of the odd runs, so folding it onto lane k gives each lane
// the integers it has in q6KRowAVX2, and the float steps follow unchanged.
TEXT ·q6KRowZMM(SB), NOSPLIT, $32-72
	MOVQ nb+8(FP), CX
	MOVQ CX, R12
	SHLQ $8, R12 // token stride of q: nb·256 bytes
	MOVQ CX, R13
	SHLQ $2, R13 // of d: nb·4
	MOVQ CX, BX
	SHLQ $5, BX // of bs: nb·32
	TESTQ CX, CX
	JZ q6zdone
	VMOVDQU64 kqZShl6<>(SB), Z28
	VMOVDQU64 kqZShr6<>(SB), Z29
	VPBROADCASTQ kqM48<>(SB), Z30
	VPBROADCASTQ kqM4<>(SB), Z31
	MOVQ w+0(FP), AX
	MOVQ AX, 0(SP)
	MOVQ acc+48(FP), AX
	MOVQ AX, 8(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 16(SP)

q6zrow:
	MOVQ 0(SP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ bs+32(FP), R9
	MOVQ 8(SP), R11
	MOVQ nt+40(FP), R10
	SHLQ $6, R10
	ADDQ R11, R10 // end of this row's accumulators: nt·64 bytes
	VPXOR Y0, Y0, Y0
	MOVQ R11, AX
q6zzero:
	VMOVDQU Y0, (AX)
	VMOVDQU Y0, 32(AX)
	ADDQ $64, AX
	CMPQ AX, R10
	JLT q6zzero

q6zblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4288(SI)
	VPBROADCASTW 208(SI), X14
	VCVTPH2PS X14, X14 // d_w
	// Half h (runs 4h..4h+3) from ql[64h:64h+64] and qh[32h:32h+32]: Z20+2h = [run 4h |
	// run 4h+1] (low nibbles, qh bits 0-1 and 2-3), Z21+2h = [run 4h+2 | run 4h+3] (high
	// nibbles, qh bits 4-5 and 6-7). VPTERNLOGQ $0xea is (a & b) | c.
	VMOVDQU64 0(SI), Z8
	VBROADCASTI64X4 128(SI), Z9
	VPANDQ Z31, Z8, Z20
	VPSLLVQ Z28, Z9, Z10
	VPTERNLOGQ $0xea, Z20, Z30, Z10
	VMOVDQA64 Z10, Z20
	VPSRLW $4, Z8, Z8
	VPANDQ Z31, Z8, Z21
	VPSRLVQ Z29, Z9, Z10
	VPTERNLOGQ $0xea, Z21, Z30, Z10
	VMOVDQA64 Z10, Z21
	VMOVDQU64 64(SI), Z8
	VBROADCASTI64X4 160(SI), Z9
	VPANDQ Z31, Z8, Z22
	VPSLLVQ Z28, Z9, Z10
	VPTERNLOGQ $0xea, Z22, Z30, Z10
	VMOVDQA64 Z10, Z22
	VPSRLW $4, Z8, Z8
	VPANDQ Z31, Z8, Z23
	VPSRLVQ Z29, Z9, Z10
	VPTERNLOGQ $0xea, Z23, Z30, Z10
	VMOVDQA64 Z10, Z23
	// Z16+j: the int16 scales of runs 2j and 2j+1, eight of each sub-block's scale.
	VBROADCASTI128 192(SI), Y15
	VPSHUFB kqQ6Shuf<>+0(SB), Y15, Y9
	VPMOVSXBW Y9, Z16
	VPSHUFB kqQ6Shuf<>+32(SB), Y15, Y9
	VPMOVSXBW Y9, Z17
	VPSHUFB kqQ6Shuf<>+64(SB), Y15, Y9
	VPMOVSXBW Y9, Z18
	VPSHUFB kqQ6Shuf<>+96(SB), Y15, Y9
	VPMOVSXBW Y9, Z19
	VPMOVSXBW X15, Y13 // for the −32 offset: lane k is bs_2k·sc_2k + bs_2k+1·sc_2k+1

	MOVQ DI, AX
	MOVQ R8, DX
	MOVQ R9, R14
	MOVQ R11, R15

q6ztok:
	KZMM_DOT
	Q6K_STEPS
	ADDQ R12, AX
	ADDQ R13, DX
	ADDQ BX, R14
	ADDQ $64, R15
	CMPQ R15, R10
	JLT q6ztok

	ADDQ $210, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ q6zblock
	MOVQ 0(SP), AX
	ADDQ rowBytes+64(FP), AX
	MOVQ AX, 0(SP)
	MOVQ R10, 8(SP) // the next row's accumulators follow
	DECQ 16(SP)
	JNZ q6zrow
q6zdone:
	VZEROUPPER
	RET

// Q5_K's qh rotations for the 512-bit kernel: bit j of each qh byte to bit 4 (VPROLVQ by
// 4−j mod 64 per quadword), [run 2m | run 2m+1] for pair m at 64m.
DATA kqZRot5<>+0(SB)/8, $4
DATA kqZRot5<>+8(SB)/8, $4
DATA kqZRot5<>+16(SB)/8, $4
DATA kqZRot5<>+24(SB)/8, $4
DATA kqZRot5<>+32(SB)/8, $3
DATA kqZRot5<>+40(SB)/8, $3
DATA kqZRot5<>+48(SB)/8, $3
DATA kqZRot5<>+56(SB)/8, $3
DATA kqZRot5<>+64(SB)/8, $2
DATA kqZRot5<>+72(SB)/8, $2
DATA kqZRot5<>+80(SB)/8, $2
DATA kqZRot5<>+88(SB)/8, $2
DATA kqZRot5<>+96(SB)/8, $1
DATA kqZRot5<>+104(SB)/8, $1
DATA kqZRot5<>+112(SB)/8, $1
DATA kqZRot5<>+120(SB)/8, $1
DATA kqZRot5<>+128(SB)/8, $0
DATA kqZRot5<>+136(SB)/8, $0
DATA kqZRot5<>+144(SB)/8, $0
DATA kqZRot5<>+152(SB)/8, $0
DATA kqZRot5<>+160(SB)/8, $63
DATA kqZRot5<>+168(SB)/8, $63
DATA kqZRot5<>+176(SB)/8, $63
DATA kqZRot5<>+184(SB)/8, $63
DATA kqZRot5<>+192(SB)/8, $62
DATA kqZRot5<>+200(SB)/8, $62
DATA kqZRot5<>+208(SB)/8, $62
DATA kqZRot5<>+216(SB)/8, $62
DATA kqZRot5<>+224(SB)/8, $61
DATA kqZRot5<>+232(SB)/8, $61
DATA kqZRot5<>+240(SB)/8, $61
DATA kqZRot5<>+248(SB)/8, $61
GLOBL kqZRot5<>(SB), RODATA|NOPTR, $256

// func q5KRowZMM(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)
//
// q5KRowAVX2 with two runs of 32 per 512-bit vector, [run 2m | run 2m+1]: q4KRowZMM's
// nibbles with bit j of qh as the 5th bit of run j (a rotation of each quadword by 4−j, so
// bit 4 of every byte holds bit j of that byte, then the 0x10 mask). Q5_K's float steps are
// per lane (acc[0:8]) like Q6_K's, and the upper half folds onto the lower as in q6KRowZMM;
// acc[8], the mins' term, is q5KRowAVX2's.
TEXT ·q5KRowZMM(SB), NOSPLIT, $32-72
	MOVQ nb+8(FP), CX
	MOVQ CX, R12
	SHLQ $8, R12 // token stride of q: nb·256 bytes
	MOVQ CX, R13
	SHLQ $2, R13 // of d: nb·4
	MOVQ CX, BX
	SHLQ $5, BX // of bs: nb·32
	TESTQ CX, CX
	JZ q5zdone
	VPBROADCASTQ kqM1<>(SB), Z29
	VPSLLQ $4, Z29, Z29 // 0x10 in every byte
	VMOVDQU64 kqZShift<>(SB), Z30
	VPBROADCASTQ kqM4<>(SB), Z31
	MOVQ w+0(FP), AX
	MOVQ AX, 0(SP)
	MOVQ acc+48(FP), AX
	MOVQ AX, 8(SP)
	MOVQ rows+56(FP), AX
	MOVQ AX, 16(SP)

q5zrow:
	MOVQ 0(SP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ bs+32(FP), R9
	MOVQ 8(SP), R11
	MOVQ nt+40(FP), R10
	SHLQ $6, R10
	ADDQ R11, R10 // end of this row's accumulators: nt·64 bytes
	VPXOR Y0, Y0, Y0
	MOVQ R11, AX
q5zzero:
	VMOVDQU Y0, (AX)
	VMOVDQU Y0, 32(AX)
	ADDQ $64, AX
	CMPQ AX, R10
	JLT q5zzero

q5zblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	VPBROADCASTW 0(SI), X14
	VCVTPH2PS X14, X14 // d_w
	VPBROADCASTW 2(SI), X15
	VCVTPH2PS X15, X15 // dmin_w
	// Z20+m = [run 2m | run 2m+1]: nibbles of qs[32m:32m+32] | (qh bit j) << 4.
	VBROADCASTI64X4 16(SI), Z9 // qh
	VBROADCASTI64X4 48(SI), Z20
	VBROADCASTI64X4 80(SI), Z21
	VBROADCASTI64X4 112(SI), Z22
	VBROADCASTI64X4 144(SI), Z23
	VPSRLVQ Z30, Z20, Z20
	VPSRLVQ Z30, Z21, Z21
	VPSRLVQ Z30, Z22, Z22
	VPSRLVQ Z30, Z23, Z23
	VPANDQ Z31, Z20, Z20
	VPANDQ Z31, Z21, Z21
	VPANDQ Z31, Z22, Z22
	VPANDQ Z31, Z23, Z23
	VPROLVQ kqZRot5<>+0(SB), Z9, Z10
	VPTERNLOGQ $0xea, Z20, Z29, Z10
	VPROLVQ kqZRot5<>+64(SB), Z9, Z11
	VPTERNLOGQ $0xea, Z21, Z29, Z11
	VPROLVQ kqZRot5<>+128(SB), Z9, Z12
	VPTERNLOGQ $0xea, Z22, Z29, Z12
	VPROLVQ kqZRot5<>+192(SB), Z9, Z13
	VPTERNLOGQ $0xea, Z23, Z29, Z13
	VMOVDQA64 Z10, Z20
	VMOVDQA64 Z11, Z21
	VMOVDQA64 Z12, Z22
	VMOVDQA64 Z13, Z23
	K4SCALES_X8 // Y8: the scales (low lane) and mins (high lane)
	K4ZMM_SCALES

	MOVQ DI, AX
	MOVQ R8, DX
	MOVQ R9, R14
	MOVQ R11, R15

q5ztok:
	KZMM_DOT
	Q5K_STEPS
	ADDQ R12, AX
	ADDQ R13, DX
	ADDQ BX, R14
	ADDQ $64, R15
	CMPQ R15, R10
	JLT q5ztok

	ADDQ $176, SI
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ q5zblock
	MOVQ 0(SP), AX
	ADDQ rowBytes+64(FP), AX
	MOVQ AX, 0(SP)
	MOVQ R10, 8(SP) // the next row's accumulators follow
	DECQ 16(SP)
	JNZ q5zrow
q5zdone:
	VZEROUPPER
	RET
