//go:build ignore

// attn_f16pair_gen.go writes attn_f16pair_amd64.s: decode attention over the f16 cache for
// two query heads that share a KV head. Each head keeps the one-head kernels' registers'
// worth of accumulators (gemm_amd64.s: attnScoresF16Z, attnMadSeqF16Z, attnMadSeqF16Z64),
// so the two heads' straight-line sequences are written from one template here rather than
// by hand twice. Run `go generate ./kernels` after editing it; the output is committed.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

var b bytes.Buffer

func p(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

// reduce sums the four score accumulators Z(r)..Z(r+3) as attnScoresF16Z does, scales the
// sum and stores it at dst.
func reduce(r int, dst string) {
	p("\tVADDPS Z%d, Z%d, Z%d\n", r+2, r, r)
	p("\tVADDPS Z%d, Z%d, Z%d\n", r+3, r+1, r+1)
	p("\tVADDPS Z%d, Z%d, Z%d\n", r+1, r, r)
	p("\tVEXTRACTF64X4 $1, Z%d, Y%d\n", r, r+1)
	p("\tVADDPS Y%d, Y%d, Y%d\n", r+1, r, r)
	p("\tVEXTRACTF128 $1, Y%d, X%d\n", r, r+1)
	p("\tVADDPS X%d, X%d, X%d\n", r+1, r, r)
	p("\tVMOVHLPS X%d, X%d, X%d\n", r, r, r+1)
	p("\tVADDPS X%d, X%d, X%d\n", r+1, r, r)
	p("\tVMOVSHDUP X%d, X%d\n", r, r+1)
	p("\tVADDSS X%d, X%d, X%d\n", r+1, r, r)
	p("\tVMULSS X15, X%d, X%d\n", r, r)
	p("\tVMOVSS X%d, %s\n", r, dst)
}

// roundF16 rounds registers regs to f16 values (ggml's accumulator after every position).
func roundF16(regs []int) {
	for _, r := range regs {
		p("\tVCVTPS2PH $0, Z%d, Y%d\n", r, r)
	}
	for _, r := range regs {
		p("\tVCVTPH2PS Y%d, Z%d\n", r, r)
	}
}

func scores() {
	p(`// func attnScoresF16Z2(q *float32, k *uint16, rows *int32, n, stride, hd int, scale float32, out *float32)
//
// out[j] and out[n+j] are the scores of the queries at q and q+hd against key rows[j]
// (attnScoresF16Z's 16-lane order for each); hd is a multiple of 64, n ≥ 1.
TEXT ·attnScoresF16Z2(SB), NOSPLIT, $0-64
	MOVQ q+0(FP), DI
	MOVQ k+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ n+24(FP), R9
	MOVQ stride+32(FP), R10
	MOVQ hd+40(FP), R11
	VBROADCASTSS scale+48(FP), X15
	MOVQ out+56(FP), DX
	LEAQ (DI)(R11*4), R13 // the second query
	MOVQ R9, R14
	SHLQ $2, R14 // from a score of the first query to the second's
	SHRQ $6, R11

s2pos:
	MOVLQSX (R8), AX
	IMULQ R10, AX
	LEAQ (SI)(AX*1), R12
	CMPQ R9, $ATTN_AHEAD+1
	JLT s2fetched
	ATTN_PREFETCH(ATTN_AHEAD*4(R8), AX)
	CMPQ R11, $2
	JLT s2fetched
	PREFETCHT0 128(SI)(AX*1)
	PREFETCHT0 192(SI)(AX*1)
s2fetched:
	ADDQ $4, R8
`)
	for i := range 8 {
		p("\tVPXORD Z%d, Z%d, Z%d\n", i, i, i)
	}
	p("\tXORQ AX, AX\n\tMOVQ R11, CX\n\ns2loop:\n")
	for i := range 4 {
		p("\tVCVTPH2PS %s(R12)(AX*1), Z%d\n", off(32*i), 8+i)
	}
	for h, q := range []string{"DI", "R13"} {
		for i := range 4 {
			p("\tVFMADD231PS %s(%s)(AX*2), Z%d, Z%d\n", off(64*i), q, 8+i, 4*h+i)
		}
	}
	p("\tADDQ $128, AX\n\tDECQ CX\n\tJNZ s2loop\n\n")
	reduce(0, "(DX)")
	b.WriteString("\n")
	reduce(4, "(DX)(R14*1)")
	p("\n\tADDQ $4, DX\n\tDECQ R9\n\tJNZ s2pos\n\tVZEROUPPER\n\tRET\n\n")
}

func off(o int) string {
	if o == 0 {
		return ""
	}
	return fmt.Sprint(o)
}

// mad writes the two-head value pass: R accumulator registers a head (8: 128 elements, in
// chunks over hd; 4: heads of 64), head 0 in Z0.., head 1 in Z16.., the value row in Z24...
func mad(name string, R int, chunked bool) {
	h0, h1, vv := make([]int, R), make([]int, R), make([]int, R)
	for i := range R {
		h0[i], h1[i], vv[i] = i, 16+i, 24+i
	}
	if chunked {
		p(`// func %[1]s(acc0, acc1 *float32, v *uint16, rows *int32, n, stride, hd int, ms0, vs0, ms1, vs1 *float32)
//
// attnMadSeqF16Z for two heads over the same value rows (acc0 with ms0/vs0, acc1 with
// ms1/vs1): 128 elements of each head at a time; hd a multiple of 128, n ≥ 1.
TEXT ·%[1]s(SB), NOSPLIT, $0-88
	MOVQ acc0+0(FP), DI
	MOVQ acc1+8(FP), R15
	MOVQ v+16(FP), SI
	MOVQ rows+24(FP), R8
	MOVQ n+32(FP), R9
	MOVQ stride+40(FP), R10
	MOVQ hd+48(FP), CX
	MOVQ ms0+56(FP), R13
	MOVQ vs0+64(FP), R14
	MOVQ ms1+72(FP), R11
	MOVQ vs1+80(FP), R12
	SHRQ $7, CX

p2chunk:
`, name)
	} else {
		p(`// func %[1]s(acc0, acc1 *float32, v *uint16, rows *int32, n, stride int, ms0, vs0, ms1, vs1 *float32)
//
// attnMadSeqF16Z64 for two heads over the same value rows (acc0 with ms0/vs0, acc1 with
// ms1/vs1): heads of 64 elements, n ≥ 1.
TEXT ·%[1]s(SB), NOSPLIT, $0-80
	MOVQ acc0+0(FP), DI
	MOVQ acc1+8(FP), R15
	MOVQ v+16(FP), SI
	MOVQ rows+24(FP), R8
	MOVQ n+32(FP), R9
	MOVQ stride+40(FP), R10
	MOVQ ms0+48(FP), R13
	MOVQ vs0+56(FP), R14
	MOVQ ms1+64(FP), R11
	MOVQ vs1+72(FP), R12
`, name)
	}
	for i := range R {
		p("\tVMOVUPS %d(DI), Z%d\n", 64*i, h0[i])
	}
	for i := range R {
		p("\tVMOVUPS %d(R15), Z%d\n", 64*i, h1[i])
	}
	p("\tXORQ BX, BX\n\n%s_pos:\n", name)
	rescale := func(ms string, regs []int, skip string) {
		p("\tCMPL (%s)(BX*4), $0x3f800000 // ms = 1.0: no new maximum\n\tJEQ %s\n\tVBROADCASTSS (%s)(BX*4), Z8\n", ms, skip, ms)
		for _, r := range regs {
			p("\tVMULPS Z8, Z%d, Z%d\n", r, r)
		}
		roundF16(regs)
	}
	rescale("R13", h0, name+"_h1")
	p("%s_h1:\n", name)
	rescale("R11", h1, name+"_mad")
	p("%s_mad:\n\tLEAQ ATTN_AHEAD(BX), DX\n\tCMPQ DX, R9\n\tJGE %s_fetched\n\tATTN_PREFETCH((R8)(DX*4), DX)\n", name, name)
	if R == 8 {
		p("\tPREFETCHT0 128(SI)(DX*1)\n\tPREFETCHT0 192(SI)(DX*1)\n")
	}
	p("%s_fetched:\n\tMOVLQSX (R8)(BX*4), AX\n\tIMULQ R10, AX\n\tADDQ SI, AX\n", name)
	for i := range R {
		p("\tVCVTPH2PS %d(AX), Z%d\n", 32*i, vv[i])
	}
	for h, regs := range [][]int{h0, h1} {
		p("\tVBROADCASTSS (%s)(BX*4), Z8\n", []string{"R14", "R12"}[h])
		for i, r := range regs {
			p("\tVFMADD231PS Z8, Z%d, Z%d\n", vv[i], r)
		}
		roundF16(regs)
	}
	p("\tINCQ BX\n\tCMPQ BX, R9\n\tJLT %s_pos\n\n", name)
	for i := range R {
		p("\tVMOVUPS Z%d, %d(DI)\n", h0[i], 64*i)
	}
	for i := range R {
		p("\tVMOVUPS Z%d, %d(R15)\n", h1[i], 64*i)
	}
	if chunked {
		p("\tADDQ $512, DI\n\tADDQ $512, R15\n\tADDQ $256, SI\n\tDECQ CX\n\tJNZ p2chunk\n")
	}
	p("\tVZEROUPPER\n\tRET\n")
}

func main() {
	p(`// Code generated by attn_f16pair_gen.go; DO NOT EDIT.

//go:build amd64

#include "textflag.h"
#include "attn_amd64.h"

// Decode attention over the f16 cache for two query heads that share a KV head (GQA):
// the score and value passes of attnScoresF16Z and attnMadSeqF16Z/Z64, each cached row read
// and widened once for both queries. Every head's arithmetic is the one-head kernels' (the
// same accumulators, fused multiply-adds, reduction and f16 roundings, in the same order),
// so FlashF16.AttendPair gives the bits of two Attend calls (TestAttendPairF16).

`)
	scores()
	mad("attnMadSeqF16Z2", 8, true)
	b.WriteString("\n")
	mad("attnMadSeqF16Z2x64", 4, false)
	out := strings.ReplaceAll(b.String(), "\n\n\n", "\n\n")
	if err := os.WriteFile("attn_f16pair_amd64.s", []byte(out), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
