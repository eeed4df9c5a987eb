#include "textflag.h"
#include "attn_amd64.h"

// func block4x2AVX2(w *float32, n int, x *float32, acc *[64]float32)
//
// Four weight rows (w, row stride n floats) times two tokens (x, stride n) over the first
// n&^7 columns, eight lanes per accumulator: acc[8k:8k+8] holds the lane sums of row k
// (k < 4) with token 0 and of row k-4 with token 1 (k >= 4). Each eight columns take six
// loads and eight FMAs and nothing else, which the Go compiler's version of this loop
// (simd_amd64.go) could not be brought to: it moved every accumulator between registers
// once per iteration.
TEXT ·block4x2AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ x+16(FP), DI
	MOVQ acc+24(FP), DX
	MOVQ CX, R8
	SHLQ $2, R8
	LEAQ (SI)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	LEAQ (DI)(R8*1), R12
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX
	SHRQ $3, CX
	JZ done

loop:
	VMOVUPS (DI)(AX*1), Y8
	VMOVUPS (R12)(AX*1), Y9
	VMOVUPS (SI)(AX*1), Y10
	VMOVUPS (R9)(AX*1), Y11
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y4
	VFMADD231PS Y8, Y11, Y1
	VFMADD231PS Y9, Y11, Y5
	VMOVUPS (R10)(AX*1), Y12
	VMOVUPS (R11)(AX*1), Y13
	VFMADD231PS Y8, Y12, Y2
	VFMADD231PS Y9, Y12, Y6
	VFMADD231PS Y8, Y13, Y3
	VFMADD231PS Y9, Y13, Y7
	ADDQ $32, AX
	DECQ CX
	JNZ loop

done:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VZEROUPPER
	RET

// func block4x1AVX2(w *float32, n int, x *float32, acc *[32]float32)
//
// block4x2AVX2 for one token: acc[8k:8k+8] holds the lane sums of row k with x, the same
// FMAs in the same order as that token gets in a pair. A batch of odd size takes its last
// token here, so every token of a batch has the pairs' arithmetic.
TEXT ·block4x1AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ x+16(FP), DI
	MOVQ acc+24(FP), DX
	MOVQ CX, R8
	SHLQ $2, R8
	LEAQ (SI)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX
	SHRQ $3, CX
	JZ done1

loop1:
	VMOVUPS (DI)(AX*1), Y8
	VMOVUPS (SI)(AX*1), Y10
	VMOVUPS (R9)(AX*1), Y11
	VMOVUPS (R10)(AX*1), Y12
	VMOVUPS (R11)(AX*1), Y13
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y8, Y11, Y1
	VFMADD231PS Y8, Y12, Y2
	VFMADD231PS Y8, Y13, Y3
	ADDQ $32, AX
	DECQ CX
	JNZ loop1

done1:
	VMOVUPS Y0, 0(DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VZEROUPPER
	RET

// func dot4F16AVX2(w *uint16, n int, x *float32, acc *[32]float32)
//
// Four f16 weight rows (row stride n) times x over the first n&^7 columns: per row, eight
// float32 lanes of fused multiply-adds, the same sequence as dot4F16Loop (simd_amd64.go),
// with the weights widened by F16C (VCVTPH2PS from memory) instead of in integer
// arithmetic. acc[8k:8k+8] receives row k's lanes. Each row stream is prefetched 512 bytes
// ahead (+15-20% decode tok/s on Qwen3-0.6B f16, as for Q8_0).
TEXT ·dot4F16AVX2(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ x+16(FP), DI
	MOVQ acc+24(FP), DX
	MOVQ CX, R8
	SHLQ $1, R8
	LEAQ (SI)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX
	SHRQ $3, CX
	JZ f16done

f16loop:
	PREFETCHT0 512(SI)(AX*1)
	PREFETCHT0 512(R9)(AX*1)
	PREFETCHT0 512(R10)(AX*1)
	PREFETCHT0 512(R11)(AX*1)
	VMOVUPS (DI)(AX*2), Y4
	VCVTPH2PS (SI)(AX*1), Y5
	VCVTPH2PS (R9)(AX*1), Y6
	VFMADD231PS Y4, Y5, Y0
	VFMADD231PS Y4, Y6, Y1
	VCVTPH2PS (R10)(AX*1), Y7
	VCVTPH2PS (R11)(AX*1), Y8
	VFMADD231PS Y4, Y7, Y2
	VFMADD231PS Y4, Y8, Y3
	ADDQ $16, AX
	DECQ CX
	JNZ f16loop

f16done:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VZEROUPPER
	RET

// func widenF16AVX2(dst *float32, src *uint16, n int)
//
// dst[i] = float32(src[i]) for the first n&^7 halves, by F16C (exact).
TEXT ·widenF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
	SHRQ $3, CX
	JZ wdone

wloop:
	VCVTPH2PS (SI)(AX*1), Y0
	VMOVUPS Y0, (DI)(AX*2)
	ADDQ $16, AX
	DECQ CX
	JNZ wloop

wdone:
	VZEROUPPER
	RET

// func widenBF16AVX2(dst *float32, src *uint16, n int)
//
// bf16 to float32 for the first n&^7 elements: each value shifted to the high half.
TEXT ·widenBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
	SHRQ $3, CX
	JZ bwdone

bwloop:
	VPMOVZXWD (SI)(AX*1), Y0
	VPSLLD $16, Y0, Y0
	VMOVDQU Y0, (DI)(AX*2)
	ADDQ $16, AX
	DECQ CX
	JNZ bwloop

bwdone:
	VZEROUPPER
	RET

// func roundF16AVX2(dst *float32, src *float32, n int)
//
// dst = src rounded to half precision and widened back, for the first n&^7 elements: F16C's
// conversion (nearest even, overflow to infinity), the activations ggml multiplies f16
// weights with.
TEXT ·roundF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
	SHRQ $3, CX
	JZ rfdone

rfloop:
	VMOVUPS (SI)(AX*1), Y0
	VCVTPS2PH $0, Y0, X0
	VCVTPH2PS X0, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	DECQ CX
	JNZ rfloop

rfdone:
	VZEROUPPER
	RET

// func encodeF16AVX2(dst *uint16, src *float32, n int)
//
// dst = src in half precision (F16C, nearest even) for the first n&^7 elements.
TEXT ·encodeF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
	SHRQ $3, CX
	JZ efdone

efloop:
	VMOVUPS (SI)(AX*2), Y0
	VCVTPS2PH $0, Y0, (DI)(AX*1)
	ADDQ $16, AX
	DECQ CX
	JNZ efloop

efdone:
	VZEROUPPER
	RET

// func madRoundF16AVX2(y *float32, x *uint16, n int, a float32)
//
// ggml_vec_mad_f16 on an accumulator held as float32 values of f16 numbers: for the first
// n&^7 elements y = f16(fma(x, a, y)), the f16 rounding by F16C (VCVTPS2PH, nearest even)
// and back (exact).
TEXT ·madRoundF16AVX2(SB), NOSPLIT, $0-28
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Y15
	XORQ AX, AX
	SHRQ $3, CX
	JZ maddone

madloop:
	VCVTPH2PS (SI)(AX*1), Y1
	VMOVUPS (DI)(AX*2), Y0
	VFMADD231PS Y15, Y1, Y0
	VCVTPS2PH $0, Y0, X0
	VCVTPH2PS X0, Y0
	VMOVUPS Y0, (DI)(AX*2)
	ADDQ $16, AX
	DECQ CX
	JNZ madloop

maddone:
	VZEROUPPER
	RET

// func scaleRoundF16AVX2(y *float32, n int, a float32)
//
// ggml_vec_scale_f16 likewise: y = f16(y·a) for the first n&^7 elements.
TEXT ·scaleRoundF16AVX2(SB), NOSPLIT, $0-20
	MOVQ y+0(FP), DI
	MOVQ n+8(FP), CX
	VBROADCASTSS a+16(FP), Y15
	XORQ AX, AX
	SHRQ $3, CX
	JZ scdone

scloop:
	VMULPS (DI)(AX*1), Y15, Y0
	VCVTPS2PH $0, Y0, X0
	VCVTPH2PS X0, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	DECQ CX
	JNZ scloop

scdone:
	VZEROUPPER
	RET

// func dotF16AccAVX2(q *float32, k *uint16, n int, nacc int, acc *[64]float32)
//
// The accumulation loop of ggml_vec_dot_f16 over the first n elements (a multiple of
// 8·nacc): nacc eight-lane accumulators (4: ggml's AVX2 loop; 8: its AVX-512 loop of four
// 16-lane accumulators, as lo/hi halves), element i going to accumulator (i/8) mod nacc,
// each a fused multiply-add of the widened key (F16C) and q. acc receives them in order.
TEXT ·dotF16AccAVX2(SB), NOSPLIT, $0-40
	MOVQ q+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ nacc+24(FP), BX
	MOVQ acc+32(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX
	CMPQ BX, $8
	JEQ acc8
	SHRQ $5, CX
	JZ accstore

acc4loop:
	VCVTPH2PS (SI)(AX*1), Y8
	VCVTPH2PS 16(SI)(AX*1), Y9
	VCVTPH2PS 32(SI)(AX*1), Y10
	VCVTPH2PS 48(SI)(AX*1), Y11
	VFMADD231PS (DI)(AX*2), Y8, Y0
	VFMADD231PS 32(DI)(AX*2), Y9, Y1
	VFMADD231PS 64(DI)(AX*2), Y10, Y2
	VFMADD231PS 96(DI)(AX*2), Y11, Y3
	ADDQ $64, AX
	DECQ CX
	JNZ acc4loop
	JMP accstore

acc8:
	SHRQ $6, CX
	JZ accstore

acc8loop:
	VCVTPH2PS (SI)(AX*1), Y8
	VCVTPH2PS 16(SI)(AX*1), Y9
	VCVTPH2PS 32(SI)(AX*1), Y10
	VCVTPH2PS 48(SI)(AX*1), Y11
	VFMADD231PS (DI)(AX*2), Y8, Y0
	VFMADD231PS 32(DI)(AX*2), Y9, Y1
	VFMADD231PS 64(DI)(AX*2), Y10, Y2
	VFMADD231PS 96(DI)(AX*2), Y11, Y3
	VCVTPH2PS 64(SI)(AX*1), Y8
	VCVTPH2PS 80(SI)(AX*1), Y9
	VCVTPH2PS 96(SI)(AX*1), Y10
	VCVTPH2PS 112(SI)(AX*1), Y11
	VFMADD231PS 128(DI)(AX*2), Y8, Y4
	VFMADD231PS 160(DI)(AX*2), Y9, Y5
	VFMADD231PS 192(DI)(AX*2), Y10, Y6
	VFMADD231PS 224(DI)(AX*2), Y11, Y7
	ADDQ $128, AX
	DECQ CX
	JNZ acc8loop

accstore:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VMOVUPS Y2, 64(DX)
	VMOVUPS Y3, 96(DX)
	VMOVUPS Y4, 128(DX)
	VMOVUPS Y5, 160(DX)
	VMOVUPS Y6, 192(DX)
	VMOVUPS Y7, 224(DX)
	VZEROUPPER
	RET

// func attnScoresF16AVX2(q *float32, k *uint16, rows *int32, n int, stride int, hd int, nacc int, scale float32, out *float32)
//
// The scores of one query over n cached key rows: out[j] = DotF16(q, key j)·scale, key j
// at k + rows[j]·stride bytes (rows nil: k + j·stride), hd elements (a multiple of 8·nacc).
// With rows nil and scale 1 it is the f16 matrix×vector product in ggml_vec_dot_f16's order. Each dot is
// dotF16AccAVX2's loop followed by reduceDotF16's tree in registers (nacc 4: ggml's AVX2
// reduction; 8: its AVX-512 one), so every score has the bits DotF16 gives, without a
// call, a spill of the accumulators and a Go reduction per position.
TEXT ·attnScoresF16AVX2(SB), NOSPLIT, $0-72
	MOVQ q+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ n+24(FP), R9
	MOVQ stride+32(FP), R10
	MOVQ hd+40(FP), R11
	MOVQ nacc+48(FP), BX
	VBROADCASTSS scale+56(FP), Y15
	MOVQ out+64(FP), DX
	TESTQ R9, R9
	JZ scdone2

scpos:
	TESTQ R8, R8
	JZ scnext
	MOVLQSX (R8), AX
	IMULQ R10, AX
	LEAQ (SI)(AX*1), R12
	CMPQ R9, $ATTN_AHEAD+1
	JLT scfetched
	ATTN_PREFETCH(ATTN_AHEAD*4(R8), AX)
	CMPQ R11, $128
	JLT scfetched
	PREFETCHT0 128(SI)(AX*1)
	PREFETCHT0 192(SI)(AX*1)
scfetched:
	ADDQ $4, R8
	JMP scrow

scnext: // rows nil: consecutive rows from k on
	MOVQ SI, R12
	ADDQ R10, SI

scrow:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ AX, AX
	MOVQ R11, CX
	CMPQ BX, $8
	JEQ sc16

	SHRQ $5, CX

sc8loop:
	PREFETCHT0 1024(R12)(AX*1) // the rows ahead: a matrix streams, a cache mostly does
	VCVTPH2PS (R12)(AX*1), Y8
	VCVTPH2PS 16(R12)(AX*1), Y9
	VCVTPH2PS 32(R12)(AX*1), Y10
	VCVTPH2PS 48(R12)(AX*1), Y11
	VFMADD231PS (DI)(AX*2), Y8, Y0
	VFMADD231PS 32(DI)(AX*2), Y9, Y1
	VFMADD231PS 64(DI)(AX*2), Y10, Y2
	VFMADD231PS 96(DI)(AX*2), Y11, Y3
	ADDQ $64, AX
	DECQ CX
	JNZ sc8loop

	// ggml's AVX2 reduction: (a0+a2)+(a1+a3), 128-bit halves, two horizontal adds.
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	JMP scstore

sc16:
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	SHRQ $6, CX

sc16loop:
	PREFETCHT0 1024(R12)(AX*1)
	PREFETCHT0 1088(R12)(AX*1)
	VCVTPH2PS (R12)(AX*1), Y8
	VCVTPH2PS 16(R12)(AX*1), Y9
	VCVTPH2PS 32(R12)(AX*1), Y10
	VCVTPH2PS 48(R12)(AX*1), Y11
	VFMADD231PS (DI)(AX*2), Y8, Y0
	VFMADD231PS 32(DI)(AX*2), Y9, Y1
	VFMADD231PS 64(DI)(AX*2), Y10, Y2
	VFMADD231PS 96(DI)(AX*2), Y11, Y3
	VCVTPH2PS 64(R12)(AX*1), Y8
	VCVTPH2PS 80(R12)(AX*1), Y9
	VCVTPH2PS 96(R12)(AX*1), Y10
	VCVTPH2PS 112(R12)(AX*1), Y11
	VFMADD231PS 128(DI)(AX*2), Y8, Y4
	VFMADD231PS 160(DI)(AX*2), Y9, Y5
	VFMADD231PS 192(DI)(AX*2), Y10, Y6
	VFMADD231PS 224(DI)(AX*2), Y11, Y7
	ADDQ $128, AX
	DECQ CX
	JNZ sc16loop

	// ggml's AVX-512 reduction of four 16-lane accumulators (lo, hi halves: Y0,Y1 is
	// accumulator 0, ..., Y6,Y7 accumulator 3): a0+=a2, a1+=a3, a0+=a1, then
	// _mm512_reduce_add_ps (halves of 8, of 4, then pairs).
	VADDPS Y4, Y0, Y0
	VADDPS Y5, Y1, Y1
	VADDPS Y6, Y2, Y2
	VADDPS Y7, Y3, Y3
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VADDPS X1, X0, X0
	VMOVSHDUP X0, X1
	VADDSS X1, X0, X0

scstore:
	VMULSS X15, X0, X0
	VMOVSS X0, (DX)
	ADDQ $4, DX
	DECQ R9
	JNZ scpos

scdone2:
	VZEROUPPER
	RET

// func attnMadSeqF16AVX2(acc *float32, v *uint16, rows *int32, n int, stride int, hd int, ms *float32, vs *float32)
//
// The value side of ggml's flash attention for one query over n positions, with the online
// softmax's factors computed beforehand: for j in order, acc = f16(acc·ms[j]) where
// ms[j] ≠ 1 (ggml_vec_scale_f16 on a new maximum), then acc = f16(fma(v_j, vs[j], acc))
// (ggml_vec_mad_f16), v_j at v + rows[j]·stride bytes. hd is a multiple of 64; the
// accumulator is held in registers 64 elements at a time, so each element sees exactly the
// sequence of roundings madRoundF16AVX2/scaleRoundF16AVX2 would give it.
TEXT ·attnMadSeqF16AVX2(SB), NOSPLIT, $0-64
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ n+24(FP), R9
	MOVQ stride+32(FP), R10
	MOVQ hd+40(FP), CX
	MOVQ ms+48(FP), R13
	MOVQ vs+56(FP), R14
	SHRQ $6, CX
	JZ mqdone
	TESTQ R9, R9
	JZ mqdone

mqchunk:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7
	XORQ BX, BX

mqpos:
	CMPL (R13)(BX*4), $0x3f800000 // ms = 1.0: no new maximum
	JEQ mqmad
	VBROADCASTSS (R13)(BX*4), Y8
	VMULPS Y8, Y0, Y0
	VMULPS Y8, Y1, Y1
	VMULPS Y8, Y2, Y2
	VMULPS Y8, Y3, Y3
	VMULPS Y8, Y4, Y4
	VMULPS Y8, Y5, Y5
	VMULPS Y8, Y6, Y6
	VMULPS Y8, Y7, Y7
	VCVTPS2PH $0, Y0, X0
	VCVTPS2PH $0, Y1, X1
	VCVTPS2PH $0, Y2, X2
	VCVTPS2PH $0, Y3, X3
	VCVTPS2PH $0, Y4, X4
	VCVTPS2PH $0, Y5, X5
	VCVTPS2PH $0, Y6, X6
	VCVTPS2PH $0, Y7, X7
	VCVTPH2PS X0, Y0
	VCVTPH2PS X1, Y1
	VCVTPH2PS X2, Y2
	VCVTPH2PS X3, Y3
	VCVTPH2PS X4, Y4
	VCVTPH2PS X5, Y5
	VCVTPH2PS X6, Y6
	VCVTPH2PS X7, Y7

mqmad:
	LEAQ ATTN_AHEAD(BX), DX
	CMPQ DX, R9
	JGE mqfetched
	ATTN_PREFETCH((R8)(DX*4), DX)
mqfetched:
	VBROADCASTSS (R14)(BX*4), Y8
	MOVLQSX (R8)(BX*4), AX
	IMULQ R10, AX
	ADDQ SI, AX
	VCVTPH2PS (AX), Y9
	VCVTPH2PS 16(AX), Y10
	VCVTPH2PS 32(AX), Y11
	VCVTPH2PS 48(AX), Y12
	VFMADD231PS Y8, Y9, Y0
	VFMADD231PS Y8, Y10, Y1
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y8, Y12, Y3
	VCVTPH2PS 64(AX), Y9
	VCVTPH2PS 80(AX), Y10
	VCVTPH2PS 96(AX), Y11
	VCVTPH2PS 112(AX), Y12
	VFMADD231PS Y8, Y9, Y4
	VFMADD231PS Y8, Y10, Y5
	VFMADD231PS Y8, Y11, Y6
	VFMADD231PS Y8, Y12, Y7
	VCVTPS2PH $0, Y0, X0
	VCVTPS2PH $0, Y1, X1
	VCVTPS2PH $0, Y2, X2
	VCVTPS2PH $0, Y3, X3
	VCVTPS2PH $0, Y4, X4
	VCVTPS2PH $0, Y5, X5
	VCVTPS2PH $0, Y6, X6
	VCVTPS2PH $0, Y7, X7
	VCVTPH2PS X0, Y0
	VCVTPH2PS X1, Y1
	VCVTPH2PS X2, Y2
	VCVTPH2PS X3, Y3
	VCVTPH2PS X4, Y4
	VCVTPH2PS X5, Y5
	VCVTPH2PS X6, Y6
	VCVTPH2PS X7, Y7
	INCQ BX
	CMPQ BX, R9
	JLT mqpos

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	ADDQ $256, DI
	ADDQ $128, SI
	DECQ CX
	JNZ mqchunk

mqdone:
	VZEROUPPER
	RET

// func q8Tile4x4VNNI(w *byte, rowBytes int, nb int, dw *float32, x *int8, xBytes int, d8 *float32, acc *[128]float32)
//
// A Q8_0 × Q8_0 tile of the prefill product: four weight rows (w, rowBytes apart, nb
// blocks of 34 bytes: f16 scale, 32 int8) times four activation rows (x, xBytes apart,
// nb×32 int8; d8 their block scales, eight copies per block, nb×8 floats per token). dw
// holds the weight rows' scales as float32, four per block (dw[4b+r]). acc[8(4r+t):] gets
// the eight lane sums of row r with token t, each lane exactly what ggml_vec_dot_q8_0_q8_0
// accumulates (and matVecQ8_0AVX2): per block, the integer sum of four byte products as a
// float, times dw·dx, fused-added. VPDPBUSD (AVX-512 VNNI) multiplies unsigned by signed
// bytes, so the activations are offset to x+128 and each lane starts from −128·Σw of its
// four weight bytes (another VPDPBUSD, of 0x80 bytes with w): the integer sums come out
// exact (|x| ≤ 127: no product sum leaves int32), and each weight row is loaded once per
// four tokens, each token once per four rows. The accumulators live in Y16–Y31 (EVEX).
TEXT ·q8Tile4x4VNNI(SB), NOSPLIT, $0-64
	MOVL $0x80808080, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15
	VPXOR Y14, Y14, Y14
	MOVQ w+0(FP), R8
	MOVQ rowBytes+8(FP), AX
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	LEAQ (R10)(AX*1), R11
	MOVQ dw+24(FP), SI
	MOVQ x+32(FP), R12
	MOVQ xBytes+40(FP), AX
	LEAQ (R12)(AX*1), R13
	LEAQ (R13)(AX*1), R14
	LEAQ (R14)(AX*1), R15
	MOVQ nb+16(FP), DI
	MOVQ DI, DX
	SHLQ $5, DX // bytes of one token's d8
	MOVQ d8+48(FP), AX
	LEAQ (AX)(DX*1), BX
	LEAQ (BX)(DX*1), CX
	LEAQ (CX)(DX*1), DX
	VPXORD Y16, Y16, Y16
	VMOVAPS Y16, Y17
	VMOVAPS Y16, Y18
	VMOVAPS Y16, Y19
	VMOVAPS Y16, Y20
	VMOVAPS Y16, Y21
	VMOVAPS Y16, Y22
	VMOVAPS Y16, Y23
	VMOVAPS Y16, Y24
	VMOVAPS Y16, Y25
	VMOVAPS Y16, Y26
	VMOVAPS Y16, Y27
	VMOVAPS Y16, Y28
	VMOVAPS Y16, Y29
	VMOVAPS Y16, Y30
	VMOVAPS Y16, Y31
	TESTQ DI, DI
	JZ q8tstore

q8tblock:
	// The four tokens' bytes, offset to unsigned.
	VPXOR (R12), Y15, Y0
	VPXOR (R13), Y15, Y1
	VPXOR (R14), Y15, Y2
	VPXOR (R15), Y15, Y3

	// Row R8: its bytes, −128·Σw per lane, its scale; then the four tokens.
	VMOVDQU 2(R8), Y4
	VPXOR Y5, Y5, Y5
	VPDPBUSD Y4, Y15, Y5
	VPSUBD Y5, Y14, Y5
	VBROADCASTSS 0(SI), Y6
	VMOVDQA Y5, Y7
	VPDPBUSD Y4, Y0, Y7
	VCVTDQ2PS Y7, Y7
	VMULPS (AX), Y6, Y11
	VFMADD231PS Y7, Y11, Y16
	VMOVDQA Y5, Y8
	VPDPBUSD Y4, Y1, Y8
	VCVTDQ2PS Y8, Y8
	VMULPS (BX), Y6, Y12
	VFMADD231PS Y8, Y12, Y17
	VMOVDQA Y5, Y9
	VPDPBUSD Y4, Y2, Y9
	VCVTDQ2PS Y9, Y9
	VMULPS (CX), Y6, Y13
	VFMADD231PS Y9, Y13, Y18
	VMOVDQA Y5, Y10
	VPDPBUSD Y4, Y3, Y10
	VCVTDQ2PS Y10, Y10
	VMULPS (DX), Y6, Y11
	VFMADD231PS Y10, Y11, Y19

	// Row R9: its bytes, −128·Σw per lane, its scale; then the four tokens.
	VMOVDQU 2(R9), Y4
	VPXOR Y5, Y5, Y5
	VPDPBUSD Y4, Y15, Y5
	VPSUBD Y5, Y14, Y5
	VBROADCASTSS 4(SI), Y6
	VMOVDQA Y5, Y7
	VPDPBUSD Y4, Y0, Y7
	VCVTDQ2PS Y7, Y7
	VMULPS (AX), Y6, Y11
	VFMADD231PS Y7, Y11, Y20
	VMOVDQA Y5, Y8
	VPDPBUSD Y4, Y1, Y8
	VCVTDQ2PS Y8, Y8
	VMULPS (BX), Y6, Y12
	VFMADD231PS Y8, Y12, Y21
	VMOVDQA Y5, Y9
	VPDPBUSD Y4, Y2, Y9
	VCVTDQ2PS Y9, Y9
	VMULPS (CX), Y6, Y13
	VFMADD231PS Y9, Y13, Y22
	VMOVDQA Y5, Y10
	VPDPBUSD Y4, Y3, Y10
	VCVTDQ2PS Y10, Y10
	VMULPS (DX), Y6, Y11
	VFMADD231PS Y10, Y11, Y23

	// Row R10: its bytes, −128·Σw per lane, its scale; then the four tokens.
	VMOVDQU 2(R10), Y4
	VPXOR Y5, Y5, Y5
	VPDPBUSD Y4, Y15, Y5
	VPSUBD Y5, Y14, Y5
	VBROADCASTSS 8(SI), Y6
	VMOVDQA Y5, Y7
	VPDPBUSD Y4, Y0, Y7
	VCVTDQ2PS Y7, Y7
	VMULPS (AX), Y6, Y11
	VFMADD231PS Y7, Y11, Y24
	VMOVDQA Y5, Y8
	VPDPBUSD Y4, Y1, Y8
	VCVTDQ2PS Y8, Y8
	VMULPS (BX), Y6, Y12
	VFMADD231PS Y8, Y12, Y25
	VMOVDQA Y5, Y9
	VPDPBUSD Y4, Y2, Y9
	VCVTDQ2PS Y9, Y9
	VMULPS (CX), Y6, Y13
	VFMADD231PS Y9, Y13, Y26
	VMOVDQA Y5, Y10
	VPDPBUSD Y4, Y3, Y10
	VCVTDQ2PS Y10, Y10
	VMULPS (DX), Y6, Y11
	VFMADD231PS Y10, Y11, Y27

	// Row R11: its bytes, −128·Σw per lane, its scale; then the four tokens.
	VMOVDQU 2(R11), Y4
	VPXOR Y5, Y5, Y5
	VPDPBUSD Y4, Y15, Y5
	VPSUBD Y5, Y14, Y5
	VBROADCASTSS 12(SI), Y6
	VMOVDQA Y5, Y7
	VPDPBUSD Y4, Y0, Y7
	VCVTDQ2PS Y7, Y7
	VMULPS (AX), Y6, Y11
	VFMADD231PS Y7, Y11, Y28
	VMOVDQA Y5, Y8
	VPDPBUSD Y4, Y1, Y8
	VCVTDQ2PS Y8, Y8
	VMULPS (BX), Y6, Y12
	VFMADD231PS Y8, Y12, Y29
	VMOVDQA Y5, Y9
	VPDPBUSD Y4, Y2, Y9
	VCVTDQ2PS Y9, Y9
	VMULPS (CX), Y6, Y13
	VFMADD231PS Y9, Y13, Y30
	VMOVDQA Y5, Y10
	VPDPBUSD Y4, Y3, Y10
	VCVTDQ2PS Y10, Y10
	VMULPS (DX), Y6, Y11
	VFMADD231PS Y10, Y11, Y31

	ADDQ $34, R8
	ADDQ $34, R9
	ADDQ $34, R10
	ADDQ $34, R11
	ADDQ $32, R12
	ADDQ $32, R13
	ADDQ $32, R14
	ADDQ $32, R15
	ADDQ $32, AX
	ADDQ $32, BX
	ADDQ $32, CX
	ADDQ $32, DX
	ADDQ $16, SI
	DECQ DI
	JNZ q8tblock

q8tstore:
	MOVQ acc+56(FP), DI
	VMOVUPS Y16, 0(DI)
	VMOVUPS Y17, 32(DI)
	VMOVUPS Y18, 64(DI)
	VMOVUPS Y19, 96(DI)
	VMOVUPS Y20, 128(DI)
	VMOVUPS Y21, 160(DI)
	VMOVUPS Y22, 192(DI)
	VMOVUPS Y23, 224(DI)
	VMOVUPS Y24, 256(DI)
	VMOVUPS Y25, 288(DI)
	VMOVUPS Y26, 320(DI)
	VMOVUPS Y27, 352(DI)
	VMOVUPS Y28, 384(DI)
	VMOVUPS Y29, 416(DI)
	VMOVUPS Y30, 448(DI)
	VMOVUPS Y31, 480(DI)
	VZEROUPPER
	RET

// func tile4x4F32Z(w *float32, stride, cols int, x *[4]*float32, acc *[256]float32, mode int, out *[16]float32)
//
// Four weight rows (w, stride floats apart) times four tokens (x[t]) over cols columns (a
// multiple of 16), for AVX-512 CPUs: one 16-lane accumulator per row and token, fused
// multiply-adds over the columns in order, then _mm512_reduce_add_ps's tree (halves of 8,
// of 4, then (l0+l2)+(l1+l3)) — the arithmetic of llama.cpp's AVX-512 sgemm (tinyBLAS) for
// f16 weights. out[4t+r] gets row r times token t. Sixteen accumulators, four weight and four
// token registers: per 16 columns eight loads feed sixteen FMAs, twice the work per load
// and per instruction of the 8-lane 4×2 tile.
//
// The sixteen reductions run side by side, each level of the tree pairing two registers'
// halves with one shuffle each and adding them (45 instructions and one store where one
// accumulator at a time took 128; no speed difference measured, 82-87 against 84-88
// GFLOP/s on one core): 256-bit halves, then 128-bit quarters (VSHUFF64X2),
// then lanes 0,1 with 2,3 and lane 0 with 1 within each quarter (VSHUFPS). Every
// accumulator still adds the same lane pairs in the same order.
//
// A long row is done in chunks of columns (asmTiles4x4), so that four rows' chunk stays in
// L1 while every token of the block passes: mode bit 0 starts from the sixteen accumulators
// saved in acc (acc[16(4r+t)+lane]) instead of zeros, bit 1 saves them there instead of
// reducing into out. Every lane then adds the same products in the same order as one pass.
TEXT ·tile4x4F32Z(SB), NOSPLIT, $0-56
	MOVQ w+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ cols+16(FP), CX
	MOVQ x+24(FP), DX
	MOVQ 0(DX), R12
	MOVQ 8(DX), R13
	MOVQ 16(DX), R14
	MOVQ 24(DX), R15
	SHLQ $2, R8
	LEAQ (SI)(R8*1), R9
	LEAQ (R9)(R8*1), R10
	LEAQ (R10)(R8*1), R11
	MOVQ acc+32(FP), BX
	MOVQ mode+40(FP), DI
	TESTQ $1, DI
	JZ zzero
	VMOVUPS 0(BX), Z0
	VMOVUPS 64(BX), Z1
	VMOVUPS 128(BX), Z2
	VMOVUPS 192(BX), Z3
	VMOVUPS 256(BX), Z4
	VMOVUPS 320(BX), Z5
	VMOVUPS 384(BX), Z6
	VMOVUPS 448(BX), Z7
	VMOVUPS 512(BX), Z8
	VMOVUPS 576(BX), Z9
	VMOVUPS 640(BX), Z10
	VMOVUPS 704(BX), Z11
	VMOVUPS 768(BX), Z12
	VMOVUPS 832(BX), Z13
	VMOVUPS 896(BX), Z14
	VMOVUPS 960(BX), Z15
	JMP zstart

zzero:
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

zstart:
	XORQ AX, AX
	SHRQ $4, CX
	JZ zred

zloop:
	VMOVUPS (SI)(AX*1), Z16
	VMOVUPS (R9)(AX*1), Z17
	VMOVUPS (R10)(AX*1), Z18
	VMOVUPS (R11)(AX*1), Z19
	VMOVUPS (R12)(AX*1), Z20
	VMOVUPS (R13)(AX*1), Z21
	VMOVUPS (R14)(AX*1), Z22
	VMOVUPS (R15)(AX*1), Z23
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z21, Z16, Z1
	VFMADD231PS Z22, Z16, Z2
	VFMADD231PS Z23, Z16, Z3
	VFMADD231PS Z20, Z17, Z4
	VFMADD231PS Z21, Z17, Z5
	VFMADD231PS Z22, Z17, Z6
	VFMADD231PS Z23, Z17, Z7
	VFMADD231PS Z20, Z18, Z8
	VFMADD231PS Z21, Z18, Z9
	VFMADD231PS Z22, Z18, Z10
	VFMADD231PS Z23, Z18, Z11
	VFMADD231PS Z20, Z19, Z12
	VFMADD231PS Z21, Z19, Z13
	VFMADD231PS Z22, Z19, Z14
	VFMADD231PS Z23, Z19, Z15
	ADDQ $64, AX
	DECQ CX
	JNZ zloop

zred:
	MOVQ mode+40(FP), DI
	TESTQ $2, DI
	JZ zreduce
	VMOVUPS Z0, 0(BX)
	VMOVUPS Z1, 64(BX)
	VMOVUPS Z2, 128(BX)
	VMOVUPS Z3, 192(BX)
	VMOVUPS Z4, 256(BX)
	VMOVUPS Z5, 320(BX)
	VMOVUPS Z6, 384(BX)
	VMOVUPS Z7, 448(BX)
	VMOVUPS Z8, 512(BX)
	VMOVUPS Z9, 576(BX)
	VMOVUPS Z10, 640(BX)
	VMOVUPS Z11, 704(BX)
	VMOVUPS Z12, 768(BX)
	VMOVUPS Z13, 832(BX)
	VMOVUPS Z14, 896(BX)
	VMOVUPS Z15, 960(BX)
	VZEROUPPER
	RET

zreduce:
	MOVQ out+48(FP), DI
	VSHUFF64X2 $0x44, Z1, Z0, Z16
	VSHUFF64X2 $0xEE, Z1, Z0, Z24
	VADDPS Z24, Z16, Z16
	VSHUFF64X2 $0x44, Z3, Z2, Z17
	VSHUFF64X2 $0xEE, Z3, Z2, Z24
	VADDPS Z24, Z17, Z17
	VSHUFF64X2 $0x44, Z5, Z4, Z18
	VSHUFF64X2 $0xEE, Z5, Z4, Z24
	VADDPS Z24, Z18, Z18
	VSHUFF64X2 $0x44, Z7, Z6, Z19
	VSHUFF64X2 $0xEE, Z7, Z6, Z24
	VADDPS Z24, Z19, Z19
	VSHUFF64X2 $0x44, Z9, Z8, Z20
	VSHUFF64X2 $0xEE, Z9, Z8, Z24
	VADDPS Z24, Z20, Z20
	VSHUFF64X2 $0x44, Z11, Z10, Z21
	VSHUFF64X2 $0xEE, Z11, Z10, Z24
	VADDPS Z24, Z21, Z21
	VSHUFF64X2 $0x44, Z13, Z12, Z22
	VSHUFF64X2 $0xEE, Z13, Z12, Z24
	VADDPS Z24, Z22, Z22
	VSHUFF64X2 $0x44, Z15, Z14, Z23
	VSHUFF64X2 $0xEE, Z15, Z14, Z24
	VADDPS Z24, Z23, Z23
	VSHUFF64X2 $0x88, Z17, Z16, Z0
	VSHUFF64X2 $0xDD, Z17, Z16, Z24
	VADDPS Z24, Z0, Z0
	VSHUFF64X2 $0x88, Z19, Z18, Z1
	VSHUFF64X2 $0xDD, Z19, Z18, Z24
	VADDPS Z24, Z1, Z1
	VSHUFF64X2 $0x88, Z21, Z20, Z2
	VSHUFF64X2 $0xDD, Z21, Z20, Z24
	VADDPS Z24, Z2, Z2
	VSHUFF64X2 $0x88, Z23, Z22, Z3
	VSHUFF64X2 $0xDD, Z23, Z22, Z24
	VADDPS Z24, Z3, Z3
	VSHUFPS $0x44, Z1, Z0, Z4
	VSHUFPS $0xEE, Z1, Z0, Z24
	VADDPS Z24, Z4, Z4
	VSHUFPS $0x44, Z3, Z2, Z5
	VSHUFPS $0xEE, Z3, Z2, Z24
	VADDPS Z24, Z5, Z5
	VSHUFPS $0x88, Z5, Z4, Z6
	VSHUFPS $0xDD, Z5, Z4, Z24
	VADDPS Z24, Z6, Z6
	VMOVUPS Z6, (DI)
	VZEROUPPER
	RET

// func q8Tile4x4VNNIZ(w *byte, rowBytes int, nb int, dw16 *float32, x *int8, xBytes int, d *float32, out *[16]float32)
//
// q8Tile4x4VNNI with two weight rows per 512-bit register: the low half of every vector is
// row 2p's block, the high half row 2p+1's, against the token's bytes in both halves, so
// each instruction does two (row, token) pairs and every lane does exactly the arithmetic
// of the 256-bit tile (the same bits). dw16 holds per block and row pair sixteen floats
// (eight copies of each row's scale); d holds the tokens' block scales, one float per block
// (nb per token, consecutive tokens nb apart), broadcast from memory into the multiply.
// out[4r+t] gets row r times token t, its eight lanes added in ggml's hsum_float_8 order.
TEXT ·q8Tile4x4VNNIZ(SB), NOSPLIT, $0-64
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z31
	VPXORD Z30, Z30, Z30
	MOVQ w+0(FP), R8
	MOVQ rowBytes+8(FP), AX
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	LEAQ (R10)(AX*1), R11
	MOVQ dw16+24(FP), SI
	MOVQ x+32(FP), R12
	MOVQ xBytes+40(FP), AX
	LEAQ (R12)(AX*1), R13
	LEAQ (R13)(AX*1), R14
	LEAQ (R14)(AX*1), R15
	MOVQ nb+16(FP), DI
	MOVQ DI, DX
	SHLQ $2, DX // bytes of one token's scales
	MOVQ d+48(FP), AX
	LEAQ (AX)(DX*1), BX
	LEAQ (BX)(DX*1), CX
	LEAQ (CX)(DX*1), DX
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	TESTQ DI, DI
	JZ q8zstore

q8zblock:
	VBROADCASTI64X4 (R12), Z0
	VBROADCASTI64X4 (R13), Z1
	VBROADCASTI64X4 (R14), Z2
	VBROADCASTI64X4 (R15), Z3
	VPXORD Z31, Z0, Z0
	VPXORD Z31, Z1, Z1
	VPXORD Z31, Z2, Z2
	VPXORD Z31, Z3, Z3

	// Rows 0 and 1.
	VMOVDQU 2(R8), Y4
	VINSERTI64X4 $1, 2(R9), Z4, Z4
	VPXORD Z5, Z5, Z5
	VPDPBUSD Z4, Z31, Z5
	VPSUBD Z5, Z30, Z5
	VMOVUPS 0(SI), Z6
	VMOVDQA64 Z5, Z7
	VPDPBUSD Z4, Z0, Z7
	VCVTDQ2PS Z7, Z7
	VMULPS.BCST (AX), Z6, Z11
	VFMADD231PS Z7, Z11, Z16
	VMOVDQA64 Z5, Z8
	VPDPBUSD Z4, Z1, Z8
	VCVTDQ2PS Z8, Z8
	VMULPS.BCST (BX), Z6, Z12
	VFMADD231PS Z8, Z12, Z17
	VMOVDQA64 Z5, Z9
	VPDPBUSD Z4, Z2, Z9
	VCVTDQ2PS Z9, Z9
	VMULPS.BCST (CX), Z6, Z13
	VFMADD231PS Z9, Z13, Z18
	VMOVDQA64 Z5, Z10
	VPDPBUSD Z4, Z3, Z10
	VCVTDQ2PS Z10, Z10
	VMULPS.BCST (DX), Z6, Z14
	VFMADD231PS Z10, Z14, Z19

	// Rows 2 and 3.
	VMOVDQU 2(R10), Y4
	VINSERTI64X4 $1, 2(R11), Z4, Z4
	VPXORD Z5, Z5, Z5
	VPDPBUSD Z4, Z31, Z5
	VPSUBD Z5, Z30, Z5
	VMOVUPS 64(SI), Z6
	VMOVDQA64 Z5, Z7
	VPDPBUSD Z4, Z0, Z7
	VCVTDQ2PS Z7, Z7
	VMULPS.BCST (AX), Z6, Z11
	VFMADD231PS Z7, Z11, Z20
	VMOVDQA64 Z5, Z8
	VPDPBUSD Z4, Z1, Z8
	VCVTDQ2PS Z8, Z8
	VMULPS.BCST (BX), Z6, Z12
	VFMADD231PS Z8, Z12, Z21
	VMOVDQA64 Z5, Z9
	VPDPBUSD Z4, Z2, Z9
	VCVTDQ2PS Z9, Z9
	VMULPS.BCST (CX), Z6, Z13
	VFMADD231PS Z9, Z13, Z22
	VMOVDQA64 Z5, Z10
	VPDPBUSD Z4, Z3, Z10
	VCVTDQ2PS Z10, Z10
	VMULPS.BCST (DX), Z6, Z14
	VFMADD231PS Z10, Z14, Z23

	ADDQ $34, R8
	ADDQ $34, R9
	ADDQ $34, R10
	ADDQ $34, R11
	ADDQ $32, R12
	ADDQ $32, R13
	ADDQ $32, R14
	ADDQ $32, R15
	ADDQ $4, AX
	ADDQ $4, BX
	ADDQ $4, CX
	ADDQ $4, DX
	ADDQ $128, SI
	DECQ DI
	JNZ q8zblock

q8zstore:
	MOVQ out+56(FP), DI
	VMOVAPS Y16, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 0(DI)
	VEXTRACTF32X8 $1, Z16, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 16(DI)
	VMOVAPS Y17, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 4(DI)
	VEXTRACTF32X8 $1, Z17, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 20(DI)
	VMOVAPS Y18, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 8(DI)
	VEXTRACTF32X8 $1, Z18, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 24(DI)
	VMOVAPS Y19, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 12(DI)
	VEXTRACTF32X8 $1, Z19, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 28(DI)
	VMOVAPS Y20, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 32(DI)
	VEXTRACTF32X8 $1, Z20, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 48(DI)
	VMOVAPS Y21, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 36(DI)
	VEXTRACTF32X8 $1, Z21, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 52(DI)
	VMOVAPS Y22, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 40(DI)
	VEXTRACTF32X8 $1, Z22, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 56(DI)
	VMOVAPS Y23, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 44(DI)
	VEXTRACTF32X8 $1, Z23, Y24
	VEXTRACTF32X4 $1, Y24, X25
	VADDPS X25, X24, X24
	VPERMILPS $0x4e, X24, X25
	VADDPS X25, X24, X24
	VMOVSHDUP X24, X25
	VADDSS X25, X24, X24
	VMOVSS X24, 60(DI)
	VZEROUPPER
	RET

// func attnMadSeqF16Z(acc *float32, v *uint16, rows *int32, n int, stride int, hd int, ms *float32, vs *float32)
//
// attnMadSeqF16AVX2 on AVX-512: 128 accumulator elements at a time in eight 512-bit
// registers (hd a multiple of 128). Every operation is lane-wise, so each element sees the
// same roundings as in the 256-bit version, with half the instructions.
TEXT ·attnMadSeqF16Z(SB), NOSPLIT, $0-64
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ n+24(FP), R9
	MOVQ stride+32(FP), R10
	MOVQ hd+40(FP), CX
	MOVQ ms+48(FP), R13
	MOVQ vs+56(FP), R14
	SHRQ $7, CX
	JZ mzdone
	TESTQ R9, R9
	JZ mzdone

mzchunk:
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	VMOVUPS 256(DI), Z4
	VMOVUPS 320(DI), Z5
	VMOVUPS 384(DI), Z6
	VMOVUPS 448(DI), Z7
	XORQ BX, BX

mzpos:
	CMPL (R13)(BX*4), $0x3f800000 // ms = 1.0: no new maximum
	JEQ mzmad
	VBROADCASTSS (R13)(BX*4), Z8
	VMULPS Z8, Z0, Z0
	VMULPS Z8, Z1, Z1
	VMULPS Z8, Z2, Z2
	VMULPS Z8, Z3, Z3
	VMULPS Z8, Z4, Z4
	VMULPS Z8, Z5, Z5
	VMULPS Z8, Z6, Z6
	VMULPS Z8, Z7, Z7
	VCVTPS2PH $0, Z0, Y0
	VCVTPS2PH $0, Z1, Y1
	VCVTPS2PH $0, Z2, Y2
	VCVTPS2PH $0, Z3, Y3
	VCVTPS2PH $0, Z4, Y4
	VCVTPS2PH $0, Z5, Y5
	VCVTPS2PH $0, Z6, Y6
	VCVTPS2PH $0, Z7, Y7
	VCVTPH2PS Y0, Z0
	VCVTPH2PS Y1, Z1
	VCVTPH2PS Y2, Z2
	VCVTPH2PS Y3, Z3
	VCVTPH2PS Y4, Z4
	VCVTPH2PS Y5, Z5
	VCVTPH2PS Y6, Z6
	VCVTPH2PS Y7, Z7

mzmad:
	LEAQ ATTN_AHEAD(BX), DX
	CMPQ DX, R9
	JGE mzfetched
	ATTN_PREFETCH((R8)(DX*4), DX)
	PREFETCHT0 128(SI)(DX*1)
	PREFETCHT0 192(SI)(DX*1)
mzfetched:
	VBROADCASTSS (R14)(BX*4), Z8
	MOVLQSX (R8)(BX*4), AX
	IMULQ R10, AX
	ADDQ SI, AX
	VCVTPH2PS 0(AX), Z9
	VCVTPH2PS 32(AX), Z10
	VCVTPH2PS 64(AX), Z11
	VCVTPH2PS 96(AX), Z12
	VCVTPH2PS 128(AX), Z13
	VCVTPH2PS 160(AX), Z14
	VCVTPH2PS 192(AX), Z15
	VCVTPH2PS 224(AX), Z16
	VFMADD231PS Z8, Z9, Z0
	VFMADD231PS Z8, Z10, Z1
	VFMADD231PS Z8, Z11, Z2
	VFMADD231PS Z8, Z12, Z3
	VFMADD231PS Z8, Z13, Z4
	VFMADD231PS Z8, Z14, Z5
	VFMADD231PS Z8, Z15, Z6
	VFMADD231PS Z8, Z16, Z7
	VCVTPS2PH $0, Z0, Y0
	VCVTPS2PH $0, Z1, Y1
	VCVTPS2PH $0, Z2, Y2
	VCVTPS2PH $0, Z3, Y3
	VCVTPS2PH $0, Z4, Y4
	VCVTPS2PH $0, Z5, Y5
	VCVTPS2PH $0, Z6, Y6
	VCVTPS2PH $0, Z7, Y7
	VCVTPH2PS Y0, Z0
	VCVTPH2PS Y1, Z1
	VCVTPH2PS Y2, Z2
	VCVTPH2PS Y3, Z3
	VCVTPH2PS Y4, Z4
	VCVTPH2PS Y5, Z5
	VCVTPH2PS Y6, Z6
	VCVTPH2PS Y7, Z7
	INCQ BX
	CMPQ BX, R9
	JLT mzpos

	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 256(DI)
	VMOVUPS Z5, 320(DI)
	VMOVUPS Z6, 384(DI)
	VMOVUPS Z7, 448(DI)
	ADDQ $512, DI
	ADDQ $256, SI
	DECQ CX
	JNZ mzchunk

mzdone:
	VZEROUPPER
	RET

// func attnScoresF16Z(q *float32, k *uint16, rows *int32, n int, stride int, hd int, scale float32, out *float32)
//
// attnScoresF16AVX2's 16-lane order (ggml's AVX-512 ggml_vec_dot_f16) in 512-bit registers:
// accumulator j of ggml's loop is register Zj, so the sums are the same, with half the
// instructions. hd is a multiple of 64; rows nil takes consecutive rows.
TEXT ·attnScoresF16Z(SB), NOSPLIT, $0-64
	MOVQ q+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ n+24(FP), R9
	MOVQ stride+32(FP), R10
	MOVQ hd+40(FP), R11
	VBROADCASTSS scale+48(FP), X15
	MOVQ out+56(FP), DX
	SHRQ $6, R11
	TESTQ R9, R9
	JZ szdone

szpos:
	TESTQ R8, R8
	JZ sznext
	MOVLQSX (R8), AX
	IMULQ R10, AX
	LEAQ (SI)(AX*1), R12
	CMPQ R9, $ATTN_AHEAD+1
	JLT szfetched
	ATTN_PREFETCH(ATTN_AHEAD*4(R8), AX)
	CMPQ R11, $2
	JLT szfetched
	PREFETCHT0 128(SI)(AX*1)
	PREFETCHT0 192(SI)(AX*1)
szfetched:
	ADDQ $4, R8
	JMP szrow

sznext:
	MOVQ SI, R12
	ADDQ R10, SI

szrow:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ AX, AX
	MOVQ R11, CX

szloop:
	PREFETCHT0 1024(R12)(AX*1)
	PREFETCHT0 1088(R12)(AX*1)
	VCVTPH2PS (R12)(AX*1), Z8
	VCVTPH2PS 32(R12)(AX*1), Z9
	VCVTPH2PS 64(R12)(AX*1), Z10
	VCVTPH2PS 96(R12)(AX*1), Z11
	VFMADD231PS (DI)(AX*2), Z8, Z0
	VFMADD231PS 64(DI)(AX*2), Z9, Z1
	VFMADD231PS 128(DI)(AX*2), Z10, Z2
	VFMADD231PS 192(DI)(AX*2), Z11, Z3
	ADDQ $128, AX
	DECQ CX
	JNZ szloop

	VADDPS Z2, Z0, Z0
	VADDPS Z3, Z1, Z1
	VADDPS Z1, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VMOVHLPS X0, X0, X1
	VADDPS X1, X0, X0
	VMOVSHDUP X0, X1
	VADDSS X1, X0, X0
	VMULSS X15, X0, X0
	VMOVSS X0, (DX)
	ADDQ $4, DX
	DECQ R9
	JNZ szpos

szdone:
	VZEROUPPER
	RET

// func quantQ8BlocksAVX512(x *float32, q *int8, d *float32, sum *int32, nb int)
//
// quantBlockQ8 over nb blocks of 32 values: amax = max |x| (exact in any order), d = amax/127,
// id = 127/amax (0 when amax is 0), q = x·id rounded to nearest even (VCVTPS2DQ under the
// default MXCSR) and saturated to int8, sum = Σq of the saturated values.
TEXT ·quantQ8BlocksAVX512(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ q+8(FP), DI
	MOVQ d+16(FP), R8
	MOVQ sum+24(FP), R9
	MOVQ nb+32(FP), CX
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Y15
	MOVL $-128, AX
	VPBROADCASTD AX, Y14
	MOVL $127, AX
	VPBROADCASTD AX, Y13
	MOVL $0x42fe0000, AX // 127.0
	VMOVD AX, X12
	VXORPS X11, X11, X11
	TESTQ CX, CX
	JZ qqdone

qqblock:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VANDPS Y15, Y0, Y4
	VANDPS Y15, Y1, Y5
	VANDPS Y15, Y2, Y6
	VANDPS Y15, Y3, Y7
	VMAXPS Y5, Y4, Y4
	VMAXPS Y7, Y6, Y6
	VMAXPS Y6, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS X5, X4, X4
	VMOVHLPS X4, X4, X5
	VMAXPS X5, X4, X4
	VMOVSHDUP X4, X5
	VMAXSS X5, X4, X4
	VDIVSS X12, X4, X8 // d = amax/127
	VMOVSS X8, (R8)
	VXORPS X9, X9, X9
	VUCOMISS X11, X4
	JEQ qqzero
	VDIVSS X4, X12, X9 // id = 127/amax

qqzero:
	VBROADCASTSS X9, Y9
	VMULPS Y9, Y0, Y0
	VMULPS Y9, Y1, Y1
	VMULPS Y9, Y2, Y2
	VMULPS Y9, Y3, Y3
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	VCVTPS2DQ Y3, Y3
	VPMAXSD Y14, Y0, Y0
	VPMAXSD Y14, Y1, Y1
	VPMAXSD Y14, Y2, Y2
	VPMAXSD Y14, Y3, Y3
	VPMINSD Y13, Y0, Y0
	VPMINSD Y13, Y1, Y1
	VPMINSD Y13, Y2, Y2
	VPMINSD Y13, Y3, Y3
	VPMOVSDB Y0, (DI)
	VPMOVSDB Y1, 8(DI)
	VPMOVSDB Y2, 16(DI)
	VPMOVSDB Y3, 24(DI)
	VPADDD Y1, Y0, Y0
	VPADDD Y3, Y2, Y2
	VPADDD Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPADDD X1, X0, X0
	VMOVD X0, (R9)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, R8
	ADDQ $4, R9
	DECQ CX
	JNZ qqblock

qqdone:
	VZEROUPPER
	RET

// func attnMadSeqF16Z64(acc *float32, v *uint16, rows *int32, n int, stride int, ms *float32, vs *float32)
//
// attnMadSeqF16Z for a head of 64 elements (four 512-bit registers): Llama-3.2-1B's size.
TEXT ·attnMadSeqF16Z64(SB), NOSPLIT, $0-56
	MOVQ acc+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ n+24(FP), R9
	MOVQ stride+32(FP), R10
	MOVQ ms+40(FP), R13
	MOVQ vs+48(FP), R14
	TESTQ R9, R9
	JZ m6done
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	XORQ BX, BX

m6pos:
	CMPL (R13)(BX*4), $0x3f800000 // ms = 1.0: no new maximum
	JEQ m6mad
	VBROADCASTSS (R13)(BX*4), Z8
	VMULPS Z8, Z0, Z0
	VMULPS Z8, Z1, Z1
	VMULPS Z8, Z2, Z2
	VMULPS Z8, Z3, Z3
	VCVTPS2PH $0, Z0, Y0
	VCVTPS2PH $0, Z1, Y1
	VCVTPS2PH $0, Z2, Y2
	VCVTPS2PH $0, Z3, Y3
	VCVTPH2PS Y0, Z0
	VCVTPH2PS Y1, Z1
	VCVTPH2PS Y2, Z2
	VCVTPH2PS Y3, Z3

m6mad:
	LEAQ ATTN_AHEAD(BX), DX
	CMPQ DX, R9
	JGE m6fetched
	ATTN_PREFETCH((R8)(DX*4), DX)
m6fetched:
	VBROADCASTSS (R14)(BX*4), Z8
	MOVLQSX (R8)(BX*4), AX
	IMULQ R10, AX
	ADDQ SI, AX
	VCVTPH2PS 0(AX), Z9
	VCVTPH2PS 32(AX), Z10
	VCVTPH2PS 64(AX), Z11
	VCVTPH2PS 96(AX), Z12
	VFMADD231PS Z8, Z9, Z0
	VFMADD231PS Z8, Z10, Z1
	VFMADD231PS Z8, Z11, Z2
	VFMADD231PS Z8, Z12, Z3
	VCVTPS2PH $0, Z0, Y0
	VCVTPS2PH $0, Z1, Y1
	VCVTPS2PH $0, Z2, Y2
	VCVTPS2PH $0, Z3, Y3
	VCVTPH2PS Y0, Z0
	VCVTPH2PS Y1, Z1
	VCVTPH2PS Y2, Z2
	VCVTPH2PS Y3, Z3
	INCQ BX
	CMPQ BX, R9
	JLT m6pos

	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)

m6done:
	VZEROUPPER
	RET

// The decode products below stream a weight matrix once per token, so their speed is the
// memory system's: how many cache lines are in flight at once. Two things raised it by about
// a sixth on the products of a Qwen3-0.6B decode step (BenchmarkDecodeF16Qwen3's, both
// kernels alternated in one process over 12 rounds: f16 68 → 57-59 ms, bf16 70 → 59 ms):
// - base-only addresses: a VEX load-op with an index register (VFMADD231PS (DI)(AX*2)) is
//   un-laminated into two reorder-buffer entries, so the loop holds fewer lines in flight;
//   the pointers are advanced instead;
// - software prefetch DECODE_PF bytes ahead in the row stream (rows are contiguous, so it
//   runs into the next rows): 4 KiB beat 0.5, 1, 2 and 8 KiB; without it the step is slower
//   by a quarter. Into L2 (PREFETCHT1), which took another 7% (55.6 → 51.8 ms): a T0
//   prefetch holds one of L1's few fill buffers until the line arrives, the loads' own
//   misses need them. PREFETCHT2 was as good as T1 at 8 KiB; PREFETCHNTA halved the rate.
#define DECODE_PF 4096

// ROWSUM4 adds accumulators Z0..Z3 in ggml's order ((0+2)+(1+3)), then the 16 lanes in
// _mm512_reduce_add_ps's tree, and stores the sum at (DX).
#define ROWSUM4 \
	VADDPS Z2, Z0, Z0 \
	VADDPS Z3, Z1, Z1 \
	VADDPS Z1, Z0, Z0 \
	VEXTRACTF64X4 $1, Z0, Y1 \
	VADDPS Y1, Y0, Y0 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VMOVHLPS X0, X0, X1 \
	VADDPS X1, X0, X0 \
	VMOVSHDUP X0, X1 \
	VADDSS X1, X0, X0 \
	VMOVSS X0, (DX)

// func matVecF16Z(x *float32, w *uint16, n, cols int, out *float32)
//
// out[r] = Σ w[r,:]·x for n consecutive rows of cols (a multiple of 64) f16 weights, each
// row in attnScoresF16Z's arithmetic (ggml_vec_dot_f16's 16-lane order, four accumulators).
TEXT ·matVecF16Z(SB), NOSPLIT, $0-40
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), R9
	MOVQ cols+24(FP), R11
	MOVQ out+32(FP), DX
	SHRQ $6, R11
	TESTQ R9, R9
	JZ mfdone

mfrow:
	MOVQ x+0(FP), DI
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ R11, CX

mfloop:
	PREFETCHT1 DECODE_PF(SI)
	PREFETCHT1 (DECODE_PF+64)(SI)
	VCVTPH2PS (SI), Z8
	VCVTPH2PS 32(SI), Z9
	VCVTPH2PS 64(SI), Z10
	VCVTPH2PS 96(SI), Z11
	VFMADD231PS (DI), Z8, Z0
	VFMADD231PS 64(DI), Z9, Z1
	VFMADD231PS 128(DI), Z10, Z2
	VFMADD231PS 192(DI), Z11, Z3
	ADDQ $128, SI
	ADDQ $256, DI
	DECQ CX
	JNZ mfloop

	ROWSUM4
	ADDQ $4, DX
	DECQ R9
	JNZ mfrow

mfdone:
	VZEROUPPER
	RET

// func matVecF16Y(x *float32, w *uint16, n, cols int, out *float32)
//
// matVecF16Z for CPUs without AVX-512: n consecutive rows of cols (a multiple of 32) f16
// weights, each row in attnScoresF16AVX2's nacc-4 arithmetic (ggml's AVX2 ggml_vec_dot_f16:
// four 8-lane accumulators, (a0+a2)+(a1+a3), 128-bit halves, two horizontal adds). Against
// attnScoresF16AVX2 (indexed addresses, T0 prefetch 1 KiB ahead) on the Qwen3-0.6B step's
// products, alternated in one process (AVX-512 off): 70-73 → 60-63 ms.
TEXT ·matVecF16Y(SB), NOSPLIT, $0-40
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), R9
	MOVQ cols+24(FP), R11
	MOVQ out+32(FP), DX
	SHRQ $5, R11
	TESTQ R9, R9
	JZ mydone

myrow:
	MOVQ x+0(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ R11, CX

myloop:
	PREFETCHT1 DECODE_PF(SI)
	VCVTPH2PS (SI), Y8
	VCVTPH2PS 16(SI), Y9
	VCVTPH2PS 32(SI), Y10
	VCVTPH2PS 48(SI), Y11
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	VFMADD231PS 64(DI), Y10, Y2
	VFMADD231PS 96(DI), Y11, Y3
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JNZ myloop

	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VMOVSS X0, (DX)
	ADDQ $4, DX
	DECQ R9
	JNZ myrow

mydone:
	VZEROUPPER
	RET

// func dotRowsBF16Z(x *float32, w *uint16, n, cols int, out *float32)
//
// matVecF16Z for bf16 weights (widened by a 16-bit shift): out[r] = Σ w[r,:]·x for n
// consecutive rows of cols (a multiple of 64), in dotBF16Lanes16's order.
TEXT ·dotRowsBF16Z(SB), NOSPLIT, $0-40
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), R9
	MOVQ cols+24(FP), R11
	MOVQ out+32(FP), DX
	SHRQ $6, R11
	TESTQ R9, R9
	JZ bzdone

bzrow:
	MOVQ x+0(FP), DI
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	MOVQ R11, CX

bzloop:
	PREFETCHT1 DECODE_PF(SI)
	PREFETCHT1 (DECODE_PF+64)(SI)
	VPMOVZXWD (SI), Z8
	VPMOVZXWD 32(SI), Z9
	VPMOVZXWD 64(SI), Z10
	VPMOVZXWD 96(SI), Z11
	VPSLLD $16, Z8, Z8
	VPSLLD $16, Z9, Z9
	VPSLLD $16, Z10, Z10
	VPSLLD $16, Z11, Z11
	VFMADD231PS (DI), Z8, Z0
	VFMADD231PS 64(DI), Z9, Z1
	VFMADD231PS 128(DI), Z10, Z2
	VFMADD231PS 192(DI), Z11, Z3
	ADDQ $128, SI
	ADDQ $256, DI
	DECQ CX
	JNZ bzloop

	ROWSUM4
	ADDQ $4, DX
	DECQ R9
	JNZ bzrow

bzdone:
	VZEROUPPER
	RET

// func gemmBcast4x64Z(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, fresh int, scale float32)
//
// C[4×64] = (fresh ? 0 : C) + A[4×k]·B[k×64], then every element times scale, with A
// element (i, kk) at a[i·ars+kk·aks] (any layout: it is broadcast) and B row kk at b[kk·ldb:].
// Each output is one chain of fused multiply-adds over kk in order, what ggml's simd_gemm
// computes for its flash-attention tiles: 16 accumulators, per kk four row loads, four
// broadcasts and sixteen FMAs.
TEXT ·gemmBcast4x64Z(SB), NOSPLIT, $0-76
	MOVQ c+0(FP), DI
	MOVQ ldc+8(FP), DX
	SHLQ $2, DX
	MOVQ a+16(FP), R8
	MOVQ ars+24(FP), AX
	SHLQ $2, AX
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	LEAQ (R10)(AX*1), R11
	MOVQ aks+32(FP), R12
	SHLQ $2, R12
	MOVQ b+40(FP), SI
	MOVQ ldb+48(FP), R13
	SHLQ $2, R13
	MOVQ k+56(FP), CX
	LEAQ (DI)(DX*1), R14
	LEAQ (R14)(DX*1), R15
	LEAQ (R15)(DX*1), BX
	MOVQ fresh+64(FP), AX
	TESTQ AX, AX
	JZ g64load
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
	JMP g64k

g64load:
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	VMOVUPS 0(R14), Z4
	VMOVUPS 64(R14), Z5
	VMOVUPS 128(R14), Z6
	VMOVUPS 192(R14), Z7
	VMOVUPS 0(R15), Z8
	VMOVUPS 64(R15), Z9
	VMOVUPS 128(R15), Z10
	VMOVUPS 192(R15), Z11
	VMOVUPS 0(BX), Z12
	VMOVUPS 64(BX), Z13
	VMOVUPS 128(BX), Z14
	VMOVUPS 192(BX), Z15

g64k:
	TESTQ CX, CX
	JZ g64store

g64loop:
	VMOVUPS 0(SI), Z16
	VMOVUPS 64(SI), Z17
	VMOVUPS 128(SI), Z18
	VMOVUPS 192(SI), Z19
	VBROADCASTSS (R8), Z20
	VBROADCASTSS (R9), Z21
	VBROADCASTSS (R10), Z22
	VBROADCASTSS (R11), Z23
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z20, Z17, Z1
	VFMADD231PS Z20, Z18, Z2
	VFMADD231PS Z20, Z19, Z3
	VFMADD231PS Z21, Z16, Z4
	VFMADD231PS Z21, Z17, Z5
	VFMADD231PS Z21, Z18, Z6
	VFMADD231PS Z21, Z19, Z7
	VFMADD231PS Z22, Z16, Z8
	VFMADD231PS Z22, Z17, Z9
	VFMADD231PS Z22, Z18, Z10
	VFMADD231PS Z22, Z19, Z11
	VFMADD231PS Z23, Z16, Z12
	VFMADD231PS Z23, Z17, Z13
	VFMADD231PS Z23, Z18, Z14
	VFMADD231PS Z23, Z19, Z15
	ADDQ R13, SI
	ADDQ R12, R8
	ADDQ R12, R9
	ADDQ R12, R10
	ADDQ R12, R11
	DECQ CX
	JNZ g64loop

g64store:
	VBROADCASTSS scale+72(FP), Z24
	VMULPS Z24, Z0, Z0
	VMULPS Z24, Z1, Z1
	VMULPS Z24, Z2, Z2
	VMULPS Z24, Z3, Z3
	VMULPS Z24, Z4, Z4
	VMULPS Z24, Z5, Z5
	VMULPS Z24, Z6, Z6
	VMULPS Z24, Z7, Z7
	VMULPS Z24, Z8, Z8
	VMULPS Z24, Z9, Z9
	VMULPS Z24, Z10, Z10
	VMULPS Z24, Z11, Z11
	VMULPS Z24, Z12, Z12
	VMULPS Z24, Z13, Z13
	VMULPS Z24, Z14, Z14
	VMULPS Z24, Z15, Z15
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VMOVUPS Z4, 0(R14)
	VMOVUPS Z5, 64(R14)
	VMOVUPS Z6, 128(R14)
	VMOVUPS Z7, 192(R14)
	VMOVUPS Z8, 0(R15)
	VMOVUPS Z9, 64(R15)
	VMOVUPS Z10, 128(R15)
	VMOVUPS Z11, 192(R15)
	VMOVUPS Z12, 0(BX)
	VMOVUPS Z13, 64(BX)
	VMOVUPS Z14, 128(BX)
	VMOVUPS Z15, 192(BX)
	VZEROUPPER
	RET

// func gemmBcast4x16Z(c *float32, ldc int, a *float32, ars, aks int, b *float32, ldb, k, fresh int, scale float32)
//
// gemmBcast4x64Z for 16 columns: the tail of a width that is a multiple of 16 but not of 64.
TEXT ·gemmBcast4x16Z(SB), NOSPLIT, $0-76
	MOVQ c+0(FP), DI
	MOVQ ldc+8(FP), DX
	SHLQ $2, DX
	MOVQ a+16(FP), R8
	MOVQ ars+24(FP), AX
	SHLQ $2, AX
	LEAQ (R8)(AX*1), R9
	LEAQ (R9)(AX*1), R10
	LEAQ (R10)(AX*1), R11
	MOVQ aks+32(FP), R12
	SHLQ $2, R12
	MOVQ b+40(FP), SI
	MOVQ ldb+48(FP), R13
	SHLQ $2, R13
	MOVQ k+56(FP), CX
	LEAQ (DI)(DX*1), R14
	LEAQ (R14)(DX*1), R15
	LEAQ (R15)(DX*1), BX
	MOVQ fresh+64(FP), AX
	TESTQ AX, AX
	JZ g16load
	VPXORD Z0, Z0, Z0
	VPXORD Z4, Z4, Z4
	VPXORD Z8, Z8, Z8
	VPXORD Z12, Z12, Z12
	JMP g16k

g16load:
	VMOVUPS 0(DI), Z0
	VMOVUPS 0(R14), Z4
	VMOVUPS 0(R15), Z8
	VMOVUPS 0(BX), Z12

g16k:
	TESTQ CX, CX
	JZ g16store

g16loop:
	VMOVUPS 0(SI), Z16
	VBROADCASTSS (R8), Z20
	VBROADCASTSS (R9), Z21
	VBROADCASTSS (R10), Z22
	VBROADCASTSS (R11), Z23
	VFMADD231PS Z20, Z16, Z0
	VFMADD231PS Z21, Z16, Z4
	VFMADD231PS Z22, Z16, Z8
	VFMADD231PS Z23, Z16, Z12
	ADDQ R13, SI
	ADDQ R12, R8
	ADDQ R12, R9
	ADDQ R12, R10
	ADDQ R12, R11
	DECQ CX
	JNZ g16loop

g16store:
	VBROADCASTSS scale+72(FP), Z24
	VMULPS Z24, Z0, Z0
	VMULPS Z24, Z4, Z4
	VMULPS Z24, Z8, Z8
	VMULPS Z24, Z12, Z12
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z4, 0(R14)
	VMOVUPS Z8, 0(R15)
	VMOVUPS Z12, 0(BX)
	VZEROUPPER
	RET

// func colMax64Z(kq *float32, out *[64]float32)
//
// out[i] = the largest of kq[j·64+i] over the 64 rows j (vmaxps: exact, order-free on
// numbers), the per-query tile maximum of the tiled flash attention.
TEXT ·colMax64Z(SB), NOSPLIT, $0-16
	MOVQ kq+0(FP), SI
	MOVQ out+8(FP), DI
	MOVL $0xff800000, AX
	VPBROADCASTD AX, Z0
	VMOVAPS Z0, Z1
	VMOVAPS Z0, Z2
	VMOVAPS Z0, Z3
	MOVQ $64, CX

cmloop:
	VMAXPS 0(SI), Z0, Z0
	VMAXPS 64(SI), Z1, Z1
	VMAXPS 128(SI), Z2, Z2
	VMAXPS 192(SI), Z3, Z3
	ADDQ $256, SI
	DECQ CX
	JNZ cmloop
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VZEROUPPER
	RET

// VEXPF sets e = ggml_v_expf(x) (its AVX-512 build) for x in a register it overwrites,
// with the constants below in Z16–Z29 and temporaries z, n, u, t.
#define VEXPF(x, e, z, n, u, t) \
	VMOVAPS Z16, z; \
	VFMADD231PS Z17, x, z; \
	VSUBPS Z16, z, n; \
	VMOVAPS x, e; \
	VFNMADD231PS Z18, n, e; \
	VFNMADD231PS Z19, n, e; \
	VMULPS e, e, u; \
	VMOVAPS Z21, t; \
	VFMADD231PS Z20, e, t; \
	VMOVAPS Z23, z; \
	VFMADD231PS Z22, e, z; \
	VFMADD213PS z, u, t; \
	VMOVAPS Z25, x; \
	VFMADD231PS Z24, e, x; \
	VFMADD213PS x, u, t; \
	VSCALEFPS n, t, e; \
	VANDPS Z26, n, u; \
	VCMPPS $0x1e, Z27, u, K1; \
	VCMPPS $0x1e, Z29, n, K2; \
	VMOVAPS.Z Z28, K2, u; \
	VMOVAPS u, K1, e

// func softmaxTile64Z(kq *float32, m *[64]float32, sums *[64]float64)
//
// The tile's softmax weights and sums, 16 queries per register: every kq[j·64+i] becomes
// ggml_v_expf(kq[j·64+i] − m[i]), and sums[i] is Σ of column i as ggml_vec_soft_max_f32
// forms it: groups of 16 rows, each reduced by _mm512_reduce_add_ps's tree (row l with
// row l+8, then +4, then pairs), the group sums added in float64.
TEXT ·softmaxTile64Z(SB), NOSPLIT, $0-24
	MOVQ kq+0(FP), SI
	MOVQ m+8(FP), R8
	MOVQ sums+16(FP), DI
	MOVL $0x4b400000, AX
	VPBROADCASTD AX, Z16
	MOVL $0x3fb8aa3b, AX
	VPBROADCASTD AX, Z17
	MOVL $0x3f317200, AX
	VPBROADCASTD AX, Z18
	MOVL $0x35bfbe8e, AX
	VPBROADCASTD AX, Z19
	MOVL $0x3c072010, AX
	VPBROADCASTD AX, Z20
	MOVL $0x3d2b9f17, AX
	VPBROADCASTD AX, Z21
	MOVL $0x3e2aaf33, AX
	VPBROADCASTD AX, Z22
	MOVL $0x3efffedb, AX
	VPBROADCASTD AX, Z23
	MOVL $0x3f7ffff6, AX
	VPBROADCASTD AX, Z24
	MOVL $0x3f800000, AX
	VPBROADCASTD AX, Z25
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z26
	MOVL $0x43400000, AX
	VPBROADCASTD AX, Z27
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z28
	VPXORD Z29, Z29, Z29
	MOVQ $4, R9 // query blocks of 16

smqb:
	VMOVUPS (R8), Z30
	VPXORD Z31, Z31, Z31 // Σ, queries 0-7 of the block, float64
	VPXORD Z15, Z15, Z15 // queries 8-15
	MOVQ SI, R10
	MOVQ $4, R11 // groups of 16 rows

smgroup:
	MOVQ $0, R12
	MOVQ R10, R13

smpair:
	// rows l and l+8 of the group: their weights, stored, and their sum (t3[l])
	VMOVUPS 0(R13), Z8
	VSUBPS Z30, Z8, Z8
	VEXPF(Z8, Z9, Z10, Z11, Z12, Z13)
	VMOVUPS Z9, 0(R13)
	VMOVUPS 2048(R13), Z8
	VSUBPS Z30, Z8, Z8
	VEXPF(Z8, Z14, Z10, Z11, Z12, Z13)
	VMOVUPS Z14, 2048(R13)
	VADDPS Z9, Z14, Z14
	// keep t3[l] in Z0+l: a jump table would be longer than this rotation
	VMOVAPS Z1, Z0
	VMOVAPS Z2, Z1
	VMOVAPS Z3, Z2
	VMOVAPS Z4, Z3
	VMOVAPS Z5, Z4
	VMOVAPS Z6, Z5
	VMOVAPS Z7, Z6
	VMOVAPS Z14, Z7
	ADDQ $256, R13
	INCQ R12
	CMPQ R12, $8
	JLT smpair
	// Z0..Z7 = t3[0..7]
	VADDPS Z0, Z4, Z0 // t6[0] = t3[4] + t3[0]
	VADDPS Z1, Z5, Z1
	VADDPS Z2, Z6, Z2
	VADDPS Z3, Z7, Z3
	VADDPS Z0, Z2, Z0 // t6[0] + t6[2]
	VADDPS Z1, Z3, Z1 // t6[1] + t6[3]
	VADDPS Z0, Z1, Z0
	VCVTPS2PD Y0, Z1
	VEXTRACTF32X8 $1, Z0, Y2
	VCVTPS2PD Y2, Z2
	VADDPD Z1, Z31, Z31
	VADDPD Z2, Z15, Z15
	ADDQ $4096, R10 // 16 rows
	DECQ R11
	JNZ smgroup
	VMOVUPD Z31, 0(DI)
	VMOVUPD Z15, 64(DI)
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $128, DI
	DECQ R9
	JNZ smqb
	VZEROUPPER
	RET

// func sumWordsZ(w *uint64, blocks int) uint64
//
// The 64-bit sum of blocks×32 words: the machine's read bandwidth probe (SumWords). It
// reads the way the decode products do (base-only addresses, DECODE_PF ahead) with one
// load-add per 64 bytes, so the loads, not the loop, are the limit. Integer adds make the
// order irrelevant.
TEXT ·sumWordsZ(SB), NOSPLIT, $0-24
	MOVQ w+0(FP), SI
	MOVQ blocks+8(FP), CX
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	TESTQ CX, CX
	JZ swzsum

swz:
	PREFETCHT1 DECODE_PF(SI)
	PREFETCHT1 (DECODE_PF+64)(SI)
	PREFETCHT1 (DECODE_PF+128)(SI)
	PREFETCHT1 (DECODE_PF+192)(SI)
	VPADDQ (SI), Z0, Z0
	VPADDQ 64(SI), Z1, Z1
	VPADDQ 128(SI), Z2, Z2
	VPADDQ 192(SI), Z3, Z3
	ADDQ $256, SI
	DECQ CX
	JNZ swz

swzsum:
	VPADDQ Z1, Z0, Z0
	VPADDQ Z3, Z2, Z2
	VPADDQ Z2, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y1
	VPADDQ Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDQ X1, X0, X0
	VMOVQ X0, AX
	MOVQ AX, ret+16(FP)
	VZEROUPPER
	RET

// func sumWordsY(w *uint64, blocks int) uint64
//
// sumWordsZ for AVX2: one load-add per 32 bytes.
TEXT ·sumWordsY(SB), NOSPLIT, $0-24
	MOVQ w+0(FP), SI
	MOVQ blocks+8(FP), CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	TESTQ CX, CX
	JZ swysum

swy:
	PREFETCHT1 DECODE_PF(SI)
	PREFETCHT1 (DECODE_PF+64)(SI)
	PREFETCHT1 (DECODE_PF+128)(SI)
	PREFETCHT1 (DECODE_PF+192)(SI)
	VPADDQ (SI), Y0, Y0
	VPADDQ 32(SI), Y1, Y1
	VPADDQ 64(SI), Y2, Y2
	VPADDQ 96(SI), Y3, Y3
	VPADDQ 128(SI), Y0, Y0
	VPADDQ 160(SI), Y1, Y1
	VPADDQ 192(SI), Y2, Y2
	VPADDQ 224(SI), Y3, Y3
	ADDQ $256, SI
	DECQ CX
	JNZ swy

swysum:
	VPADDQ Y1, Y0, Y0
	VPADDQ Y3, Y2, Y2
	VPADDQ Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPADDQ X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPADDQ X1, X0, X0
	VMOVQ X0, AX
	MOVQ AX, ret+16(FP)
	VZEROUPPER
	RET

// Q8BLOCK is one Q8_0 block of the weight row at SI (34 bytes: f16 scale, 32 int8) times
// the activation block at DI (32 int8; d8 at R8: its scale in eight lanes), in the lane
// arithmetic of ggml's AVX2 vec_dot_q8_0_q8_0: DOT4 makes the eight int32 lanes of
// |w|·sign(x,w), each the sum of four byte products — VPMADDUBSW then VPMADDWD against ones
// (Y15; |w|·|x| ≤ 127·127, so the int16 pairs never saturate), or one VPDPBUSD on VNNI CPUs,
// the same exact integers — converted to float and fused-multiply-added with d_w·d_x into
// Y0. The weight scale is widened by F16C (VCVTPH2PS) rather than in integer arithmetic.
#define Q8BLOCK(DOT4) \
	PREFETCHT1 DECODE_PF(SI) \
	VMOVDQU 2(SI), Y1 \
	VMOVDQU (DI), Y2 \
	VPABSB Y1, Y3 \
	VPSIGNB Y1, Y2, Y2 \
	DOT4 \
	VPBROADCASTW (SI), X4 \
	VCVTPH2PS X4, Y4 \
	VMULPS (R8), Y4, Y4 \
	VFMADD231PS Y4, Y3, Y0 \
	ADDQ $34, SI \
	ADDQ $32, DI \
	ADDQ $32, R8

#define DOT4MADD \
	VPMADDUBSW Y2, Y3, Y3 \
	VPMADDWD Y15, Y3, Y3 \
	VCVTDQ2PS Y3, Y3

#define DOT4VNNI \
	VPXOR Y5, Y5, Y5 \
	VPDPBUSD Y2, Y3, Y5 \
	VCVTDQ2PS Y5, Y3

// HSUM8 adds Y0's lanes in hsum8's order and stores the sum at (DX).
#define HSUM8 \
	VEXTRACTF128 $1, Y0, X1 \
	VADDPS X1, X0, X0 \
	VMOVHLPS X0, X0, X1 \
	VADDPS X1, X0, X0 \
	VMOVSHDUP X0, X1 \
	VADDSS X1, X0, X0 \
	VMOVSS X0, (DX)

// func matVecQ8_0AVX2(w *byte, n, nb int, d8 *float32, q *int8, out *float32, vnni bool)
//
// n consecutive Q8_0 weight rows of nb blocks times one Q8_0 activation row: out[r] is
// row r's Q8BLOCK lanes, added in hsum8's order (ggml's hsum_float_8). The decode product
// calls it once for all its rows (as matVecF16Z), with the prefetch into L2 DECODE_PF
// ahead: the step's Q8_0 products went from 40-42 to 31-34 ms against a one-row kernel
// called row by row from Go (Qwen3-0.6B shapes, alternated in one process); VPDPBUSD was
// within noise of the two-instruction dot. asmDotQ8_0 is this with n = 1.
TEXT ·matVecQ8_0AVX2(SB), NOSPLIT, $0-49
	MOVQ w+0(FP), SI
	MOVQ n+8(FP), R9
	MOVQ out+40(FP), DX
	MOVBLZX vnni+48(FP), R12
	VPCMPEQW Y15, Y15, Y15
	VPSRLW $15, Y15, Y15
	TESTQ R9, R9
	JZ mqdone

mqrow:
	MOVQ nb+16(FP), CX
	MOVQ d8+24(FP), R8
	MOVQ q+32(FP), DI
	VXORPS Y0, Y0, Y0
	TESTQ CX, CX
	JZ mqsum
	TESTQ R12, R12
	JNZ mqvnni

mqmadd:
	Q8BLOCK(DOT4MADD)
	DECQ CX
	JNZ mqmadd
	JMP mqsum

mqvnni:
	Q8BLOCK(DOT4VNNI)
	DECQ CX
	JNZ mqvnni

mqsum:
	HSUM8
	ADDQ $4, DX
	DECQ R9
	JNZ mqrow

mqdone:
	VZEROUPPER
	RET

// The decode products of the batch-invariant mode (matVecTiled): each row in the
// arithmetic of the float32 prefill tile (tile4x4F32Z, dotLanes16: one 16-lane accumulator
// of fused multiply-adds over the columns in order, then _mm512_reduce_add_ps's tree), so a
// row has the same bits alone as in a batch. One accumulator is one chain of dependent
// FMAs; four rows side by side keep four chains in flight, far above the memory's rate.
// Four rows are four streams a row apart, so prefetching each 4 KiB ahead, as the other
// decode products do, would mostly fetch lines the next row's stream is loading already:
// instead the loop prefetches the next four rows (contiguous) into L2 from their start, as
// many lines per iteration as it consumes, so they have arrived when their group begins.

// Weight loads: 16 weights at off(p) widened to float32 in z.
#define WLD_F16(off, p, z) VCVTPH2PS off(p), z
#define WLD_BF16(off, p, z) VPMOVZXWD off(p), z; VPSLLD $16, z, z
#define WLD_F32(off, p, z) VMOVUPS off(p), z

// TILE_BLOCK multiplies the 16 columns at row offset off (x at xoff(DI)) of the four rows
// at SI, R12, R13, R14 into Z0..Z3.
#define TILE_BLOCK(WLD, off, xoff) \
	VMOVUPS xoff(DI), Z4 \
	WLD(off, SI, Z8) \
	WLD(off, R12, Z9) \
	WLD(off, R13, Z10) \
	WLD(off, R14, Z11) \
	VFMADD231PS Z4, Z8, Z0 \
	VFMADD231PS Z4, Z9, Z1 \
	VFMADD231PS Z4, Z10, Z2 \
	VFMADD231PS Z4, Z11, Z3

// SUM16 leaves in the low lane of x the 16 lanes of z (its low halves y, x) added in
// reduceAdd16's order, with t, u scratch (a Y and an X register of one Z).
#define SUM16(z, y, x, t, u) \
	VEXTRACTF64X4 $1, z, t \
	VADDPS t, y, y \
	VEXTRACTF128 $1, y, u \
	VADDPS u, x, x \
	VMOVHLPS x, x, u \
	VADDPS u, x, x \
	VMOVSHDUP x, u \
	VADDSS u, x, x

// PF_LINES4 prefetches four lines of the next rows at R15 and advances it (f16 and bf16
// rows: an iteration consumes 4 rows × 64 bytes); PF_LINES8 eight (float32 rows).
#define PF_LINES4 \
	PREFETCHT1 (R15) \
	PREFETCHT1 64(R15) \
	PREFETCHT1 128(R15) \
	PREFETCHT1 192(R15) \
	ADDQ $256, R15

#define PF_LINES8 \
	PF_LINES4 \
	PF_LINES4

// MATVEC_TILE is the body of the three kernels, their arguments in registers (BX x, SI w,
// R9 n, R11 cols, R8 the row bytes, DX out); BLK is the bytes of one 16-column block of a
// row, PFETCH the prefetch of an iteration (labels are per function, so each kernel has
// its own).
#define MATVEC_TILE(WLD, BLK, PFETCH) \
	SHRQ $4, R11 \
	SHRQ $2, R9 \
	JZ done \
group: \
	MOVQ BX, DI \
	LEAQ (SI)(R8*1), R12 \
	LEAQ (R12)(R8*1), R13 \
	LEAQ (R13)(R8*1), R14 \
	LEAQ (R14)(R8*1), R15 \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	MOVQ R11, CX \
	TESTQ $1, CX \
	JZ pairs \
	TILE_BLOCK(WLD, 0, 0) \
	ADDQ $BLK, SI \
	ADDQ $BLK, R12 \
	ADDQ $BLK, R13 \
	ADDQ $BLK, R14 \
	ADDQ $64, DI \
pairs: \
	SHRQ $1, CX \
	JZ sum \
loop: \
	PFETCH \
	TILE_BLOCK(WLD, 0, 0) \
	TILE_BLOCK(WLD, BLK, 64) \
	ADDQ $(2*BLK), SI \
	ADDQ $(2*BLK), R12 \
	ADDQ $(2*BLK), R13 \
	ADDQ $(2*BLK), R14 \
	ADDQ $128, DI \
	DECQ CX \
	JNZ loop \
sum: \
	SUM16(Z0, Y0, X0, Y6, X6) \
	SUM16(Z1, Y1, X1, Y6, X6) \
	SUM16(Z2, Y2, X2, Y6, X6) \
	SUM16(Z3, Y3, X3, Y6, X6) \
	VMOVSS X0, (DX) \
	VMOVSS X1, 4(DX) \
	VMOVSS X2, 8(DX) \
	VMOVSS X3, 12(DX) \
	ADDQ $16, DX \
	MOVQ R14, SI \
	DECQ R9 \
	JNZ group \
done: \
	VZEROUPPER \
	RET

// func matVecTileF16Z(x *float32, w *uint16, n, cols int, out *float32)
//
// out[r] = Σ w[r,:]·x for n (a multiple of 4) consecutive rows of cols (a multiple of 16)
// f16 weights, each row in dotLanes16's arithmetic on the widened weights.
TEXT ·matVecTileF16Z(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), BX
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), R9
	MOVQ cols+24(FP), R11
	MOVQ out+32(FP), DX
	MOVQ R11, R8
	SHLQ $1, R8
	MATVEC_TILE(WLD_F16, 32, PF_LINES4)

// func matVecTileBF16Z(x *float32, w *uint16, n, cols int, out *float32)
//
// matVecTileF16Z for bf16 weights.
TEXT ·matVecTileBF16Z(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), BX
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), R9
	MOVQ cols+24(FP), R11
	MOVQ out+32(FP), DX
	MOVQ R11, R8
	SHLQ $1, R8
	MATVEC_TILE(WLD_BF16, 32, PF_LINES4)

// func matVecTileF32Z(x *float32, w *float32, n, cols int, out *float32)
//
// matVecTileF16Z for float32 weights.
TEXT ·matVecTileF32Z(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), BX
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), R9
	MOVQ cols+24(FP), R11
	MOVQ out+32(FP), DX
	MOVQ R11, R8
	SHLQ $2, R8
	MATVEC_TILE(WLD_F32, 64, PF_LINES8)

// func q8ScalesF16(raw *float32, sums *int32, d, s, d8, s8 *float32, groups int, withSum int)
//
// qact.quantize's scales for groups×8 blocks, eight at a time: d = raw rounded to f16 (and
// back), s = (raw·float(sum)) rounded to f16 where withSum ≠ 0, and each block's d (and s)
// repeated eight times into d8 (s8). VCVTPS2PH rounds to nearest even, as tensor.F32ToF16
// does, so the values are f16Round's.
TEXT ·q8ScalesF16(SB), NOSPLIT, $0-64
	MOVQ raw+0(FP), SI
	MOVQ sums+8(FP), BX
	MOVQ d+16(FP), DI
	MOVQ s+24(FP), R8
	MOVQ d8+32(FP), R9
	MOVQ s8+40(FP), R10
	MOVQ groups+48(FP), CX
	MOVQ withSum+56(FP), DX
	TESTQ CX, CX
	JZ q8sdone

q8sloop:
	VMOVUPS (SI), Y0
	VCVTPS2PH $0, Y0, X1
	VCVTPH2PS X1, Y1
	VMOVUPS Y1, (DI)
	VBROADCASTSS 0(DI), Y2
	VMOVUPS Y2, 0(R9)
	VBROADCASTSS 4(DI), Y2
	VMOVUPS Y2, 32(R9)
	VBROADCASTSS 8(DI), Y2
	VMOVUPS Y2, 64(R9)
	VBROADCASTSS 12(DI), Y2
	VMOVUPS Y2, 96(R9)
	VBROADCASTSS 16(DI), Y2
	VMOVUPS Y2, 128(R9)
	VBROADCASTSS 20(DI), Y2
	VMOVUPS Y2, 160(R9)
	VBROADCASTSS 24(DI), Y2
	VMOVUPS Y2, 192(R9)
	VBROADCASTSS 28(DI), Y2
	VMOVUPS Y2, 224(R9)
	TESTQ DX, DX
	JZ q8snext
	VCVTDQ2PS (BX), Y3
	VMULPS Y3, Y0, Y3
	VCVTPS2PH $0, Y3, X4
	VCVTPH2PS X4, Y4
	VMOVUPS Y4, (R8)
	VBROADCASTSS 0(R8), Y2
	VMOVUPS Y2, 0(R10)
	VBROADCASTSS 4(R8), Y2
	VMOVUPS Y2, 32(R10)
	VBROADCASTSS 8(R8), Y2
	VMOVUPS Y2, 64(R10)
	VBROADCASTSS 12(R8), Y2
	VMOVUPS Y2, 96(R10)
	VBROADCASTSS 16(R8), Y2
	VMOVUPS Y2, 128(R10)
	VBROADCASTSS 20(R8), Y2
	VMOVUPS Y2, 160(R10)
	VBROADCASTSS 24(R8), Y2
	VMOVUPS Y2, 192(R10)
	VBROADCASTSS 28(R8), Y2
	VMOVUPS Y2, 224(R10)

q8snext:
	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $256, R9
	ADDQ $256, R10
	DECQ CX
	JNZ q8sloop

q8sdone:
	VZEROUPPER
	RET

// func ropeInterleavedAVX2(x, cos, sin *float32, quads int)
//
// RopeInterleaved on quads×4 pairs (x0, x1) = (x[2i], x[2i+1]), four pairs a register, with
// rotate's operations lane for lane: the even lanes x0·c − (x1·s) and the odd ones
// x0·s + (x1·c), each cross product rounded and then one fused multiply-add (VFMSUB for the
// even lanes: a·b − c is the fused add of the exactly negated product). The pair-swapped
// vector gives each lane its partner; cos and sin are widened to one value per lane.
TEXT ·ropeInterleavedAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), DI
	MOVQ cos+8(FP), SI
	MOVQ sin+16(FP), DX
	MOVQ quads+24(FP), CX
	TESTQ CX, CX
	JZ ropedone

ropeloop:
	VMOVUPS (DI), Y0          // v: x0 x1 | pairs
	VPERMILPS $0xb1, Y0, Y1   // sw: each pair swapped
	VPMOVZXDQ (SI), Y2        // c0 0 c1 0 c2 0 c3 0
	VMOVSLDUP Y2, Y2          // C: c0 c0 c1 c1 c2 c2 c3 c3
	VPMOVZXDQ (DX), Y3
	VMOVSLDUP Y3, Y3          // S
	VMULPS Y3, Y1, Y4         // t1 = sw·S (even lanes: x1·s)
	VMULPS Y2, Y0, Y5         // t2 = v·C (odd lanes: x1·c)
	VMOVAPS Y0, Y6
	VFMSUB213PS Y4, Y2, Y6    // E = v·C − t1
	VFMADD213PS Y5, Y3, Y1    // O = sw·S + t2
	VBLENDPS $0xaa, Y1, Y6, Y6 // even lanes from E, odd from O
	VMOVUPS Y6, (DI)
	ADDQ $32, DI
	ADDQ $16, SI
	ADDQ $16, DX
	DECQ CX
	JNZ ropeloop

ropedone:
	VZEROUPPER
	RET

// func argmaxAVX2(x *float32, n int) (idx int, nan bool)
//
// The first index of x's largest value over n floats (n a positive multiple of 32), or
// nan: some value is NaN. Two passes: the maximum (and an unordered compare for NaN) 32
// values at a time, then the first position equal to it, eight at a time.
TEXT ·argmaxAVX2(SB), NOSPLIT, $0-25
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VCMPPS $3, Y0, Y0, Y4
	VCMPPS $3, Y1, Y1, Y5
	VCMPPS $3, Y2, Y2, Y6
	VCMPPS $3, Y3, Y3, Y7
	MOVQ $32, AX

amloop:
	CMPQ AX, CX
	JGE amreduce
	VMOVUPS 0(SI)(AX*4), Y8
	VMOVUPS 32(SI)(AX*4), Y9
	VMOVUPS 64(SI)(AX*4), Y10
	VMOVUPS 96(SI)(AX*4), Y11
	VMAXPS Y8, Y0, Y0
	VMAXPS Y9, Y1, Y1
	VMAXPS Y10, Y2, Y2
	VMAXPS Y11, Y3, Y3
	VCMPPS $3, Y8, Y8, Y8
	VCMPPS $3, Y9, Y9, Y9
	VCMPPS $3, Y10, Y10, Y10
	VCMPPS $3, Y11, Y11, Y11
	VORPS Y8, Y4, Y4
	VORPS Y9, Y5, Y5
	VORPS Y10, Y6, Y6
	VORPS Y11, Y7, Y7
	ADDQ $32, AX
	JMP amloop

amreduce:
	VORPS Y5, Y4, Y4
	VORPS Y7, Y6, Y6
	VORPS Y6, Y4, Y4
	VMOVMSKPS Y4, AX
	TESTL AX, AX
	JNZ amnan
	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	VPERM2F128 $0x01, Y0, Y0, Y1
	VMAXPS Y1, Y0, Y0
	VPERMILPS $0x4e, Y0, Y1
	VMAXPS Y1, Y0, Y0
	VPERMILPS $0xb1, Y0, Y1
	VMAXPS Y1, Y0, Y0 // the maximum in every lane
	XORQ AX, AX

amfind:
	VCMPPS $0, (SI)(AX*4), Y0, Y8
	VMOVMSKPS Y8, DX
	TESTL DX, DX
	JNZ amfound
	ADDQ $8, AX
	CMPQ AX, CX
	JLT amfind
	MOVQ $-1, AX // not reached: the maximum is one of the values
	JMP amret

amfound:
	BSFL DX, DX
	ADDQ DX, AX

amret:
	MOVQ AX, idx+16(FP)
	MOVB $0, nan+24(FP)
	VZEROUPPER
	RET

amnan:
	MOVQ $-1, idx+16(FP)
	MOVB $1, nan+24(FP)
	VZEROUPPER
	RET

// func addAVX2(y, x *float32, n int)
//
// y[i] += x[i] for n values (a multiple of 32), 32 at a time.
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	JZ adddone

addloop:
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VADDPS 0(SI), Y0, Y0
	VADDPS 32(SI), Y1, Y1
	VADDPS 64(SI), Y2, Y2
	VADDPS 96(SI), Y3, Y3
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, SI
	DECQ CX
	JNZ addloop

adddone:
	VZEROUPPER
	RET

// func sumSquares4(x *float32, d int, sums *[4]float64)
//
// RMSNormGGML's sum of squares for four rows of d values (rows d floats apart): each
// square rounded to float32, widened, and added to its row's float64 sum in order, four
// rows' chains interleaved (one row's chain waits on each add's latency).
TEXT ·sumSquares4(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ d+8(FP), CX
	MOVQ CX, DX
	SHLQ $2, DX // a row's bytes
	LEAQ (SI)(DX*1), R8
	LEAQ (R8)(DX*1), R9
	LEAQ (R9)(DX*1), R10
	XORPD X4, X4
	XORPD X5, X5
	XORPD X6, X6
	XORPD X7, X7
	XORQ AX, AX
	TESTQ CX, CX
	JZ sqdone

sqloop:
	MOVSS (SI)(AX*4), X0
	MOVSS (R8)(AX*4), X1
	MOVSS (R9)(AX*4), X2
	MOVSS (R10)(AX*4), X3
	MULSS X0, X0
	MULSS X1, X1
	MULSS X2, X2
	MULSS X3, X3
	CVTSS2SD X0, X0
	CVTSS2SD X1, X1
	CVTSS2SD X2, X2
	CVTSS2SD X3, X3
	ADDSD X0, X4
	ADDSD X1, X5
	ADDSD X2, X6
	ADDSD X3, X7
	INCQ AX
	CMPQ AX, CX
	JLT sqloop

sqdone:
	MOVQ sums+16(FP), DI
	MOVSD X4, 0(DI)
	MOVSD X5, 8(DI)
	MOVSD X6, 16(DI)
	MOVSD X7, 24(DI)
	RET

// func scaleMulAVX2(out, x, w *float32, scale float32, n int)
//
// out[i] = (x[i]·scale)·w[i] for n values (a multiple of 16), 16 at a time.
TEXT ·scaleMulAVX2(SB), NOSPLIT, $0-40
	MOVQ out+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	VBROADCASTSS scale+24(FP), Y2
	MOVQ n+32(FP), CX
	SHRQ $4, CX
	JZ smdone

smloop:
	VMULPS 0(SI), Y2, Y0
	VMULPS 32(SI), Y2, Y1
	VMULPS 0(DX), Y0, Y0
	VMULPS 32(DX), Y1, Y1
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $64, DI
	ADDQ $64, SI
	ADDQ $64, DX
	DECQ CX
	JNZ smloop

smdone:
	VZEROUPPER
	RET
