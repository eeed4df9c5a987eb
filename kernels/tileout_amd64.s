//go:build amd64

#include "textflag.h"
#include "tileout_amd64.h"

// func tileOutZMM(acc, out *float32, tokenStride, blocks int)
//
// The 512-bit Q4_K tile's output (q4KTileRows): blocks × 16 rows of sixteen tokens, each
// block TILE_OUT16's (acc − accM, transposed), block b's rows from acc + 2048·b bytes, its
// lines at out + 64·b; tokenStride is the bytes from one token's row of out to the next's.
TEXT ·tileOutZMM(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), BX
	MOVQ out+8(FP), DX
	MOVQ tokenStride+16(FP), SI
	MOVQ blocks+24(FP), CX
	LEAQ (SI)(SI*2), R9
	SHLQ $2, R9 // 12 token strides
block:
	MOVQ DX, AX
	TILE_OUT16
	ADDQ $2048, BX
	ADDQ $64, DX
	DECQ CX
	JNZ block
	VZEROUPPER
	RET
