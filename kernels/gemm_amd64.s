#include "textflag.h"

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
