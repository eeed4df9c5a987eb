//go:build amd64

#include "textflag.h"

// q4KDecodeZMM is the one-token (decode) Q4_K product where useVNNI is on: two rows at a
// time, each row's result written to out, in the float steps of q4KRowZMM (ggml's
// gemv_q4_K_8x8_q8_K: per super-block acc0 += float(Σ sc·q·x)·(d_w·d_x) and acc1 +=
// float(Σ mn·bsum)·(dmin_w·d_x), both fused; out = acc0 − acc1), so it gives a row the
// bits q4KRowZMM and the Go reference give it. What it saves is shuffle work, which had
// q4KRowZMM bound by port 5 on a decode token:
//   - the scales and mins are unpacked in vectors (two shuffles, two shifts, two ternary
//     logic ops) straight from a 16-byte broadcast, not by scalar masks and inserts, and
//     the scale vectors come from one shuffle each, with no lane broadcast before them;
//   - the mins multiply sums of bsums taken in pairs (ps: the token's Σ over each run of
//     32, made once per token by prepDecode), so they need no doubling;
//   - the qs are read as they lie, 64 bytes at a time, their low and high nibbles becoming
//     [run 0 | run 2] and [run 1 | run 3] (and runs 4..7 likewise): the activations are laid
//     out to match (q: each super-block's 32-byte runs in the order 0 2 1 3 4 6 5 7);
//   - the two rows' four integer sums are reduced together, converted and fused into one
//     register [acc0 a, acc1 a, acc0 b, acc1 b] (lane by lane the scalar steps' bits).

// The scales unpacked: from bytes 4..19 of a super-block s (12 bytes of scales, 4 of qs),
// U = s with bytes 8..11 repeated at 12..15 and H = s's bytes 0..7 moved to 8..15, then
// R = (U & M1) | ((U>>4) & M2) | ((H>>2) & 0x30): bytes 0..3 the scales 0..3, 4..7 the
// mins 0..3, 8..11 the scales 4..7, 12..15 the mins 4..7 (q4KScales).
DATA kqD4U<>+0(SB)/8, $0x0706050403020100
DATA kqD4U<>+8(SB)/8, $0x0b0a09080b0a0908
GLOBL kqD4U<>(SB), RODATA|NOPTR, $16
DATA kqD4H<>+0(SB)/8, $0x8080808080808080
DATA kqD4H<>+8(SB)/8, $0x0706050403020100
GLOBL kqD4H<>(SB), RODATA|NOPTR, $16
DATA kqD4M1<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA kqD4M1<>+8(SB)/8, $0x000000000f0f0f0f
GLOBL kqD4M1<>(SB), RODATA|NOPTR, $16
DATA kqD4M0F<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqD4M0F<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kqD4M0F<>(SB), RODATA|NOPTR, $16
DATA kqD4M30<>+0(SB)/8, $0x3030303030303030
DATA kqD4M30<>+8(SB)/8, $0x3030303030303030
GLOBL kqD4M30<>(SB), RODATA|NOPTR, $16
DATA kqD4M2<>+0(SB)/8, $0x0000000000000000
DATA kqD4M2<>+8(SB)/8, $0x0f0f0f0f00000000
GLOBL kqD4M2<>(SB), RODATA|NOPTR, $16

// kqD4Sc: R's scales widened to int16 for the four weight vectors: [sc0 ×16 | sc2 ×16],
// [sc1 | sc3], [sc4 | sc6], [sc5 | sc7] (R's bytes 0, 2; 1, 3; 8, 10; 9, 11).
DATA kqD4Sc<>+0(SB)/8, $0x8000800080008000
DATA kqD4Sc<>+8(SB)/8, $0x8000800080008000
DATA kqD4Sc<>+16(SB)/8, $0x8000800080008000
DATA kqD4Sc<>+24(SB)/8, $0x8000800080008000
DATA kqD4Sc<>+32(SB)/8, $0x8002800280028002
DATA kqD4Sc<>+40(SB)/8, $0x8002800280028002
DATA kqD4Sc<>+48(SB)/8, $0x8002800280028002
DATA kqD4Sc<>+56(SB)/8, $0x8002800280028002
DATA kqD4Sc<>+64(SB)/8, $0x8001800180018001
DATA kqD4Sc<>+72(SB)/8, $0x8001800180018001
DATA kqD4Sc<>+80(SB)/8, $0x8001800180018001
DATA kqD4Sc<>+88(SB)/8, $0x8001800180018001
DATA kqD4Sc<>+96(SB)/8, $0x8003800380038003
DATA kqD4Sc<>+104(SB)/8, $0x8003800380038003
DATA kqD4Sc<>+112(SB)/8, $0x8003800380038003
DATA kqD4Sc<>+120(SB)/8, $0x8003800380038003
DATA kqD4Sc<>+128(SB)/8, $0x8008800880088008
DATA kqD4Sc<>+136(SB)/8, $0x8008800880088008
DATA kqD4Sc<>+144(SB)/8, $0x8008800880088008
DATA kqD4Sc<>+152(SB)/8, $0x8008800880088008
DATA kqD4Sc<>+160(SB)/8, $0x800a800a800a800a
DATA kqD4Sc<>+168(SB)/8, $0x800a800a800a800a
DATA kqD4Sc<>+176(SB)/8, $0x800a800a800a800a
DATA kqD4Sc<>+184(SB)/8, $0x800a800a800a800a
DATA kqD4Sc<>+192(SB)/8, $0x8009800980098009
DATA kqD4Sc<>+200(SB)/8, $0x8009800980098009
DATA kqD4Sc<>+208(SB)/8, $0x8009800980098009
DATA kqD4Sc<>+216(SB)/8, $0x8009800980098009
DATA kqD4Sc<>+224(SB)/8, $0x800b800b800b800b
DATA kqD4Sc<>+232(SB)/8, $0x800b800b800b800b
DATA kqD4Sc<>+240(SB)/8, $0x800b800b800b800b
DATA kqD4Sc<>+248(SB)/8, $0x800b800b800b800b
GLOBL kqD4Sc<>(SB), RODATA|NOPTR, $256

// kqD4Min: R's mins widened to int16, in order (R's bytes 4..7, 12..15).
DATA kqD4Min<>+0(SB)/8, $0x8007800680058004
DATA kqD4Min<>+8(SB)/8, $0x800f800e800d800c
GLOBL kqD4Min<>(SB), RODATA|NOPTR, $16

// K4D_SCALES unpacks a Q4_K or Q5_K super-block's scales and mins from its bytes 4..19 at B
// (one 16-byte broadcast; Zb, Zu, Zt are temporaries, R ends in Zr, Xr its low lane) into the
// four weight vectors' int16 scales S0..S3 and the eight mins widened to int16 in Xmw, with
// the constants Z5, Z6 (U, H), Z28..Z30 (M2, M1, 0x30) and X7 (kqD4Min) the kernels load.
#define K4D_SCALES(B, Zb, Zu, Zr, Xr, Zt, S0, S1, S2, S3, Xmw) \
	VBROADCASTI32X4 4(B), Zb; \
	VPSHUFB Z5, Zb, Zu; \
	VPSHUFB Z6, Zb, Zr; \
	VPSRLW $4, Zu, Zt; \
	VPANDQ Z29, Zu, Zu; \
	VPTERNLOGQ $0xea, Zu, Z28, Zt; \
	VPSRLW $2, Zr, Zr; \
	VPTERNLOGQ $0xea, Zt, Z30, Zr; \
	VPSHUFB kqD4Sc<>+0(SB), Zr, S0; \
	VPSHUFB kqD4Sc<>+64(SB), Zr, S1; \
	VPSHUFB kqD4Sc<>+128(SB), Zr, S2; \
	VPSHUFB kqD4Sc<>+192(SB), Zr, S3; \
	VPSHUFB X7, Xr, Xmw

// Q4K_DEC_ROW is one row's super-block at B: Ys gets the eight lanes of Σ sc·q·x (the upper
// half folded onto the lower) and Xm the four lanes of Σ mn·(bsum pair) (R9: the token's
// pair sums; DI its permuted quants). It uses Z8..Z12 and Z16..Z27.
#define Q4K_DEC_ROW(B, Ys, Xm) \
	K4D_SCALES(B, Z8, Z9, Z10, X10, Z11, Z16, Z17, Z18, Z19, X12); \
	VPMADDWD (R9), X12, Xm; \
	VMOVDQU64 16(B), Z20; \
	VMOVDQU64 80(B), Z22; \
	VPSRLW $4, Z20, Z21; \
	VPSRLW $4, Z22, Z23; \
	VPANDQ Z31, Z20, Z20; \
	VPANDQ Z31, Z21, Z21; \
	VPANDQ Z31, Z22, Z22; \
	VPANDQ Z31, Z23, Z23; \
	VPMADDUBSW 0(DI), Z20, Z24; \
	VPMADDUBSW 64(DI), Z21, Z25; \
	VPMADDUBSW 128(DI), Z22, Z26; \
	VPMADDUBSW 192(DI), Z23, Z27; \
	VPMADDWD Z16, Z24, Z24; \
	VPDPWSSD Z17, Z25, Z24; \
	VPDPWSSD Z18, Z26, Z24; \
	VPDPWSSD Z19, Z27, Z24; \
	VEXTRACTI64X4 $1, Z24, Y12; \
	VPADDD Y12, Y24, Ys

// func q4KDecodeZMM(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes int)
TEXT ·q4KDecodeZMM(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ out+40(FP), AX
	MOVQ pairs+48(FP), BX
	MOVQ rowBytes+56(FP), R12
	TESTQ BX, BX
	JZ q4ddone
	VBROADCASTI32X4 kqD4M0F<>(SB), Z31
	VBROADCASTI32X4 kqD4M30<>(SB), Z30
	VBROADCASTI32X4 kqD4M1<>(SB), Z29
	VBROADCASTI32X4 kqD4M2<>(SB), Z28
	VBROADCASTI32X4 kqD4U<>(SB), Z5
	VBROADCASTI32X4 kqD4H<>(SB), Z6
	VMOVDQU kqD4Min<>(SB), X7

q4dpair:
	LEAQ (SI)(R12*1), R11 // row b
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ ps+32(FP), R9
	VXORPS X15, X15, X15

q4dblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4096(R11)
	PREFETCHT1 4160(R11)
	PREFETCHT1 4224(R11)
	Q4K_DEC_ROW(SI, Y0, X1)
	Q4K_DEC_ROW(R11, Y2, X3)
	// [Σ sc·q·x a, Σ mn·bs a, the same of b] (the X registers' upper halves are zero).
	VPHADDD Y1, Y0, Y0
	VPHADDD Y3, Y2, Y2
	VPHADDD Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X2
	VPADDD X2, X0, X0
	VCVTDQ2PS X0, X0
	// [d a, dmin a, d b, dmin b]·d_x
	VMOVD 0(SI), X4
	VPINSRD $1, 0(R11), X4, X4
	VCVTPH2PS X4, X4
	VBROADCASTSS (R8), X13
	VMULPS X13, X4, X4
	VFMADD231PS X4, X0, X15

	ADDQ $144, SI
	ADDQ $144, R11
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $16, R9
	DECQ CX
	JNZ q4dblock

	VMOVSHDUP X15, X4
	VSUBPS X4, X15, X4
	VMOVSS X4, 0(AX)
	VEXTRACTPS $2, X4, 4(AX)
	ADDQ $8, AX
	MOVQ R11, SI // row b's end: the next pair's row a
	DECQ BX
	JNZ q4dpair

q4ddone:
	VZEROUPPER
	RET

// q6KDecodeZMM is the one-token Q6_K product where useVNNI is on: two rows at a time in
// q6KRowZMM's integer lanes and float steps (ggml_vec_dot_q6_K_q8_K's: eight float lanes a
// row, acc += (d_w·d_x)·float(lane), fused, then summed as hsum8 does), the two rows' eight
// lanes in one 512-bit register and each row's sum written to out. Against the rows kernel
// it saves the scales' shuffles (four VPERMW from the sixteen sign-extended scales, where
// that took four shuffles and four widenings), the register copies after the ternary-logic
// unpacking, and the accumulators' trips through memory and Go (kqRowsOut).

// kqD6Idx: VPERMW indices of the scales for the four weight vectors: vector j holds runs
// 2j and 2j+1, their four sub-blocks' scales 4j..4j+3 eight words each.
DATA kqD6Idx<>+0(SB)/8, $0x0000000000000000
DATA kqD6Idx<>+8(SB)/8, $0x0000000000000000
DATA kqD6Idx<>+16(SB)/8, $0x0001000100010001
DATA kqD6Idx<>+24(SB)/8, $0x0001000100010001
DATA kqD6Idx<>+32(SB)/8, $0x0002000200020002
DATA kqD6Idx<>+40(SB)/8, $0x0002000200020002
DATA kqD6Idx<>+48(SB)/8, $0x0003000300030003
DATA kqD6Idx<>+56(SB)/8, $0x0003000300030003
GLOBL kqD6Idx<>(SB), RODATA|NOPTR, $64
DATA kqD6Four<>+0(SB)/8, $0x0004000400040004
GLOBL kqD6Four<>(SB), RODATA|NOPTR, $8
DATA kqD6Shl<>+0(SB)/8, $4
DATA kqD6Shl<>+8(SB)/8, $4
DATA kqD6Shl<>+16(SB)/8, $4
DATA kqD6Shl<>+24(SB)/8, $4
DATA kqD6Shl<>+32(SB)/8, $2
DATA kqD6Shl<>+40(SB)/8, $2
DATA kqD6Shl<>+48(SB)/8, $2
DATA kqD6Shl<>+56(SB)/8, $2
GLOBL kqD6Shl<>(SB), RODATA|NOPTR, $64
DATA kqD6Shr<>+0(SB)/8, $0
DATA kqD6Shr<>+8(SB)/8, $0
DATA kqD6Shr<>+16(SB)/8, $0
DATA kqD6Shr<>+24(SB)/8, $0
DATA kqD6Shr<>+32(SB)/8, $2
DATA kqD6Shr<>+40(SB)/8, $2
DATA kqD6Shr<>+48(SB)/8, $2
DATA kqD6Shr<>+56(SB)/8, $2
GLOBL kqD6Shr<>(SB), RODATA|NOPTR, $64

// Q6D_WEIGHTS unpacks a Q6_K super-block's quants at B into W0..W3: [run 4h | run 4h+1]
// from the low nibbles of ql[64h:] and qh's bits 0-3, [run 4h+2 | run 4h+3] from the high
// nibbles and bits 4-7 (VPTERNLOGQ $0xea: (a & b) | c), with the constants Z28, Z29 (the
// qh shifts), Z30 (0x30) and Z31 (0x0f). Zq, Zh, Ta, Tb are temporaries.
#define Q6D_WEIGHTS(B, Zq, Zh, Ta, Tb, W0, W1, W2, W3) \
	VMOVDQU64 0(B), Zq; \
	VBROADCASTI64X4 128(B), Zh; \
	VPANDQ Z31, Zq, Ta; \
	VPSLLVQ Z28, Zh, W0; \
	VPTERNLOGQ $0xea, Ta, Z30, W0; \
	VPSRLW $4, Zq, Zq; \
	VPANDQ Z31, Zq, Tb; \
	VPSRLVQ Z29, Zh, W1; \
	VPTERNLOGQ $0xea, Tb, Z30, W1; \
	VMOVDQU64 64(B), Zq; \
	VBROADCASTI64X4 160(B), Zh; \
	VPANDQ Z31, Zq, Ta; \
	VPSLLVQ Z28, Zh, W2; \
	VPTERNLOGQ $0xea, Ta, Z30, W2; \
	VPSRLW $4, Zq, Zq; \
	VPANDQ Z31, Zq, Tb; \
	VPSRLVQ Z29, Zh, W3; \
	VPTERNLOGQ $0xea, Tb, Z30, W3

// Q6K_DEC_ROW is one row's super-block at B: Yr gets its eight integer lanes, Σ sc·q·x over
// bytes 4k..4k+3 of every run less 32·(bs_2k·sc_2k + bs_2k+1·sc_2k+1) (q6KRowZMM's lanes;
// DI the token's quants, R9 its bsums; the weights from Q6D_WEIGHTS). It uses Z8..Z13 and
// Z16..Z27.
#define Q6K_DEC_ROW(B, Yr) \
	VPMOVSXBW 192(B), Y13; \
	VPERMW Z13, Z2, Z16; \
	VPERMW Z13, Z3, Z17; \
	VPERMW Z13, Z4, Z18; \
	VPERMW Z13, Z5, Z19; \
	VPMADDWD (R9), Y13, Y13; \
	VPSLLD $5, Y13, Y13; \
	Q6D_WEIGHTS(B, Z8, Z9, Z10, Z11, Z20, Z21, Z22, Z23); \
	VPMADDUBSW 0(DI), Z20, Z24; \
	VPMADDUBSW 64(DI), Z21, Z25; \
	VPMADDUBSW 128(DI), Z22, Z26; \
	VPMADDUBSW 192(DI), Z23, Z27; \
	VPMADDWD Z16, Z24, Z24; \
	VPDPWSSD Z17, Z25, Z24; \
	VPDPWSSD Z18, Z26, Z24; \
	VPDPWSSD Z19, Z27, Z24; \
	VEXTRACTI64X4 $1, Z24, Y12; \
	VPADDD Y12, Y24, Y12; \
	VPSUBD Y13, Y12, Yr

// func q6KDecodeZMM(w *byte, nb int, q *int8, d *float32, bs *int16, out *float32, pairs, rowBytes int)
TEXT ·q6KDecodeZMM(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ out+40(FP), AX
	MOVQ pairs+48(FP), BX
	MOVQ rowBytes+56(FP), R12
	TESTQ BX, BX
	JZ q6ddone
	VBROADCASTI32X4 kqD4M0F<>(SB), Z31
	VBROADCASTI32X4 kqD4M30<>(SB), Z30
	VMOVDQU64 kqD6Shr<>(SB), Z29
	VMOVDQU64 kqD6Shl<>(SB), Z28
	VMOVDQU64 kqD6Idx<>(SB), Z2
	VPBROADCASTQ kqD6Four<>(SB), Z6
	VPADDW Z6, Z2, Z3
	VPADDW Z6, Z3, Z4
	VPADDW Z6, Z4, Z5

q6dpair:
	LEAQ (SI)(R12*1), R11 // row b
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ bs+32(FP), R9
	VPXORQ Z15, Z15, Z15

q6dblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4288(SI)
	PREFETCHT1 4096(R11)
	PREFETCHT1 4160(R11)
	PREFETCHT1 4224(R11)
	PREFETCHT1 4288(R11)
	Q6K_DEC_ROW(SI, Y0)
	Q6K_DEC_ROW(R11, Y1)
	VINSERTI64X4 $1, Y1, Z0, Z0
	VCVTDQ2PS Z0, Z0
	// [d_w a ×8 | d_w b ×8]·d_x
	VPBROADCASTW 208(SI), X14
	VPBROADCASTW 208(R11), X7
	VINSERTI128 $1, X7, Y14, Y14
	VCVTPH2PS Y14, Z14
	VBROADCASTSS (R8), Z7
	VMULPS Z7, Z14, Z14
	VFMADD231PS Z14, Z0, Z15

	ADDQ $210, SI
	ADDQ $210, R11
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ q6dblock

	// hsum8 of each row's lanes: r_k = l[4+k] + l[k], then (r0 + r2) + (r1 + r3).
	VSHUFF32X4 $0xb1, Z15, Z15, Z7
	VADDPS Z7, Z15, Z15
	VPERMILPS $0x4e, Z15, Z7
	VADDPS Z7, Z15, Z15
	VMOVSHDUP Z15, Z7
	VADDPS Z7, Z15, Z15
	VMOVSS X15, 0(AX)
	VEXTRACTF32X4 $2, Z15, X7
	VMOVSS X7, 4(AX)
	ADDQ $8, AX
	MOVQ R11, SI // row b's end: the next pair's row a
	DECQ BX
	JNZ q6dpair

q6ddone:
	VZEROUPPER
	RET

// q5KDecodeZMM is the one-token Q5_K product where useVNNI is on: q4KDecodeZMM's layout
// (the scales unpacked in vectors, qs read as they lie against the permuted activations, the
// mins times the bsums' pair sums, two rows at a time) with qh's bit j as the fifth bit of
// run j, in q5KRowZMM's integer lanes and float steps (ggml_vec_dot_q5_K_q8_K's: eight float
// lanes a row for the scales' sums and one for the mins', acc8 −= (d_x·dmin_w)·float(Σ
// mn·bsum), fused; out = hsum8(lanes) + acc8). The two rows' lanes share one 512-bit
// register and their mins' terms one 128-bit one.

// kqD5Rot: the VPROLVQ counts that bring qh's bit j to bit 4 of every byte, for the weight
// vectors [run 0 | run 2], [1 | 3], [4 | 6], [5 | 7] (4 − j mod 64 per quadword).
DATA kqD5Rot<>+0(SB)/8, $4
DATA kqD5Rot<>+8(SB)/8, $4
DATA kqD5Rot<>+16(SB)/8, $4
DATA kqD5Rot<>+24(SB)/8, $4
DATA kqD5Rot<>+32(SB)/8, $2
DATA kqD5Rot<>+40(SB)/8, $2
DATA kqD5Rot<>+48(SB)/8, $2
DATA kqD5Rot<>+56(SB)/8, $2
DATA kqD5Rot<>+64(SB)/8, $3
DATA kqD5Rot<>+72(SB)/8, $3
DATA kqD5Rot<>+80(SB)/8, $3
DATA kqD5Rot<>+88(SB)/8, $3
DATA kqD5Rot<>+96(SB)/8, $1
DATA kqD5Rot<>+104(SB)/8, $1
DATA kqD5Rot<>+112(SB)/8, $1
DATA kqD5Rot<>+120(SB)/8, $1
DATA kqD5Rot<>+128(SB)/8, $0
DATA kqD5Rot<>+136(SB)/8, $0
DATA kqD5Rot<>+144(SB)/8, $0
DATA kqD5Rot<>+152(SB)/8, $0
DATA kqD5Rot<>+160(SB)/8, $62
DATA kqD5Rot<>+168(SB)/8, $62
DATA kqD5Rot<>+176(SB)/8, $62
DATA kqD5Rot<>+184(SB)/8, $62
DATA kqD5Rot<>+192(SB)/8, $63
DATA kqD5Rot<>+200(SB)/8, $63
DATA kqD5Rot<>+208(SB)/8, $63
DATA kqD5Rot<>+216(SB)/8, $63
DATA kqD5Rot<>+224(SB)/8, $61
DATA kqD5Rot<>+232(SB)/8, $61
DATA kqD5Rot<>+240(SB)/8, $61
DATA kqD5Rot<>+248(SB)/8, $61
GLOBL kqD5Rot<>(SB), RODATA|NOPTR, $256
DATA kqD5M10<>+0(SB)/8, $0x1010101010101010
DATA kqD5M10<>+8(SB)/8, $0x1010101010101010
GLOBL kqD5M10<>(SB), RODATA|NOPTR, $16

// Q5K_DEC_ROW is one Q5_K row's super-block at B: Ys its eight lanes of Σ sc·q·x (folded),
// Xm the four lanes of Σ mn·(bsum pair). It uses Z8..Z12 and Z16..Z27.
#define Q5K_DEC_ROW(B, Ys, Xm) \
	K4D_SCALES(B, Z8, Z9, Z10, X10, Z11, Z16, Z17, Z18, Z19, X12); \
	VPMADDWD (R9), X12, Xm; \
	VMOVDQU64 48(B), Z8; \
	VMOVDQU64 112(B), Z10; \
	VBROADCASTI64X4 16(B), Z9; \
	VPANDQ Z31, Z8, Z20; \
	VPSRLW $4, Z8, Z8; \
	VPANDQ Z31, Z8, Z21; \
	VPANDQ Z31, Z10, Z22; \
	VPSRLW $4, Z10, Z10; \
	VPANDQ Z31, Z10, Z23; \
	VPROLVQ kqD5Rot<>+0(SB), Z9, Z24; \
	VPTERNLOGQ $0xea, Z20, Z4, Z24; \
	VPROLVQ kqD5Rot<>+64(SB), Z9, Z25; \
	VPTERNLOGQ $0xea, Z21, Z4, Z25; \
	VPROLVQ kqD5Rot<>+128(SB), Z9, Z26; \
	VPTERNLOGQ $0xea, Z22, Z4, Z26; \
	VPROLVQ kqD5Rot<>+192(SB), Z9, Z27; \
	VPTERNLOGQ $0xea, Z23, Z4, Z27; \
	VPMADDUBSW 0(DI), Z24, Z24; \
	VPMADDUBSW 64(DI), Z25, Z25; \
	VPMADDUBSW 128(DI), Z26, Z26; \
	VPMADDUBSW 192(DI), Z27, Z27; \
	VPMADDWD Z16, Z24, Z24; \
	VPDPWSSD Z17, Z25, Z24; \
	VPDPWSSD Z18, Z26, Z24; \
	VPDPWSSD Z19, Z27, Z24; \
	VEXTRACTI64X4 $1, Z24, Y12; \
	VPADDD Y12, Y24, Ys

// kqD5Lanes: VPERMPS indices spreading [d a, dmin a, d b, dmin b]·d_x to [d a ×8 | d b ×8].
DATA kqD5Lanes<>+0(SB)/8, $0x0000000000000000
DATA kqD5Lanes<>+8(SB)/8, $0x0000000000000000
DATA kqD5Lanes<>+16(SB)/8, $0x0000000000000000
DATA kqD5Lanes<>+24(SB)/8, $0x0000000000000000
DATA kqD5Lanes<>+32(SB)/8, $0x0000000200000002
DATA kqD5Lanes<>+40(SB)/8, $0x0000000200000002
DATA kqD5Lanes<>+48(SB)/8, $0x0000000200000002
DATA kqD5Lanes<>+56(SB)/8, $0x0000000200000002
GLOBL kqD5Lanes<>(SB), RODATA|NOPTR, $64

// func q5KDecodeZMM(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes int)
TEXT ·q5KDecodeZMM(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ out+40(FP), AX
	MOVQ pairs+48(FP), BX
	MOVQ rowBytes+56(FP), R12
	TESTQ BX, BX
	JZ q5ddone
	VBROADCASTI32X4 kqD4M0F<>(SB), Z31
	VBROADCASTI32X4 kqD4M30<>(SB), Z30
	VBROADCASTI32X4 kqD4M1<>(SB), Z29
	VBROADCASTI32X4 kqD4M2<>(SB), Z28
	VBROADCASTI32X4 kqD4U<>(SB), Z5
	VBROADCASTI32X4 kqD4H<>(SB), Z6
	VMOVDQU kqD4Min<>(SB), X7
	VBROADCASTI32X4 kqD5M10<>(SB), Z4
	VMOVDQU64 kqD5Lanes<>(SB), Z3

q5dpair:
	LEAQ (SI)(R12*1), R11 // row b
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ ps+32(FP), R9
	VPXORQ Z15, Z15, Z15 // the lanes: [a ×8 | b ×8]
	VPXORQ X14, X14, X14 // the mins' terms: a in lane 1, b in lane 3

q5dblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4096(R11)
	PREFETCHT1 4160(R11)
	PREFETCHT1 4224(R11)
	Q5K_DEC_ROW(SI, Y0, X1)
	Q5K_DEC_ROW(R11, Y2, X13)
	// M = [d a, dmin a, d b, dmin b]·d_x
	VMOVD 0(SI), X8
	VPINSRD $1, 0(R11), X8, X8
	VCVTPH2PS X8, X8
	VBROADCASTSS (R8), X9
	VMULPS X9, X8, X8
	// the mins: [Σ a, Σ a, Σ b, Σ b]; lanes 1 and 3 −= that·M, fused
	VPHADDD X13, X1, X1
	VPHADDD X1, X1, X1
	VPSHUFD $0x50, X1, X1
	VCVTDQ2PS X1, X1
	VFNMADD231PS X8, X1, X14
	// the lanes
	VINSERTI64X4 $1, Y2, Z0, Z0
	VCVTDQ2PS Z0, Z0
	VPERMPS Z8, Z3, Z9
	VFMADD231PS Z9, Z0, Z15

	ADDQ $176, SI
	ADDQ $176, R11
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $16, R9
	DECQ CX
	JNZ q5dblock

	// hsum8 of each row's lanes, plus its mins' term.
	VSHUFF32X4 $0xb1, Z15, Z15, Z9
	VADDPS Z9, Z15, Z15
	VPERMILPS $0x4e, Z15, Z9
	VADDPS Z9, Z15, Z15
	VMOVSHDUP Z15, Z9
	VADDPS Z9, Z15, Z15
	VEXTRACTF32X4 $2, Z15, X9
	VMOVSHDUP X14, X14 // [m a, m a, m b, m b]
	VADDSS X14, X15, X15
	VMOVSS X15, 0(AX)
	VMOVHLPS X14, X14, X14
	VADDSS X14, X9, X9
	VMOVSS X9, 4(AX)
	ADDQ $8, AX
	MOVQ R11, SI // row b's end: the next pair's row a
	DECQ BX
	JNZ q5dpair

q5ddone:
	VZEROUPPER
	RET

// q4KDecodeAVX2 is q4KDecodeZMM for CPUs without AVX-512 VNNI (AVX2, FMA and F16C): the
// same unpacking of the scales (in both 128-bit lanes of a 256-bit register), mins times
// the bsums' pair sums, two rows at a time with their sums reduced and fused together; one
// run of 32 per register, so the activations stay in their order (q as quantize leaves it)
// and each run's scale comes from one shuffle of the unpacked scales, in registers (the
// rows kernel stored eight shuffled vectors to the stack and unpacked the scales with
// scalar masks and inserts).

// kqD4ScY: VPSHUFB controls widening run j's scale to sixteen words (R's bytes 0..3, 8..11).
DATA kqD4ScY<>+0(SB)/8, $0x8000800080008000
DATA kqD4ScY<>+8(SB)/8, $0x8000800080008000
DATA kqD4ScY<>+16(SB)/8, $0x8000800080008000
DATA kqD4ScY<>+24(SB)/8, $0x8000800080008000
DATA kqD4ScY<>+32(SB)/8, $0x8001800180018001
DATA kqD4ScY<>+40(SB)/8, $0x8001800180018001
DATA kqD4ScY<>+48(SB)/8, $0x8001800180018001
DATA kqD4ScY<>+56(SB)/8, $0x8001800180018001
DATA kqD4ScY<>+64(SB)/8, $0x8002800280028002
DATA kqD4ScY<>+72(SB)/8, $0x8002800280028002
DATA kqD4ScY<>+80(SB)/8, $0x8002800280028002
DATA kqD4ScY<>+88(SB)/8, $0x8002800280028002
DATA kqD4ScY<>+96(SB)/8, $0x8003800380038003
DATA kqD4ScY<>+104(SB)/8, $0x8003800380038003
DATA kqD4ScY<>+112(SB)/8, $0x8003800380038003
DATA kqD4ScY<>+120(SB)/8, $0x8003800380038003
DATA kqD4ScY<>+128(SB)/8, $0x8008800880088008
DATA kqD4ScY<>+136(SB)/8, $0x8008800880088008
DATA kqD4ScY<>+144(SB)/8, $0x8008800880088008
DATA kqD4ScY<>+152(SB)/8, $0x8008800880088008
DATA kqD4ScY<>+160(SB)/8, $0x8009800980098009
DATA kqD4ScY<>+168(SB)/8, $0x8009800980098009
DATA kqD4ScY<>+176(SB)/8, $0x8009800980098009
DATA kqD4ScY<>+184(SB)/8, $0x8009800980098009
DATA kqD4ScY<>+192(SB)/8, $0x800a800a800a800a
DATA kqD4ScY<>+200(SB)/8, $0x800a800a800a800a
DATA kqD4ScY<>+208(SB)/8, $0x800a800a800a800a
DATA kqD4ScY<>+216(SB)/8, $0x800a800a800a800a
DATA kqD4ScY<>+224(SB)/8, $0x800b800b800b800b
DATA kqD4ScY<>+232(SB)/8, $0x800b800b800b800b
DATA kqD4ScY<>+240(SB)/8, $0x800b800b800b800b
DATA kqD4ScY<>+248(SB)/8, $0x800b800b800b800b
GLOBL kqD4ScY<>(SB), RODATA|NOPTR, $256

// Q4K_Y_RUNS is runs 2g and 2g+1 (the nibbles of qs[32g:32g+32] at off) times the token's
// bytes 64g.. at DI, each scaled by its word vector, added into Ys. It uses Y12..Y14.
#define Q4K_Y_RUNS(B, off, xoff, c0, c1, Ys) \
	VMOVDQU off(B), Y12; \
	VPAND Y15, Y12, Y13; \
	VPSRLW $4, Y12, Y12; \
	VPAND Y15, Y12, Y12; \
	VPMADDUBSW xoff(DI), Y13, Y13; \
	VPSHUFB c0, Y9, Y14; \
	VPMADDWD Y14, Y13, Y13; \
	VPADDD Y13, Ys, Ys; \
	VPMADDUBSW xoff+32(DI), Y12, Y12; \
	VPSHUFB c1, Y9, Y14; \
	VPMADDWD Y14, Y12, Y12; \
	VPADDD Y12, Ys, Ys

// Q4K_Y_ROW is one row's super-block at B: Ys its eight lanes of Σ sc·q·x, Xm the four
// of Σ mn·(bsum pair) (R9). It uses Y8..Y14.
#define Q4K_Y_ROW(B, Ys, Xm) \
	VBROADCASTI128 4(B), Y8; \
	VPSHUFB kqD4UY<>(SB), Y8, Y9; \
	VPSHUFB kqD4HY<>(SB), Y8, Y10; \
	VPSRLW $4, Y9, Y11; \
	VPAND kqD4M1Y<>(SB), Y9, Y9; \
	VPAND kqD4M2Y<>(SB), Y11, Y11; \
	VPOR Y11, Y9, Y9; \
	VPSRLW $2, Y10, Y10; \
	VPAND kqD4M30Y<>(SB), Y10, Y10; \
	VPOR Y10, Y9, Y9; \
	VPSHUFB kqD4Min<>(SB), X9, X10; \
	VPMADDWD (R9), X10, Xm; \
	VPXOR Ys, Ys, Ys; \
	Q4K_Y_RUNS(B, 16, 0, kqD4ScY<>+0(SB), kqD4ScY<>+32(SB), Ys); \
	Q4K_Y_RUNS(B, 48, 64, kqD4ScY<>+64(SB), kqD4ScY<>+96(SB), Ys); \
	Q4K_Y_RUNS(B, 80, 128, kqD4ScY<>+128(SB), kqD4ScY<>+160(SB), Ys); \
	Q4K_Y_RUNS(B, 112, 192, kqD4ScY<>+192(SB), kqD4ScY<>+224(SB), Ys)

DATA kqD4UY<>+0(SB)/8, $0x0706050403020100
DATA kqD4UY<>+8(SB)/8, $0x0b0a09080b0a0908
DATA kqD4UY<>+16(SB)/8, $0x0706050403020100
DATA kqD4UY<>+24(SB)/8, $0x0b0a09080b0a0908
GLOBL kqD4UY<>(SB), RODATA|NOPTR, $32
DATA kqD4HY<>+0(SB)/8, $0x8080808080808080
DATA kqD4HY<>+8(SB)/8, $0x0706050403020100
DATA kqD4HY<>+16(SB)/8, $0x8080808080808080
DATA kqD4HY<>+24(SB)/8, $0x0706050403020100
GLOBL kqD4HY<>(SB), RODATA|NOPTR, $32
DATA kqD4M1Y<>+0(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA kqD4M1Y<>+8(SB)/8, $0x000000000f0f0f0f
DATA kqD4M1Y<>+16(SB)/8, $0x3f3f3f3f3f3f3f3f
DATA kqD4M1Y<>+24(SB)/8, $0x000000000f0f0f0f
GLOBL kqD4M1Y<>(SB), RODATA|NOPTR, $32
DATA kqD4M2Y<>+0(SB)/8, $0x0000000000000000
DATA kqD4M2Y<>+8(SB)/8, $0x0f0f0f0f00000000
DATA kqD4M2Y<>+16(SB)/8, $0x0000000000000000
DATA kqD4M2Y<>+24(SB)/8, $0x0f0f0f0f00000000
GLOBL kqD4M2Y<>(SB), RODATA|NOPTR, $32
DATA kqD4M30Y<>+0(SB)/8, $0x3030303030303030
DATA kqD4M30Y<>+8(SB)/8, $0x3030303030303030
DATA kqD4M30Y<>+16(SB)/8, $0x3030303030303030
DATA kqD4M30Y<>+24(SB)/8, $0x3030303030303030
GLOBL kqD4M30Y<>(SB), RODATA|NOPTR, $32
DATA kqD4M0FY<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqD4M0FY<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqD4M0FY<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f
DATA kqD4M0FY<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f
GLOBL kqD4M0FY<>(SB), RODATA|NOPTR, $32

// func q4KDecodeAVX2(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes int)
TEXT ·q4KDecodeAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ out+40(FP), AX
	MOVQ pairs+48(FP), BX
	MOVQ rowBytes+56(FP), R12
	TESTQ BX, BX
	JZ q4ydone
	VMOVDQU kqD4M0FY<>(SB), Y15

q4ypair:
	LEAQ (SI)(R12*1), R11 // row b
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ ps+32(FP), R9
	VXORPS X6, X6, X6

q4yblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4096(R11)
	PREFETCHT1 4160(R11)
	PREFETCHT1 4224(R11)
	Q4K_Y_ROW(SI, Y0, X1)
	Q4K_Y_ROW(R11, Y2, X3)
	VPHADDD Y1, Y0, Y0
	VPHADDD Y3, Y2, Y2
	VPHADDD Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X2
	VPADDD X2, X0, X0
	VCVTDQ2PS X0, X0
	VMOVD 0(SI), X4
	VPINSRD $1, 0(R11), X4, X4
	VCVTPH2PS X4, X4
	VBROADCASTSS (R8), X5
	VMULPS X5, X4, X4
	VFMADD231PS X4, X0, X6

	ADDQ $144, SI
	ADDQ $144, R11
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $16, R9
	DECQ CX
	JNZ q4yblock

	VMOVSHDUP X6, X4
	VSUBPS X4, X6, X4
	VMOVSS X4, 0(AX)
	VEXTRACTPS $2, X4, 4(AX)
	ADDQ $8, AX
	MOVQ R11, SI
	DECQ BX
	JNZ q4ypair

q4ydone:
	VZEROUPPER
	RET

// q6KDecodeAVX2 is q6KDecodeZMM in 256-bit registers, where useAsmQ8 is on and useVNNI is
// not: one run per register in q6KRowAVX2's lanes, two rows at a time, the scales widened
// once and spread by shuffles in registers (the rows kernel built eight vectors on the
// stack), each row's eight float lanes kept in a register and summed in hsum8's order in the
// kernel.

// kqD6CtlY: VPSHUFB controls over [scale words 0..7 | 0..7] (or 8..15 twice) giving run r's
// [sc 2r ×8 | sc 2r+1 ×8], for r mod 4.
DATA kqD6CtlY<>+0(SB)/8, $0x0100010001000100
DATA kqD6CtlY<>+8(SB)/8, $0x0100010001000100
DATA kqD6CtlY<>+16(SB)/8, $0x0302030203020302
DATA kqD6CtlY<>+24(SB)/8, $0x0302030203020302
DATA kqD6CtlY<>+32(SB)/8, $0x0504050405040504
DATA kqD6CtlY<>+40(SB)/8, $0x0504050405040504
DATA kqD6CtlY<>+48(SB)/8, $0x0706070607060706
DATA kqD6CtlY<>+56(SB)/8, $0x0706070607060706
DATA kqD6CtlY<>+64(SB)/8, $0x0908090809080908
DATA kqD6CtlY<>+72(SB)/8, $0x0908090809080908
DATA kqD6CtlY<>+80(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kqD6CtlY<>+88(SB)/8, $0x0b0a0b0a0b0a0b0a
DATA kqD6CtlY<>+96(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kqD6CtlY<>+104(SB)/8, $0x0d0c0d0c0d0c0d0c
DATA kqD6CtlY<>+112(SB)/8, $0x0f0e0f0e0f0e0f0e
DATA kqD6CtlY<>+120(SB)/8, $0x0f0e0f0e0f0e0f0e
GLOBL kqD6CtlY<>(SB), RODATA|NOPTR, $128

// Q6K_Y_DOT: the run in Y12 times the token's bytes at xoff, scaled by the control ctl over
// table, added into Ys. It uses Y14.
#define Q6K_Y_DOT(xoff, ctl, table, Ys) \
	VPMADDUBSW xoff(DI), Y12, Y12; \
	VPSHUFB ctl, table, Y14; \
	VPMADDWD Y14, Y12, Y12; \
	VPADDD Y12, Ys, Ys

// Q6K_Y_HALF is runs 4h..4h+3 of the super-block at B (ql at qoff, qh at hoff; the token's
// bytes at xoff), scales from table. It uses Y8, Y9, Y12, Y14.
#define Q6K_Y_HALF(B, qoff, hoff, xoff, table, Ys) \
	VMOVDQU hoff(B), Y9; \
	VMOVDQU qoff(B), Y8; \
	VPAND Y15, Y8, Y12; \
	VPSLLW $4, Y9, Y14; \
	VPAND kqD4M30Y<>(SB), Y14, Y14; \
	VPOR Y14, Y12, Y12; \
	Q6K_Y_DOT(xoff, kqD6CtlY<>+0(SB), table, Ys); \
	VPSRLW $4, Y8, Y12; \
	VPAND Y15, Y12, Y12; \
	VPAND kqD4M30Y<>(SB), Y9, Y14; \
	VPOR Y14, Y12, Y12; \
	Q6K_Y_DOT(xoff+64, kqD6CtlY<>+64(SB), table, Ys); \
	VMOVDQU qoff+32(B), Y8; \
	VPAND Y15, Y8, Y12; \
	VPSLLW $2, Y9, Y14; \
	VPAND kqD4M30Y<>(SB), Y14, Y14; \
	VPOR Y14, Y12, Y12; \
	Q6K_Y_DOT(xoff+32, kqD6CtlY<>+32(SB), table, Ys); \
	VPSRLW $4, Y8, Y12; \
	VPAND Y15, Y12, Y12; \
	VPSRLW $2, Y9, Y14; \
	VPAND kqD4M30Y<>(SB), Y14, Y14; \
	VPOR Y14, Y12, Y12; \
	Q6K_Y_DOT(xoff+96, kqD6CtlY<>+96(SB), table, Ys)

// Q6K_Y_ROW is one row's super-block at B: Ys its eight integer lanes (q6KRowAVX2's). It
// uses Y8..Y14.
#define Q6K_Y_ROW(B, Ys) \
	VPMOVSXBW 192(B), Y13; \
	VPERMQ $0x44, Y13, Y10; \
	VPERMQ $0xee, Y13, Y11; \
	VPMADDWD (R9), Y13, Y13; \
	VPSLLD $5, Y13, Y13; \
	VPXOR Ys, Ys, Ys; \
	Q6K_Y_HALF(B, 0, 128, 0, Y10, Ys); \
	Q6K_Y_HALF(B, 64, 160, 128, Y11, Ys); \
	VPSUBD Y13, Ys, Ys

// Q6K_Y_STEP: acc += (d_w·d_x)·float(Ys), d_w at B, d_x at R8, fused. It uses Y4, Y5.
#define Q6K_Y_STEP(B, Ys, acc) \
	VCVTDQ2PS Ys, Ys; \
	VPBROADCASTW 208(B), X4; \
	VCVTPH2PS X4, Y4; \
	VBROADCASTSS (R8), Y5; \
	VMULPS Y5, Y4, Y4; \
	VFMADD231PS Y4, Ys, acc

// func q6KDecodeAVX2(w *byte, nb int, q *int8, d *float32, bs *int16, out *float32, pairs, rowBytes int)
TEXT ·q6KDecodeAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ out+40(FP), AX
	MOVQ pairs+48(FP), BX
	MOVQ rowBytes+56(FP), R12
	TESTQ BX, BX
	JZ q6ydone
	VMOVDQU kqD4M0FY<>(SB), Y15

q6ypair:
	LEAQ (SI)(R12*1), R11 // row b
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ bs+32(FP), R9
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

q6yblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4288(SI)
	PREFETCHT1 4096(R11)
	PREFETCHT1 4160(R11)
	PREFETCHT1 4224(R11)
	PREFETCHT1 4288(R11)
	Q6K_Y_ROW(SI, Y0)
	Q6K_Y_ROW(R11, Y2)
	Q6K_Y_STEP(SI, Y0, Y6)
	Q6K_Y_STEP(R11, Y2, Y7)

	ADDQ $210, SI
	ADDQ $210, R11
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ q6yblock

	VEXTRACTF128 $1, Y6, X4
	VADDPS X4, X6, X4
	VPERMILPS $0x4e, X4, X5
	VADDPS X5, X4, X4
	VMOVSHDUP X4, X5
	VADDSS X5, X4, X4
	VMOVSS X4, 0(AX)
	VEXTRACTF128 $1, Y7, X4
	VADDPS X4, X7, X4
	VPERMILPS $0x4e, X4, X5
	VADDPS X5, X4, X4
	VMOVSHDUP X4, X5
	VADDSS X5, X4, X4
	VMOVSS X4, 4(AX)
	ADDQ $8, AX
	MOVQ R11, SI
	DECQ BX
	JNZ q6ypair

q6ydone:
	VZEROUPPER
	RET

// q5KDecodeAVX2 is q5KDecodeZMM in 256-bit registers, where useAsmQ8 is on and useVNNI is
// not: q4KDecodeAVX2 with qh's bit j shifted into bit 4 of run j's bytes, q5KRowAVX2's lanes
// and mins term (acc8 −= (d_x·dmin_w)·float(Σ mn·bsum), fused; out = hsum8(lanes) + acc8).

DATA kqD5M10Y<>+0(SB)/8, $0x1010101010101010
DATA kqD5M10Y<>+8(SB)/8, $0x1010101010101010
DATA kqD5M10Y<>+16(SB)/8, $0x1010101010101010
DATA kqD5M10Y<>+24(SB)/8, $0x1010101010101010
GLOBL kqD5M10Y<>(SB), RODATA|NOPTR, $32

// Q5K_Y_RUNS is q4KDecodeAVX2's Q4K_Y_RUNS with each run's fifth bit from qh (Y11): bit 2g
// and 2g+1 moved to bit 4 by op0 $s0 and op1 $s1 (16-bit shifts: no bit crosses into bit 4
// of the other byte). It uses Y12..Y14.
#define Q5K_Y_RUNS(B, off, xoff, c0, c1, op0, s0, op1, s1, Ys) \
	VMOVDQU off(B), Y12; \
	VPAND Y15, Y12, Y13; \
	VPSRLW $4, Y12, Y12; \
	VPAND Y15, Y12, Y12; \
	op0 $s0, Y11, Y14; \
	VPAND kqD5M10Y<>(SB), Y14, Y14; \
	VPOR Y14, Y13, Y13; \
	op1 $s1, Y11, Y14; \
	VPAND kqD5M10Y<>(SB), Y14, Y14; \
	VPOR Y14, Y12, Y12; \
	VPMADDUBSW xoff(DI), Y13, Y13; \
	VPSHUFB c0, Y9, Y14; \
	VPMADDWD Y14, Y13, Y13; \
	VPADDD Y13, Ys, Ys; \
	VPMADDUBSW xoff+32(DI), Y12, Y12; \
	VPSHUFB c1, Y9, Y14; \
	VPMADDWD Y14, Y12, Y12; \
	VPADDD Y12, Ys, Ys

// Q5K_Y_ROW is one Q5_K row's super-block at B: Ys its eight lanes of Σ sc·q·x, Xm the four
// of Σ mn·(bsum pair) (R9). It uses Y8..Y14.
#define Q5K_Y_ROW(B, Ys, Xm) \
	VBROADCASTI128 4(B), Y8; \
	VPSHUFB kqD4UY<>(SB), Y8, Y9; \
	VPSHUFB kqD4HY<>(SB), Y8, Y10; \
	VPSRLW $4, Y9, Y11; \
	VPAND kqD4M1Y<>(SB), Y9, Y9; \
	VPAND kqD4M2Y<>(SB), Y11, Y11; \
	VPOR Y11, Y9, Y9; \
	VPSRLW $2, Y10, Y10; \
	VPAND kqD4M30Y<>(SB), Y10, Y10; \
	VPOR Y10, Y9, Y9; \
	VPSHUFB kqD4Min<>(SB), X9, X10; \
	VPMADDWD (R9), X10, Xm; \
	VMOVDQU 16(B), Y11; \
	VPXOR Ys, Ys, Ys; \
	Q5K_Y_RUNS(B, 48, 0, kqD4ScY<>+0(SB), kqD4ScY<>+32(SB), VPSLLW, 4, VPSLLW, 3, Ys); \
	Q5K_Y_RUNS(B, 80, 64, kqD4ScY<>+64(SB), kqD4ScY<>+96(SB), VPSLLW, 2, VPSLLW, 1, Ys); \
	Q5K_Y_RUNS(B, 112, 128, kqD4ScY<>+128(SB), kqD4ScY<>+160(SB), VPSLLW, 0, VPSRLW, 1, Ys); \
	Q5K_Y_RUNS(B, 144, 192, kqD4ScY<>+192(SB), kqD4ScY<>+224(SB), VPSRLW, 2, VPSRLW, 3, Ys)

// func q5KDecodeAVX2(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes int)
TEXT ·q5KDecodeAVX2(SB), NOSPLIT, $0-64
	MOVQ w+0(FP), SI
	MOVQ out+40(FP), AX
	MOVQ pairs+48(FP), BX
	MOVQ rowBytes+56(FP), R12
	TESTQ BX, BX
	JZ q5ydone
	VMOVDQU kqD4M0FY<>(SB), Y15

q5ypair:
	LEAQ (SI)(R12*1), R11 // row b
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ ps+32(FP), R9
	VXORPS Y6, Y6, Y6 // row a's lanes
	VXORPS Y7, Y7, Y7 // row b's
	VXORPS X5, X5, X5 // the mins' terms: a in lane 1, b in lane 3

q5yblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4096(R11)
	PREFETCHT1 4160(R11)
	PREFETCHT1 4224(R11)
	Q5K_Y_ROW(SI, Y0, X1)
	Q5K_Y_ROW(R11, Y2, X3)
	// M = [d a, dmin a, d b, dmin b]·d_x
	VMOVD 0(SI), X4
	VPINSRD $1, 0(R11), X4, X4
	VCVTPH2PS X4, X4
	VBROADCASTSS (R8), X8
	VMULPS X8, X4, X4
	VPHADDD X3, X1, X1
	VPHADDD X1, X1, X1
	VPSHUFD $0x50, X1, X1
	VCVTDQ2PS X1, X1
	VFNMADD231PS X4, X1, X5
	VCVTDQ2PS Y0, Y0
	VBROADCASTSS X4, Y8
	VFMADD231PS Y8, Y0, Y6
	VMOVHLPS X4, X4, X9
	VCVTDQ2PS Y2, Y2
	VBROADCASTSS X9, Y9
	VFMADD231PS Y9, Y2, Y7

	ADDQ $176, SI
	ADDQ $176, R11
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $16, R9
	DECQ CX
	JNZ q5yblock

	VMOVSHDUP X5, X5 // [m a, m a, m b, m b]
	VEXTRACTF128 $1, Y6, X8
	VADDPS X8, X6, X8
	VPERMILPS $0x4e, X8, X9
	VADDPS X9, X8, X8
	VMOVSHDUP X8, X9
	VADDSS X9, X8, X8
	VADDSS X5, X8, X8
	VMOVSS X8, 0(AX)
	VEXTRACTF128 $1, Y7, X8
	VADDPS X8, X7, X8
	VPERMILPS $0x4e, X8, X9
	VADDPS X9, X8, X8
	VMOVSHDUP X8, X9
	VADDSS X9, X8, X8
	VMOVHLPS X5, X5, X5
	VADDSS X5, X8, X8
	VMOVSS X8, 4(AX)
	ADDQ $8, AX
	MOVQ R11, SI
	DECQ BX
	JNZ q5ypair

q5ydone:
	VZEROUPPER
	RET

// q4KFewZMM is q4KDecodeZMM for 1 to 8 tokens (a batched decode step, a verify pass): each
// pair of rows' scales and weights are unpacked once into registers (row a's in Z16..Z23,
// row b's in Z8..Z11 and Z24..Z27) and multiplied with every token, whose sums are reduced,
// converted and fused into its own [acc0 a, acc1 a, acc0 b, acc1 b] (in the frame) as in
// q4KDecodeZMM, so a token's results are the bits a one-token product gives it. Token t's
// activations are prepDecode's at t·nb super-blocks; its results go to out[t·stride].

// Q4K_FEW_SETUP unpacks the super-block at B: scales S0..S3, weights W0..W3, mins Xm. It
// uses Z0..Z3.
#define Q4K_FEW_SETUP(B, S0, S1, S2, S3, W0, W1, W2, W3, Xm) \
	K4D_SCALES(B, Z0, Z1, Z2, X2, Z3, S0, S1, S2, S3, Xm); \
	VMOVDQU64 16(B), Z0; \
	VMOVDQU64 80(B), Z1; \
	VPSRLW $4, Z0, W1; \
	VPSRLW $4, Z1, W3; \
	VPANDQ Z31, Z0, W0; \
	VPANDQ Z31, Z1, W2; \
	VPANDQ Z31, W1, W1; \
	VPANDQ Z31, W3, W3

// func q4KFewZMM(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes, nt, stride int)
TEXT ·q4KFewZMM(SB), NOSPLIT, $160-80
	MOVQ w+0(FP), SI
	MOVQ out+40(FP), AX
	MOVQ pairs+48(FP), BX
	MOVQ rowBytes+56(FP), R12
	TESTQ BX, BX
	JZ q4fdone
	MOVQ nb+8(FP), CX
	MOVQ CX, DX
	SHLQ $8, DX
	MOVQ DX, 128(SP) // a token's stride in q: nb·256 bytes
	MOVQ CX, DX
	SHLQ $4, DX
	MOVQ DX, 136(SP) // in ps: nb·16
	MOVQ CX, DX
	SHLQ $2, DX
	MOVQ DX, 144(SP) // in d: nb·4
	MOVQ nt+64(FP), R10
	SHLQ $4, R10 // the accumulators' end: nt·16 bytes at 0(SP)
	VBROADCASTI32X4 kqD4M0F<>(SB), Z31
	VBROADCASTI32X4 kqD4M30<>(SB), Z30
	VBROADCASTI32X4 kqD4M1<>(SB), Z29
	VBROADCASTI32X4 kqD4M2<>(SB), Z28
	VBROADCASTI32X4 kqD4U<>(SB), Z5
	VBROADCASTI32X4 kqD4H<>(SB), Z6
	VMOVDQU kqD4Min<>(SB), X7

q4fpair:
	LEAQ (SI)(R12*1), R11 // row b
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ ps+32(FP), R9
	VXORPS X0, X0, X0
	XORQ R15, R15
q4fzero:
	VMOVUPS X0, 0(SP)(R15*1)
	ADDQ $16, R15
	CMPQ R15, R10
	JLT q4fzero

q4fblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4096(R11)
	PREFETCHT1 4160(R11)
	PREFETCHT1 4224(R11)
	Q4K_FEW_SETUP(SI, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, X14)
	Q4K_FEW_SETUP(R11, Z8, Z9, Z10, Z11, Z24, Z25, Z26, Z27, X15)
	// [d a, dmin a, d b, dmin b] as floats
	VMOVD 0(SI), X13
	VPINSRD $1, 0(R11), X13, X13
	VCVTPH2PS X13, X13
	MOVQ DI, R13
	MOVQ R9, R14
	MOVQ R8, DX
	XORQ R15, R15

q4ftok:
	VPMADDUBSW 0(R13), Z20, Z0
	VPMADDUBSW 64(R13), Z21, Z1
	VPMADDUBSW 128(R13), Z22, Z2
	VPMADDUBSW 192(R13), Z23, Z3
	VPMADDWD Z16, Z0, Z0
	VPDPWSSD Z17, Z1, Z0
	VPDPWSSD Z18, Z2, Z0
	VPDPWSSD Z19, Z3, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDD Y1, Y0, Y0
	VPMADDWD (R14), X14, X1
	VPMADDUBSW 0(R13), Z24, Z2
	VPMADDUBSW 64(R13), Z25, Z3
	VPMADDUBSW 128(R13), Z26, Z4
	VPMADDUBSW 192(R13), Z27, Z12
	VPMADDWD Z8, Z2, Z2
	VPDPWSSD Z9, Z3, Z2
	VPDPWSSD Z10, Z4, Z2
	VPDPWSSD Z11, Z12, Z2
	VEXTRACTI64X4 $1, Z2, Y3
	VPADDD Y3, Y2, Y2
	VPMADDWD (R14), X15, X3
	VPHADDD Y1, Y0, Y0
	VPHADDD Y3, Y2, Y2
	VPHADDD Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X2
	VPADDD X2, X0, X0
	VCVTDQ2PS X0, X0
	VBROADCASTSS (DX), X4
	VMULPS X4, X13, X4
	VMOVUPS 0(SP)(R15*1), X2
	VFMADD231PS X4, X0, X2
	VMOVUPS X2, 0(SP)(R15*1)
	ADDQ 128(SP), R13
	ADDQ 136(SP), R14
	ADDQ 144(SP), DX
	ADDQ $16, R15
	CMPQ R15, R10
	JLT q4ftok

	ADDQ $144, SI
	ADDQ $144, R11
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $16, R9
	DECQ CX
	JNZ q4fblock

	// out[t·stride + r], out[t·stride + r + 1] = acc0 − acc1 of a and b
	MOVQ AX, DX
	XORQ R15, R15
	MOVQ stride+72(FP), R13
	SHLQ $2, R13
q4fout:
	VMOVUPS 0(SP)(R15*1), X2
	VMOVSHDUP X2, X4
	VSUBPS X4, X2, X4
	VMOVSS X4, 0(DX)
	VEXTRACTPS $2, X4, 4(DX)
	ADDQ R13, DX
	ADDQ $16, R15
	CMPQ R15, R10
	JLT q4fout
	ADDQ $8, AX
	MOVQ R11, SI
	DECQ BX
	JNZ q4fpair

q4fdone:
	VZEROUPPER
	RET

// q6KFewZMM is q6KDecodeZMM for 1 to 8 tokens: each pair of rows' scales and weights are
// unpacked once into registers (row a's in Z16..Z23 with its scale words in Y12, row b's in
// Z8..Z11, Z24..Z27 and Y13) and multiplied with every token, whose sixteen lanes are
// converted and fused into its own accumulators (in the frame) as in q6KDecodeZMM: a
// token's results are the bits a one-token product gives it. Token t's activations are
// quantize's at t·nb super-blocks (its bsums likewise); its results go to out[t·stride].

// Q6K_FEW_SETUP unpacks the super-block at B: scales S0..S3 (VPERMW of the scale words Ysc,
// which it keeps), weights W0..W3. It uses Z0, Z1, Z3..Z5.
#define Q6K_FEW_SETUP(B, S0, S1, S2, S3, W0, W1, W2, W3, Ysc, Zsc) \
	VPMOVSXBW 192(B), Ysc; \
	VMOVDQU64 kqD6Idx<>(SB), Z3; \
	VPERMW Zsc, Z3, S0; \
	VPBROADCASTQ kqD6Four<>(SB), Z4; \
	VPADDW Z4, Z3, Z3; \
	VPERMW Zsc, Z3, S1; \
	VPADDW Z4, Z3, Z3; \
	VPERMW Zsc, Z3, S2; \
	VPADDW Z4, Z3, Z3; \
	VPERMW Zsc, Z3, S3; \
	Q6D_WEIGHTS(B, Z0, Z1, Z5, Z5, W0, W1, W2, W3)

// Q6K_FEW_DOT is one row's lanes for the token at R13 (bsums at R14) into Yr: weights
// W0..W3, scales S0..S3, scale words Ysc. It uses Zt0, Zt1, Zt2, Zt3 (Yt1 their Y forms).
#define Q6K_FEW_DOT(S0, S1, S2, S3, W0, W1, W2, W3, Ysc, Zr, Yr, Zt1, Yt1, Zt2, Zt3) \
	VPMADDUBSW 0(R13), W0, Zr; \
	VPMADDUBSW 64(R13), W1, Zt1; \
	VPMADDUBSW 128(R13), W2, Zt2; \
	VPMADDUBSW 192(R13), W3, Zt3; \
	VPMADDWD S0, Zr, Zr; \
	VPDPWSSD S1, Zt1, Zr; \
	VPDPWSSD S2, Zt2, Zr; \
	VPDPWSSD S3, Zt3, Zr; \
	VEXTRACTI64X4 $1, Zr, Yt1; \
	VPADDD Yt1, Yr, Yr; \
	VPMADDWD (R14), Ysc, Yt1; \
	VPSLLD $5, Yt1, Yt1; \
	VPSUBD Yt1, Yr, Yr

// func q6KFewZMM(w *byte, nb int, q *int8, d *float32, bs *int16, out *float32, pairs, rowBytes, nt, stride int)
TEXT ·q6KFewZMM(SB), NOSPLIT, $544-80
	MOVQ w+0(FP), SI
	MOVQ out+40(FP), AX
	MOVQ pairs+48(FP), BX
	MOVQ rowBytes+56(FP), R12
	TESTQ BX, BX
	JZ q6fdone
	MOVQ nb+8(FP), CX
	MOVQ CX, DX
	SHLQ $8, DX
	MOVQ DX, 512(SP) // a token's stride in q: nb·256 bytes
	MOVQ CX, DX
	SHLQ $5, DX
	MOVQ DX, 520(SP) // in bs: nb·32
	MOVQ CX, DX
	SHLQ $2, DX
	MOVQ DX, 528(SP) // in d: nb·4
	MOVQ nt+64(FP), R10
	SHLQ $6, R10 // the accumulators' end: nt·64 bytes at 0(SP)
	VBROADCASTI32X4 kqD4M0F<>(SB), Z31
	VBROADCASTI32X4 kqD4M30<>(SB), Z30
	VMOVDQU64 kqD6Shr<>(SB), Z29
	VMOVDQU64 kqD6Shl<>(SB), Z28

q6fpair:
	LEAQ (SI)(R12*1), R11 // row b
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ bs+32(FP), R9
	VPXORQ Z0, Z0, Z0
	XORQ R15, R15
q6fzero:
	VMOVUPS Z0, 0(SP)(R15*1)
	ADDQ $64, R15
	CMPQ R15, R10
	JLT q6fzero

q6fblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4288(SI)
	PREFETCHT1 4096(R11)
	PREFETCHT1 4160(R11)
	PREFETCHT1 4224(R11)
	PREFETCHT1 4288(R11)
	Q6K_FEW_SETUP(SI, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Y12, Z12)
	Q6K_FEW_SETUP(R11, Z8, Z9, Z10, Z11, Z24, Z25, Z26, Z27, Y13, Z13)
	// [d_w a ×8 | d_w b ×8]
	VPBROADCASTW 208(SI), X2
	VPBROADCASTW 208(R11), X3
	VINSERTI128 $1, X3, Y2, Y2
	VCVTPH2PS Y2, Z2
	MOVQ DI, R13
	MOVQ R9, R14
	MOVQ R8, DX
	XORQ R15, R15

q6ftok:
	Q6K_FEW_DOT(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Y12, Z0, Y0, Z1, Y1, Z6, Z7)
	Q6K_FEW_DOT(Z8, Z9, Z10, Z11, Z24, Z25, Z26, Z27, Y13, Z14, Y14, Z15, Y15, Z4, Z5)
	VINSERTI64X4 $1, Y14, Z0, Z0
	VCVTDQ2PS Z0, Z0
	VBROADCASTSS (DX), Z3
	VMULPS Z3, Z2, Z3
	VMOVUPS 0(SP)(R15*1), Z4
	VFMADD231PS Z3, Z0, Z4
	VMOVUPS Z4, 0(SP)(R15*1)
	ADDQ 512(SP), R13
	ADDQ 520(SP), R14
	ADDQ 528(SP), DX
	ADDQ $64, R15
	CMPQ R15, R10
	JLT q6ftok

	ADDQ $210, SI
	ADDQ $210, R11
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $32, R9
	DECQ CX
	JNZ q6fblock

	// hsum8 of each row's lanes, token by token, to out[t·stride + r] and + r + 1
	MOVQ AX, DX
	XORQ R15, R15
	MOVQ stride+72(FP), R13
	SHLQ $2, R13
q6fout:
	VMOVUPS 0(SP)(R15*1), Z4
	VSHUFF32X4 $0xb1, Z4, Z4, Z5
	VADDPS Z5, Z4, Z4
	VPERMILPS $0x4e, Z4, Z5
	VADDPS Z5, Z4, Z4
	VMOVSHDUP Z4, Z5
	VADDPS Z5, Z4, Z4
	VMOVSS X4, 0(DX)
	VEXTRACTF32X4 $2, Z4, X5
	VMOVSS X5, 4(DX)
	ADDQ R13, DX
	ADDQ $64, R15
	CMPQ R15, R10
	JLT q6fout
	ADDQ $8, AX
	MOVQ R11, SI
	DECQ BX
	JNZ q6fpair

q6fdone:
	VZEROUPPER
	RET

// q5KFewZMM is q5KDecodeZMM for 1 to 8 tokens, as q4KFewZMM is q4KDecodeZMM's: each pair of
// rows unpacked once into registers, every token's lanes and mins' terms fused into its own
// accumulators (80 bytes a token in the frame: the two rows' sixteen lanes, then the mins'
// [_, a, _, b]), the bits q5KDecodeZMM gives each token alone.

// Q5K_FEW_SETUP: Q4K_FEW_SETUP's scales, and the weights with qh's bits (Z4: 0x10). It
// uses Z0..Z3.
#define Q5K_FEW_SETUP(B, S0, S1, S2, S3, W0, W1, W2, W3, Xm) \
	K4D_SCALES(B, Z0, Z1, Z2, X2, Z3, S0, S1, S2, S3, Xm); \
	VMOVDQU64 48(B), Z0; \
	VMOVDQU64 112(B), Z1; \
	VBROADCASTI64X4 16(B), Z2; \
	VPANDQ Z31, Z0, Z3; \
	VPROLVQ kqD5Rot<>+0(SB), Z2, W0; \
	VPTERNLOGQ $0xea, Z3, Z4, W0; \
	VPSRLW $4, Z0, Z0; \
	VPANDQ Z31, Z0, Z3; \
	VPROLVQ kqD5Rot<>+64(SB), Z2, W1; \
	VPTERNLOGQ $0xea, Z3, Z4, W1; \
	VPANDQ Z31, Z1, Z3; \
	VPROLVQ kqD5Rot<>+128(SB), Z2, W2; \
	VPTERNLOGQ $0xea, Z3, Z4, W2; \
	VPSRLW $4, Z1, Z1; \
	VPANDQ Z31, Z1, Z3; \
	VPROLVQ kqD5Rot<>+192(SB), Z2, W3; \
	VPTERNLOGQ $0xea, Z3, Z4, W3

// func q5KFewZMM(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes, nt, stride int)
TEXT ·q5KFewZMM(SB), NOSPLIT, $672-80
	MOVQ w+0(FP), SI
	MOVQ out+40(FP), AX
	MOVQ pairs+48(FP), BX
	MOVQ rowBytes+56(FP), R12
	TESTQ BX, BX
	JZ q5fdone
	MOVQ nb+8(FP), CX
	MOVQ CX, DX
	SHLQ $8, DX
	MOVQ DX, 640(SP) // a token's stride in q: nb·256 bytes
	MOVQ CX, DX
	SHLQ $4, DX
	MOVQ DX, 648(SP) // in ps: nb·16
	MOVQ CX, DX
	SHLQ $2, DX
	MOVQ DX, 656(SP) // in d: nb·4
	MOVQ nt+64(FP), R10
	IMULQ $80, R10 // the accumulators' end: nt·80 bytes at 0(SP)
	VBROADCASTI32X4 kqD4M0F<>(SB), Z31
	VBROADCASTI32X4 kqD4M30<>(SB), Z30
	VBROADCASTI32X4 kqD4M1<>(SB), Z29
	VBROADCASTI32X4 kqD4M2<>(SB), Z28
	VBROADCASTI32X4 kqD4U<>(SB), Z5
	VBROADCASTI32X4 kqD4H<>(SB), Z6
	VMOVDQU kqD4Min<>(SB), X7
	VBROADCASTI32X4 kqD5M10<>(SB), Z4

q5fpair:
	LEAQ (SI)(R12*1), R11 // row b
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), R8
	MOVQ ps+32(FP), R9
	VPXORQ Z0, Z0, Z0
	XORQ R15, R15
q5fzero:
	VMOVUPS Z0, 0(SP)(R15*1)
	VMOVUPS X0, 64(SP)(R15*1)
	ADDQ $80, R15
	CMPQ R15, R10
	JLT q5fzero

q5fblock:
	PREFETCHT1 4096(SI)
	PREFETCHT1 4160(SI)
	PREFETCHT1 4224(SI)
	PREFETCHT1 4096(R11)
	PREFETCHT1 4160(R11)
	PREFETCHT1 4224(R11)
	Q5K_FEW_SETUP(SI, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, X14)
	Q5K_FEW_SETUP(R11, Z8, Z9, Z10, Z11, Z24, Z25, Z26, Z27, X15)
	// [d a, dmin a, d b, dmin b] as floats
	VMOVD 0(SI), X13
	VPINSRD $1, 0(R11), X13, X13
	VCVTPH2PS X13, X13
	MOVQ DI, R13
	MOVQ R9, R14
	MOVQ R8, DX
	XORQ R15, R15

q5ftok:
	VPMADDUBSW 0(R13), Z20, Z0
	VPMADDUBSW 64(R13), Z21, Z1
	VPMADDUBSW 128(R13), Z22, Z2
	VPMADDUBSW 192(R13), Z23, Z3
	VPMADDWD Z16, Z0, Z0
	VPDPWSSD Z17, Z1, Z0
	VPDPWSSD Z18, Z2, Z0
	VPDPWSSD Z19, Z3, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDD Y1, Y0, Y1 // row a's lanes
	VPMADDUBSW 0(R13), Z24, Z0
	VPMADDUBSW 64(R13), Z25, Z2
	VPMADDUBSW 128(R13), Z26, Z3
	VPMADDUBSW 192(R13), Z27, Z12
	VPMADDWD Z8, Z0, Z0
	VPDPWSSD Z9, Z2, Z0
	VPDPWSSD Z10, Z3, Z0
	VPDPWSSD Z11, Z12, Z0
	VEXTRACTI64X4 $1, Z0, Y3
	VPADDD Y3, Y0, Y2 // row b's
	// the mins: [Σ a, Σ a, Σ b, Σ b]; lanes 1 and 3 −= that·M (M = X13·d_x), fused
	VPMADDWD (R14), X14, X0
	VPMADDWD (R14), X15, X3
	VPHADDD X3, X0, X0
	VPHADDD X0, X0, X0
	VPSHUFD $0x50, X0, X0
	VCVTDQ2PS X0, X0
	VBROADCASTSS (DX), X3
	VMULPS X3, X13, X3
	VMOVUPS 64(SP)(R15*1), X12
	VFNMADD231PS X3, X0, X12
	VMOVUPS X12, 64(SP)(R15*1)
	// the lanes
	VINSERTI64X4 $1, Y2, Z1, Z1
	VCVTDQ2PS Z1, Z1
	VMOVDQU64 kqD5Lanes<>(SB), Z2
	VPERMPS Z3, Z2, Z12
	VMOVUPS 0(SP)(R15*1), Z0
	VFMADD231PS Z12, Z1, Z0
	VMOVUPS Z0, 0(SP)(R15*1)
	ADDQ 640(SP), R13
	ADDQ 648(SP), R14
	ADDQ 656(SP), DX
	ADDQ $80, R15
	CMPQ R15, R10
	JLT q5ftok

	ADDQ $176, SI
	ADDQ $176, R11
	ADDQ $256, DI
	ADDQ $4, R8
	ADDQ $16, R9
	DECQ CX
	JNZ q5fblock

	// per token: hsum8 of each row's lanes plus its mins' term, to out[t·stride + r], + r + 1
	MOVQ AX, DX
	XORQ R15, R15
	MOVQ stride+72(FP), R13
	SHLQ $2, R13
q5fout:
	VMOVUPS 0(SP)(R15*1), Z0
	VSHUFF32X4 $0xb1, Z0, Z0, Z1
	VADDPS Z1, Z0, Z0
	VPERMILPS $0x4e, Z0, Z1
	VADDPS Z1, Z0, Z0
	VMOVSHDUP Z0, Z1
	VADDPS Z1, Z0, Z0
	VEXTRACTF32X4 $2, Z0, X1
	VMOVUPS 64(SP)(R15*1), X2
	VMOVSHDUP X2, X2 // [m a, m a, m b, m b]
	VADDSS X2, X0, X0
	VMOVSS X0, 0(DX)
	VMOVHLPS X2, X2, X2
	VADDSS X2, X1, X1
	VMOVSS X1, 4(DX)
	ADDQ R13, DX
	ADDQ $80, R15
	CMPQ R15, R10
	JLT q5fout
	ADDQ $8, AX
	MOVQ R11, SI
	DECQ BX
	JNZ q5fpair

q5fdone:
	VZEROUPPER
	RET
