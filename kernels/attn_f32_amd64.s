//go:build goexperiment.simd && amd64

#include "textflag.h"

// The f32 cache's attention passes (AttendF32) in AVX2 assembly, the bits of attendF32Ref.
// Why by hand: the archsimd version of the same loops (attnScores, attnValues) needs nine
// live vectors in the scores loop plus a load per row, and the Go compiler moved every
// accumulator between registers and the stack once per eight dimensions; here each eight
// dimensions of eight rows take one load and eight fused multiply-adds with their loads
// folded in. BenchmarkAttendF32 (head size 64, one core), TOKENWISE_NO_ASM unset against
// set: see attn_f32_amd64.go.

// ROWS8 loads the next group's eight row addresses, k + 4·rows[j]·stride, into AX, BX, CX,
// SI, DI, R8, R9, R10 and advances the rows pointer kept in rp-8(SP) (R15: k; R12: scratch).
// The scores kernels below share the frame layout it reads (stride+48(FP)).
#define ROWS8 \
	MOVQ rp-8(SP), R12; \
	MOVLQSX 0(R12), AX; IMULQ stride+48(FP), AX; LEAQ (R15)(AX*4), AX; \
	MOVLQSX 4(R12), BX; IMULQ stride+48(FP), BX; LEAQ (R15)(BX*4), BX; \
	MOVLQSX 8(R12), CX; IMULQ stride+48(FP), CX; LEAQ (R15)(CX*4), CX; \
	MOVLQSX 12(R12), SI; IMULQ stride+48(FP), SI; LEAQ (R15)(SI*4), SI; \
	MOVLQSX 16(R12), DI; IMULQ stride+48(FP), DI; LEAQ (R15)(DI*4), DI; \
	MOVLQSX 20(R12), R8; IMULQ stride+48(FP), R8; LEAQ (R15)(R8*4), R8; \
	MOVLQSX 24(R12), R9; IMULQ stride+48(FP), R9; LEAQ (R15)(R9*4), R9; \
	MOVLQSX 28(R12), R10; IMULQ stride+48(FP), R10; LEAQ (R15)(R10*4), R10; \
	ADDQ $32, R12; \
	MOVQ R12, rp-8(SP)

// func attnValues64AVX2(out *float32, chunks int, v *float32, rows *int32, n int, stride int, w *float32, acc int)
//
// out[c+i] = Σ_j w_j·v_j[c+i] for each 64-wide chunk c of chunks, each element one chain of
// fused multiply-adds in j order, v_j at v + 4·rows[j]·stride (v already offset to the
// head); n ≥ 1. acc ≠ 0: the chains start from out's values (they go on from earlier rows),
// else from zero.
TEXT ·attnValues64AVX2(SB), NOSPLIT, $0-64
	MOVQ out+0(FP), DI
	MOVQ chunks+8(FP), R14
	MOVQ v+16(FP), R15
	MOVQ stride+40(FP), R9
	TESTQ R14, R14
	JZ vdone

chunk:
	MOVQ rows+24(FP), R12
	MOVQ w+48(FP), R13
	MOVQ n+32(FP), CX
	CMPQ acc+56(FP), $0
	JNE resume
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	JMP pos

resume:
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7

pos:
	MOVLQSX (R12), AX
	IMULQ R9, AX
	LEAQ (R15)(AX*4), AX
	VBROADCASTSS (R13), Y8
	VFMADD231PS 0(AX), Y8, Y0
	VFMADD231PS 32(AX), Y8, Y1
	VFMADD231PS 64(AX), Y8, Y2
	VFMADD231PS 96(AX), Y8, Y3
	VFMADD231PS 128(AX), Y8, Y4
	VFMADD231PS 160(AX), Y8, Y5
	VFMADD231PS 192(AX), Y8, Y6
	VFMADD231PS 224(AX), Y8, Y7
	ADDQ $4, R12
	ADDQ $4, R13
	DECQ CX
	JNZ pos

	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	ADDQ $256, DI
	ADDQ $256, R15
	DECQ R14
	JNZ chunk

vdone:
	VZEROUPPER
	RET

// func attnScoresGroupAVX2(qs **float32, nq int, hdb int, k *float32, rows *int32, groups int, stride int, scale float32, scores **float32, mx *float32)
//
// Scores groups×8 positions for nq queries (qs[i], scores into scores[i]): score j =
// tree8(lanes of q·k_j)·scale, k_j at k + 4·rows[j]·stride (k already offset to the head);
// hdb is the head size in bytes, a multiple of 32. mx[8i:8i+8] holds query i's running
// maximum, eight lanes, updated with every score. Each group's eight rows are read from the
// cache once for all the queries, and from the first level cache after the first.
TEXT ·attnScoresGroupAVX2(SB), NOSPLIT, $16-80
	MOVQ k+24(FP), R15
	MOVQ rows+32(FP), R12
	MOVQ R12, rp-8(SP)
	MOVQ groups+40(FP), R14
	XORQ R13, R13
	VBROADCASTSS scale+56(FP), Y10
	TESTQ R14, R14
	JZ gdone

ggroup:
	ROWS8
	XORQ R12, R12

gquery:
	MOVQ qs+0(FP), R11
	MOVQ (R11)(R12*8), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ DX, DX

gdims:
	VMOVUPS (R11)(DX*1), Y8
	VFMADD231PS (AX)(DX*1), Y8, Y0
	VFMADD231PS (BX)(DX*1), Y8, Y1
	VFMADD231PS (CX)(DX*1), Y8, Y2
	VFMADD231PS (SI)(DX*1), Y8, Y3
	VFMADD231PS (DI)(DX*1), Y8, Y4
	VFMADD231PS (R8)(DX*1), Y8, Y5
	VFMADD231PS (R9)(DX*1), Y8, Y6
	VFMADD231PS (R10)(DX*1), Y8, Y7
	ADDQ $32, DX
	CMPQ DX, hdb+16(FP)
	JLT gdims

	VHADDPS Y1, Y0, Y11
	VHADDPS Y3, Y2, Y12
	VHADDPS Y12, Y11, Y11
	VHADDPS Y5, Y4, Y12
	VHADDPS Y7, Y6, Y13
	VHADDPS Y13, Y12, Y12
	VPERM2F128 $0x20, Y12, Y11, Y13
	VPERM2F128 $0x31, Y12, Y11, Y14
	VADDPS Y14, Y13, Y13
	VMULPS Y10, Y13, Y13
	MOVQ scores+64(FP), DX
	MOVQ (DX)(R12*8), DX
	VMOVUPS Y13, (DX)(R13*1)
	MOVQ R12, R11
	SHLQ $5, R11
	ADDQ mx+72(FP), R11
	VMOVUPS (R11), Y12
	VMAXPS Y13, Y12, Y12
	VMOVUPS Y12, (R11)

	INCQ R12
	CMPQ R12, nq+8(FP)
	JLT gquery
	ADDQ $32, R13
	DECQ R14
	JNZ ggroup

gdone:
	VZEROUPPER
	RET

// func attnValues64x4AVX512(outs **float32, chunks int, v *float32, rows *int32, n int, stride int, ws **float32)
//
// attnValues64AVX2 from zero for four queries at once (weights ws[i], results outs[i]) in
// 512-bit registers: each position's 64 values are loaded once and go into sixteen
// chains, four per query, each element's chain in j order as before (the same bits).
TEXT ·attnValues64x4AVX512(SB), NOSPLIT, $0-56
	MOVQ chunks+8(FP), R14
	MOVQ v+16(FP), R15
	MOVQ stride+40(FP), R9
	XORQ DX, DX
	TESTQ R14, R14
	JZ xdone

xchunk:
	MOVQ rows+24(FP), R12
	MOVQ n+32(FP), CX
	MOVQ ws+48(FP), AX
	MOVQ 0(AX), R8
	MOVQ 8(AX), R10
	MOVQ 16(AX), R11
	MOVQ 24(AX), BX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15

xpos:
	MOVLQSX (R12), AX
	IMULQ R9, AX
	LEAQ (R15)(AX*4), AX
	VMOVUPS 0(AX), Z16
	VMOVUPS 64(AX), Z17
	VMOVUPS 128(AX), Z18
	VMOVUPS 192(AX), Z19
	VBROADCASTSS (R8), Z20
	VBROADCASTSS (R10), Z21
	VBROADCASTSS (R11), Z22
	VBROADCASTSS (BX), Z23
	VFMADD231PS Z16, Z20, Z0
	VFMADD231PS Z17, Z20, Z1
	VFMADD231PS Z18, Z20, Z2
	VFMADD231PS Z19, Z20, Z3
	VFMADD231PS Z16, Z21, Z4
	VFMADD231PS Z17, Z21, Z5
	VFMADD231PS Z18, Z21, Z6
	VFMADD231PS Z19, Z21, Z7
	VFMADD231PS Z16, Z22, Z8
	VFMADD231PS Z17, Z22, Z9
	VFMADD231PS Z18, Z22, Z10
	VFMADD231PS Z19, Z22, Z11
	VFMADD231PS Z16, Z23, Z12
	VFMADD231PS Z17, Z23, Z13
	VFMADD231PS Z18, Z23, Z14
	VFMADD231PS Z19, Z23, Z15
	ADDQ $4, R12
	ADDQ $4, R8
	ADDQ $4, R10
	ADDQ $4, R11
	ADDQ $4, BX
	DECQ CX
	JNZ xpos

	MOVQ outs+0(FP), SI
	MOVQ 0(SI), DI
	VMOVUPS Z0, 0(DI)(DX*1)
	VMOVUPS Z1, 64(DI)(DX*1)
	VMOVUPS Z2, 128(DI)(DX*1)
	VMOVUPS Z3, 192(DI)(DX*1)
	MOVQ 8(SI), DI
	VMOVUPS Z4, 0(DI)(DX*1)
	VMOVUPS Z5, 64(DI)(DX*1)
	VMOVUPS Z6, 128(DI)(DX*1)
	VMOVUPS Z7, 192(DI)(DX*1)
	MOVQ 16(SI), DI
	VMOVUPS Z8, 0(DI)(DX*1)
	VMOVUPS Z9, 64(DI)(DX*1)
	VMOVUPS Z10, 128(DI)(DX*1)
	VMOVUPS Z11, 192(DI)(DX*1)
	MOVQ 24(SI), DI
	VMOVUPS Z12, 0(DI)(DX*1)
	VMOVUPS Z13, 64(DI)(DX*1)
	VMOVUPS Z14, 128(DI)(DX*1)
	VMOVUPS Z15, 192(DI)(DX*1)
	ADDQ $256, DX
	ADDQ $256, R15
	DECQ R14
	JNZ xchunk

xdone:
	VZEROUPPER
	RET

// func attnScoresPairsAVX512(qp *float32, npairs int, hdb int, k *float32, rows *int32, groups int, stride int, scale float32, scores **float32, mx *float32, idx *int32)
//
// attnScoresGroupAVX2 for npairs pairs of queries in 512-bit registers: qp holds each
// pair's queries interleaved by eight dimensions (for each eight, the first query's then
// the second's: 2·hdb bytes a pair), and a row's eight dimensions, broadcast to both halves,
// go into one fused multiply-add for both queries. Lane l of a half still sums the products
// of dimensions ≡ l mod 8 in order, and the pair adds of the reduction (VSHUFPS 0x88 and
// 0xDD, then an add: VHADDPS's operands in each 128-bit lane) and the final halves'
// selection (VPERMT2PS by idx: two 16-index vectors) are the eight-lane version's, so the
// bits are the same. scores[2p] and scores[2p+1] get pair p's scores, mx[16p:16p+16] their
// running maxima.
TEXT ·attnScoresPairsAVX512(SB), NOSPLIT, $16-88
	MOVQ k+24(FP), R15
	MOVQ rows+32(FP), R12
	MOVQ R12, rp-8(SP)
	MOVQ groups+40(FP), R14
	XORQ R13, R13
	VBROADCASTSS scale+56(FP), Z10
	MOVQ idx+80(FP), AX
	VMOVDQU32 0(AX), Z28
	VMOVDQU32 64(AX), Z29
	TESTQ R14, R14
	JZ pdone

pgroup:
	ROWS8
	XORQ R12, R12
	MOVQ qp+0(FP), R11

ppair:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	XORQ DX, DX

pdims:
	VMOVUPS (R11)(DX*2), Z8
	VBROADCASTF32X8 (AX)(DX*1), Z16
	VBROADCASTF32X8 (BX)(DX*1), Z17
	VBROADCASTF32X8 (CX)(DX*1), Z18
	VBROADCASTF32X8 (SI)(DX*1), Z19
	VBROADCASTF32X8 (DI)(DX*1), Z20
	VBROADCASTF32X8 (R8)(DX*1), Z21
	VBROADCASTF32X8 (R9)(DX*1), Z22
	VBROADCASTF32X8 (R10)(DX*1), Z23
	VFMADD231PS Z16, Z8, Z0
	VFMADD231PS Z17, Z8, Z1
	VFMADD231PS Z18, Z8, Z2
	VFMADD231PS Z19, Z8, Z3
	VFMADD231PS Z20, Z8, Z4
	VFMADD231PS Z21, Z8, Z5
	VFMADD231PS Z22, Z8, Z6
	VFMADD231PS Z23, Z8, Z7
	ADDQ $32, DX
	CMPQ DX, hdb+16(FP)
	JLT pdims

	// hadd(a, b) in each 128-bit lane: shuffle 0x88 + shuffle 0xDD.
	VSHUFPS $0x88, Z1, Z0, Z16
	VSHUFPS $0xdd, Z1, Z0, Z17
	VADDPS Z17, Z16, Z11 // h01
	VSHUFPS $0x88, Z3, Z2, Z16
	VSHUFPS $0xdd, Z3, Z2, Z17
	VADDPS Z17, Z16, Z12 // h23
	VSHUFPS $0x88, Z12, Z11, Z16
	VSHUFPS $0xdd, Z12, Z11, Z17
	VADDPS Z17, Z16, Z11 // g0
	VSHUFPS $0x88, Z5, Z4, Z16
	VSHUFPS $0xdd, Z5, Z4, Z17
	VADDPS Z17, Z16, Z12 // h45
	VSHUFPS $0x88, Z7, Z6, Z16
	VSHUFPS $0xdd, Z7, Z6, Z17
	VADDPS Z17, Z16, Z13 // h67
	VSHUFPS $0x88, Z13, Z12, Z16
	VSHUFPS $0xdd, Z13, Z12, Z17
	VADDPS Z17, Z16, Z12 // g1
	VMOVAPS Z11, Z13
	VPERMT2PS Z12, Z28, Z13 // sel1: each half's g0.lo, g1.lo
	VPERMT2PS Z12, Z29, Z11 // sel2: each half's g0.hi, g1.hi
	VADDPS Z11, Z13, Z13
	VMULPS Z10, Z13, Z13
	MOVQ scores+64(FP), DX
	MOVQ (DX)(R12*8), DX
	VMOVUPS Y13, (DX)(R13*1)
	MOVQ scores+64(FP), DX
	MOVQ 8(DX)(R12*8), DX
	VEXTRACTF32X8 $1, Z13, (DX)(R13*1)
	MOVQ R12, DX
	SHLQ $5, DX
	ADDQ mx+72(FP), DX
	VMOVUPS (DX), Z12
	VMAXPS Z13, Z12, Z12
	VMOVUPS Z12, (DX)

	MOVQ hdb+16(FP), DX
	LEAQ (R11)(DX*2), R11
	ADDQ $2, R12
	MOVQ npairs+8(FP), DX
	SHLQ $1, DX
	CMPQ R12, DX
	JLT ppair
	ADDQ $32, R13
	DECQ R14
	JNZ pgroup

pdone:
	VZEROUPPER
	RET
