//go:build ignore

// smalln_gen.go writes smalln_amd64.s and smalln_amd64_call.go: the small-n quantized
// products, one function per weight dtype and token count T (1..8), because a kernel that
// keeps 2·T accumulators in registers has to be unrolled for each T. Run `go generate
// ./kernels` after editing it; the generated files are committed.
package main

import (
	"bytes"
	"fmt"
	"os"
)

type dtype struct {
	name  string // Q8_0, Q4_0, Q4_1
	bytes int    // bytes per block of 32
	qs    int    // offset of the quants in a block
	nib   bool   // 4-bit quants
	minus bool   // nibble values are q−8 (Q4_0)
	min   bool   // a block minimum m at offset 2 (Q4_1)
}

var dtypes = []dtype{
	{name: "Q8_0", bytes: 34, qs: 2},
	{name: "Q4_0", bytes: 18, qs: 2, nib: true, minus: true},
	{name: "Q4_1", bytes: 20, qs: 4, nib: true, min: true},
}

const maxT = 8

var s bytes.Buffer

func p(format string, args ...any) { fmt.Fprintf(&s, "\t"+format+"\n", args...) }

// tokAddr is where token t's block starts: SI (tokens 0..3) or DI (4..7) plus t%4 token
// strides (R8 = one stride, R9 = three).
func tokAddr(t int) string { return tokAddrOf(t, "SI", "DI") }

// tokAddrOf is tokAddr from other base registers (lo for tokens 0..3, hi for 4..7).
func tokAddrOf(t int, lo, hi string) string {
	base := lo
	if t >= 4 {
		base = hi
	}
	switch t % 4 {
	case 1:
		return fmt.Sprintf("(%s)(R8*1)", base)
	case 2:
		return fmt.Sprintf("(%s)(R8*2)", base)
	case 3:
		return fmt.Sprintf("(%s)(R9*1)", base)
	}
	return fmt.Sprintf("(%s)", base)
}

// outAddr is where row k (0, 1) of the pair and token t go: R13 (tokens 0..3) or R11
// (4..7) plus t%4 output strides (R12 = one, R14 = three), +4 bytes for row 1.
func outAddr(k, t int) string {
	base := "R13"
	if t >= 4 {
		base = "R11"
	}
	off := ""
	if k == 1 {
		off = "4"
	}
	switch t % 4 {
	case 1:
		return fmt.Sprintf("%s(%s)(R12*1)", off, base)
	case 2:
		return fmt.Sprintf("%s(%s)(R12*2)", off, base)
	case 3:
		return fmt.Sprintf("%s(%s)(R14*1)", off, base)
	}
	return fmt.Sprintf("%s(%s)", off, base)
}

// acc is the register of token t's accumulator: Z0..Z7, row 0 of the pair in lanes 0..7,
// row 1 in lanes 8..15.
func acc(t int) string { return fmt.Sprintf("Z%d", t) }

// accY is the AVX2 kernel's register of row k's accumulator for token t: Y0..Y15.
func accY(k, t int) string { return fmt.Sprintf("Y%d", 2*t+k) }

// kernel writes the AVX-512 VNNI kernel for dtype d and T tokens. Both rows of the pair
// share each 512-bit register: the block's 32 weights of row 0 in the low half and of row 1
// in the high half, the token's 32 activations broadcast to both halves, so one VPDPBUSD,
// one conversion and one FMA do what two 256-bit ones did (one per row), and the rows'
// f16 scales are widened together (a masked word broadcast puts row 1's in the high half).
// Against the 256-bit kernel it replaced (one row per register, the same arithmetic), the
// two test binaries run in turn (`go test -c`, then -test.bench 'SmallN/Q4_1/.../t=1/n=1$',
// Intel Xeon model 207, 2 vCPUs, three rounds): 1536×576 84–99 → 59–61 µs, 576×1536 73–90
// → 59–66 µs, 49152×576 (from L3) 2470–2540 → 1960–2000 µs, n=5 1.2–1.3×; SmolLM2-135M
// Q4_1 decode 86–89 → 98–113 tok/s (`tokenwise bench`, alternating). The word broadcasts of
// the scales are a load and a shuffle each, and the loop is bound by those shuffle-port
// µops, not by the weight reads, which is why the scales come in as dwords (below).
func kernel(d dtype, T int) {
	name := fmt.Sprintf("smallN%sT%dVNNI", d.name, T)
	fmt.Fprintf(&s, "// func %s(w *byte, rowBytes, pairs, nb int, x *int8, e *int32, dxT, sxT, out *float32, ldo int)\n", name)
	fmt.Fprintf(&s, "TEXT ·%s(SB), NOSPLIT, $128-80\n", name)
	p("MOVQ w+0(FP), AX")
	p("MOVQ rowBytes+8(FP), BX")
	p("MOVQ pairs+16(FP), DX")
	p("MOVQ out+64(FP), R13")
	// K1: the high half of a 512-bit register's dwords (8..15).
	p("MOVL $0xff00, R12")
	p("KMOVW R12, K1")
	// K2: the high half of a 256-bit register's dwords (4..7).
	p("MOVL $0xf0, R12")
	p("KMOVW R12, K2")
	if !d.nib {
		p("MOVL $0x80808080, R12")
		p("VPBROADCASTD R12, Z16") // 0x80 bytes, for the weights' correction
	}
	if d.nib {
		p("MOVL $0x0f0f0f0f, R12")
		p("VPBROADCASTD R12, Z17") // nibble mask
		// Z30: shift counts per 16-bit lane, 0 for 128-bit lanes 0 and 2 (low nibbles,
		// elements 0..15 of each row), 4 for lanes 1 and 3 (high nibbles, 16..31).
		p("MOVL $0x00040004, R12")
		p("VPBROADCASTD R12, X31")
		p("VPXORD Y30, Y30, Y30")
		p("VINSERTI32X4 $1, X31, Y30, Y30")
		p("VINSERTI64X4 $1, Y30, Z30, Z30")
	}
	fmt.Fprintf(&s, "pair:\n")
	p("MOVQ x+32(FP), SI")
	p("MOVQ nb+24(FP), CX")
	p("MOVQ CX, R8")
	p("SHLQ $5, R8") // token stride: nb·32 bytes
	p("LEAQ (R8)(R8*2), R9")
	p("LEAQ (SI)(R8*4), DI")
	p("MOVQ dxT+48(FP), R10")
	if d.minus {
		p("MOVQ e+40(FP), R12")
		p("LEAQ (R12)(R8*4), R14")
	}
	if d.min {
		p("MOVQ sxT+56(FP), R11")
		p("VPXORD Z28, Z28, Z28")
	}
	for t := range T {
		p("VPXORD %s, %s, %s", acc(t), acc(t), acc(t))
	}
	fmt.Fprintf(&s, "block:\n")
	p("PREFETCHT1 4096(AX)")
	p("PREFETCHT1 4096(AX)(BX*1)")
	// Z19: the pair's quants, row 0's 32 signed bytes in element order in the low half,
	// row 1's in the high half.
	if d.nib {
		p("VBROADCASTI32X4 %d(AX), Z19", d.qs)
		p("VBROADCASTI32X4 %d(AX)(BX*1), K1, Z19", d.qs)
		p("VPSRLVW Z30, Z19, Z19")
		p("VPANDD Z17, Z19, Z19")
	} else {
		p("VMOVDQU32 %d(AX), Y19", d.qs)
		p("VINSERTI64X4 $1, %d(AX)(BX*1), Z19, Z19", d.qs)
		// Z21 = −128·Σw per lane: VPDPBUSD multiplies unsigned by signed bytes, so
		// the activations come as x+128 (qact's smallN.xo) and each lane's
		// integer sum starts from Z21.
		p("VPXORD Z21, Z21, Z21")
		p("VPDPBUSD Z19, Z16, Z21")
		p("VPXORD Z27, Z27, Z27")
		p("VPSUBD Z21, Z27, Z21")
	}
	// Z26: the rows' f16 d_w widened, row 0's in lanes 0..7, row 1's in 8..15. The block's
	// first four bytes (d_w, and m for Q4_1) are broadcast as a dword (a load, where a word
	// broadcast also takes a shuffle), widened, and d_w (m) picked from each pair of lanes.
	p("VPBROADCASTD (AX), Y26")
	p("VPBROADCASTD (AX)(BX*1), K2, Y26")
	p("VCVTPH2PS Y26, Z27")
	p("VSHUFPS $0x00, Z27, Z27, Z26")
	if d.min {
		// Σ m·s_x in block order: lane t row 0's for token t, lane 8+t row 1's.
		p("VSHUFPS $0x55, Z27, Z27, Z27")
		p("VBROADCASTF32X8 (R11), Z29")
		p("VFMADD231PS Z29, Z27, Z28")
	}
	for t := range T {
		p("VBROADCASTI64X4 %s, Z23", tokAddr(t))
		switch {
		case !d.nib: // (x+128)·w from −128·Σw
			p("VMOVDQA32 Z21, Z24")
			p("VPDPBUSD Z19, Z23, Z24")
		case d.minus: // nibble·x from −8·Σx: (q−8)·x
			p("VBROADCASTI64X4 %s, Z24", tokAddrOf(t, "R12", "R14"))
			p("VPDPBUSD Z23, Z19, Z24")
		default: // nibble·x
			p("VPXORD Z24, Z24, Z24")
			p("VPDPBUSD Z23, Z19, Z24")
		}
		p("VCVTDQ2PS Z24, Z24")
		p("VMULPS.BCST %d(R10), Z26, Z25", 4*t) // d_w·d_x
		p("VFMADD231PS Z25, Z24, %s", acc(t))
	}
	p("ADDQ $%d, AX", d.bytes)
	p("ADDQ $32, SI")
	p("ADDQ $32, DI")
	p("ADDQ $32, R10")
	if d.minus {
		p("ADDQ $32, R12")
		p("ADDQ $32, R14")
	}
	if d.min {
		p("ADDQ $32, R11")
	}
	p("DECQ CX")
	p("JNZ block")
	p("ADDQ BX, AX") // past the pair's second row
	if d.min {
		p("VMOVUPS Z28, 64(SP)")
	}
	p("MOVQ ldo+72(FP), R12")
	p("SHLQ $2, R12")
	p("LEAQ (R12)(R12*2), R14")
	p("LEAQ (R13)(R12*4), R11")
	for t := range T {
		for k := range 2 {
			// hsum_float_8 of the row's eight lanes: (l4+l0, l5+l1, l6+l2, l7+l3), then
			// (r0+r2)+(r1+r3).
			a := acc(t)
			if k == 0 {
				p("VEXTRACTF32X4 $1, %s, X26", a)
				p("VADDPS X%s, X26, X26", a[1:])
			} else {
				p("VEXTRACTF32X4 $2, %s, X25", a)
				p("VEXTRACTF32X4 $3, %s, X26", a)
				p("VADDPS X25, X26, X26")
			}
			p("VMOVHLPS X26, X26, X27")
			p("VADDPS X27, X26, X27")
			p("VMOVSHDUP X27, X26")
			p("VADDSS X26, X27, X27")
			if d.min {
				p("VADDSS %d(SP), X27, X27", 64+32*k+4*t)
			}
			p("VMOVSS X27, %s", outAddr(k, t))
		}
	}
	p("ADDQ $8, R13")
	p("DECQ DX")
	p("JNZ pair")
	p("VZEROUPPER")
	p("RET")
	fmt.Fprintf(&s, "\n")
}

// kernelAVX2 is kernel for CPUs without AVX-512 VNNI: VEX code in Y0..Y15, so T ≤ 4 (eight
// accumulators). The integer sums are ggml's AVX2 ones: |w|·sign(x,w) byte products summed
// in pairs (VPMADDUBSW; |w| ≤ 128, |x| ≤ 127: no pair saturates) and pairs of pairs
// (VPMADDWD against ones); Q4_1's unsigned nibbles multiply the activations directly.
func kernelAVX2(d dtype, T int) {
	name := fmt.Sprintf("smallN%sT%dAVX2", d.name, T)
	fmt.Fprintf(&s, "// func %s(w *byte, rowBytes, pairs, nb int, x *int8, e *int32, dxT, sxT, out *float32, ldo int)\n", name)
	fmt.Fprintf(&s, "TEXT ·%s(SB), NOSPLIT, $128-80\n", name)
	p("MOVQ w+0(FP), AX")
	p("MOVQ rowBytes+8(FP), BX")
	p("MOVQ pairs+16(FP), DX")
	p("MOVQ out+64(FP), R13")
	p("VPCMPEQW Y12, Y12, Y12")
	p("VPSRLW $15, Y12, Y12") // int16 ones
	fmt.Fprintf(&s, "pair:\n")
	p("MOVQ x+32(FP), SI")
	p("MOVQ nb+24(FP), CX")
	p("MOVQ CX, R8")
	p("SHLQ $5, R8")
	p("LEAQ (R8)(R8*2), R9")
	p("MOVQ dxT+48(FP), R10")
	if d.min {
		p("MOVQ sxT+56(FP), R11")
		p("VXORPS Y10, Y10, Y10")
		p("VXORPS Y11, Y11, Y11")
	}
	for t := range T {
		for k := range 2 {
			p("VXORPS %s, %s, %s", accY(k, t), accY(k, t), accY(k, t))
		}
	}
	fmt.Fprintf(&s, "block:\n")
	for k := range 2 {
		src := "(AX)"
		if k == 1 {
			src = "(AX)(BX*1)"
		}
		at := func(off int) string {
			if off == 0 {
				return src
			}
			return fmt.Sprintf("%d%s", off, src)
		}
		w, a := fmt.Sprintf("Y%d", 8+k), fmt.Sprintf("Y%d", 10+k)
		p("PREFETCHT1 %s", at(4096))
		if d.nib {
			p("VMOVDQU %s, X%d", at(d.qs), 8+k)
			p("VPSRLW $4, X%d, X14", 8+k)
			p("VINSERTI128 $1, X14, %s, %s", w, w)
			p("VPAND smallnNib<>(SB), %s, %s", w, w)
			if d.minus {
				p("VPSUBB smallnEight<>(SB), %s, %s", w, w)
			}
		} else {
			p("VMOVDQU %s, %s", at(d.qs), w)
		}
		if !d.min {
			p("VPABSB %s, %s", w, a)
		}
		p("VPBROADCASTW %s, X14", at(0))
		p("VCVTPH2PS X14, Y14")
		p("VMULPS (R10), Y14, Y14")
		p("VMOVUPS Y14, %d(SP)", 32*k)
		if d.min {
			p("VPBROADCASTW %s, X14", at(2))
			p("VCVTPH2PS X14, Y14")
			p("VFMADD231PS (R11), Y14, Y%d", 10+k)
		}
	}
	for t := range T {
		if !d.min {
			p("VMOVDQU %s, Y13", tokAddr(t))
		}
		for k := range 2 {
			if d.min {
				p("VPMADDUBSW %s, Y%d, Y14", tokAddr(t), 8+k)
			} else {
				p("VPSIGNB Y%d, Y13, Y14", 8+k)
				p("VPMADDUBSW Y14, Y%d, Y14", 10+k)
			}
			p("VPMADDWD Y12, Y14, Y14")
			p("VCVTDQ2PS Y14, Y14")
			p("VBROADCASTSS %d(SP), Y15", 32*k+4*t)
			p("VFMADD231PS Y15, Y14, %s", accY(k, t))
		}
	}
	p("ADDQ $%d, AX", d.bytes)
	p("ADDQ $32, SI")
	p("ADDQ $32, R10")
	if d.min {
		p("ADDQ $32, R11")
	}
	p("DECQ CX")
	p("JNZ block")
	p("ADDQ BX, AX")
	if d.min {
		p("VMOVUPS Y10, 64(SP)")
		p("VMOVUPS Y11, 96(SP)")
	}
	p("MOVQ ldo+72(FP), R12")
	p("SHLQ $2, R12")
	p("LEAQ (R12)(R12*2), R14")
	for t := range T {
		for k := range 2 {
			a := accY(k, t)
			p("VEXTRACTF128 $1, %s, X14", a)
			p("VADDPS X%s, X14, X14", a[1:])
			p("VMOVHLPS X14, X14, X15")
			p("VADDPS X15, X14, X15")
			p("VMOVSHDUP X15, X14")
			p("VADDSS X14, X15, X15")
			if d.min {
				p("VADDSS %d(SP), X15, X15", 64+32*k+4*t)
			}
			p("VMOVSS X15, %s", outAddr(k, t))
		}
	}
	p("ADDQ $8, R13")
	p("DECQ DX")
	p("JNZ pair")
	p("VZEROUPPER")
	p("RET")
	fmt.Fprintf(&s, "\n")
}

const maxTAVX2 = 4

func main() {
	fmt.Fprintf(&s, "// Code generated by smalln_gen.go; DO NOT EDIT.\n\n#include \"textflag.h\"\n\n")
	fmt.Fprintf(&s, `// func smallN<dtype>T<T>VNNI(w *byte, rowBytes, pairs, nb int, x *int8, e *int32, dxT, sxT, out *float32, ldo int)
//
// Rows of Q8_0, Q4_0 or Q4_1 weights (w, rowBytes apart, nb blocks each) two at a time, the
// two in the halves of each 512-bit register (pairs pairs; rowBytes 0 does one row twice) times T activation rows quantized to Q8_0
// blocks (x, nb·32 bytes apart; for Q8_0 weights the quants + 128, smallNAct.xo; e: Q4_0's
// −8·Σ of each four quants, nb·8 int32 per token): out[t·ldo + r] = row r · token t, for r < 2·pairs. Each
// block of a row pair is loaded (and its nibbles unpacked) once and dotted with all T
// tokens while it is in registers: the product of a few tokens reads the weights once, as
// a decode step does. dxT[8b+t] is token t's block-b scale, sxT[8b+t] its d·Σq (Q4_1).
//
// Every value has ggml's AVX2 vec_dot arithmetic, the Go reference's (dotQ8_0Act, ...): per
// block and lane j, the exact integer sum of elements 4j..4j+3's products (VPDPBUSD, unsigned
// by signed bytes: Q8_0 the activations offset by 128 against the signed weights, from
// −128·Σw; Q4_1 the nibbles against the activations; Q4_0 the same from −8·Σx), converted to float
// and fused-multiply-added with d_w·d_x into lane j; then hsum_float_8's order, plus
// Σ m·s_x (in block order) for Q4_1.

`)
	for _, d := range dtypes {
		for T := 1; T <= maxT; T++ {
			kernel(d, T)
		}
	}
	fmt.Fprintf(&s, "DATA smallnNib<>+0(SB)/8, $0x0f0f0f0f0f0f0f0f\nDATA smallnNib<>+8(SB)/8, $0x0f0f0f0f0f0f0f0f\n")
	fmt.Fprintf(&s, "DATA smallnNib<>+16(SB)/8, $0x0f0f0f0f0f0f0f0f\nDATA smallnNib<>+24(SB)/8, $0x0f0f0f0f0f0f0f0f\n")
	fmt.Fprintf(&s, "GLOBL smallnNib<>(SB), RODATA|NOPTR, $32\n\n")
	fmt.Fprintf(&s, "DATA smallnEight<>+0(SB)/8, $0x0808080808080808\nDATA smallnEight<>+8(SB)/8, $0x0808080808080808\n")
	fmt.Fprintf(&s, "DATA smallnEight<>+16(SB)/8, $0x0808080808080808\nDATA smallnEight<>+24(SB)/8, $0x0808080808080808\n")
	fmt.Fprintf(&s, "GLOBL smallnEight<>(SB), RODATA|NOPTR, $32\n\n")
	for _, d := range dtypes {
		for T := 1; T <= maxTAVX2; T++ {
			kernelAVX2(d, T)
		}
	}
	s.WriteString(prep)
	if err := os.WriteFile("smalln_amd64.s", s.Bytes(), 0o644); err != nil {
		panic(err)
	}
	s.Reset()
	fmt.Fprintf(&s, "// Code generated by smalln_gen.go; DO NOT EDIT.\n\n//go:build amd64\n\npackage kernels\n\nimport \"github.com/tokenwise/tokenwise/tensor\"\n\n")
	for _, d := range dtypes {
		for T := 1; T <= maxT; T++ {
			fmt.Fprintf(&s, "//go:noescape\nfunc smallN%sT%dVNNI(w *byte, rowBytes, pairs, nb int, x *int8, e *int32, dxT, sxT, out *float32, ldo int)\n\n", d.name, T)
		}
	}
	for _, d := range dtypes {
		for T := 1; T <= maxTAVX2; T++ {
			fmt.Fprintf(&s, "//go:noescape\nfunc smallN%sT%dAVX2(w *byte, rowBytes, pairs, nb int, x *int8, e *int32, dxT, sxT, out *float32, ldo int)\n\n", d.name, T)
		}
	}
	fmt.Fprintf(&s, "// smallNCallAVX2 is smallNCall for the AVX2 kernels (T up to %d).\nfunc smallNCallAVX2(dt tensor.DType, T int, w *byte, rowBytes, pairs, nb int, x *int8, e *int32, dxT, sxT, out *float32, ldo int) {\n\tswitch dt {\n", maxTAVX2)
	for _, d := range dtypes {
		fmt.Fprintf(&s, "\tcase tensor.%s:\n\t\tswitch T {\n", d.name)
		for T := 1; T <= maxTAVX2; T++ {
			fmt.Fprintf(&s, "\t\tcase %d:\n\t\t\tsmallN%sT%dAVX2(w, rowBytes, pairs, nb, x, e, dxT, sxT, out, ldo)\n", T, d.name, T)
		}
		fmt.Fprintf(&s, "\t\t}\n")
	}
	fmt.Fprintf(&s, "\t}\n}\n\n")
	fmt.Fprintf(&s, "// smallNCall runs the kernel for dt and T tokens (1..%d); a switch, not a table, so that\n// the arguments do not escape.\nfunc smallNCall(dt tensor.DType, T int, w *byte, rowBytes, pairs, nb int, x *int8, e *int32, dxT, sxT, out *float32, ldo int) {\n\tswitch dt {\n", maxT)
	for _, d := range dtypes {
		fmt.Fprintf(&s, "\tcase tensor.%s:\n\t\tswitch T {\n", d.name)
		for T := 1; T <= maxT; T++ {
			fmt.Fprintf(&s, "\t\tcase %d:\n\t\t\tsmallN%sT%dVNNI(w, rowBytes, pairs, nb, x, e, dxT, sxT, out, ldo)\n", T, d.name, T)
		}
		fmt.Fprintf(&s, "\t\t}\n")
	}
	fmt.Fprintf(&s, "\t}\n}\n")
	if err := os.WriteFile("smalln_amd64_call.go", s.Bytes(), 0o644); err != nil {
		panic(err)
	}
}

const prep = `// func smallNPrepVNNI(q *int8, blocks int, xo *int8, e *int32)
//
// The activations' forms the small-n kernels take, for blocks blocks of 32 quants: xo (non-nil)
// gets q XOR 0x80 (q+128 as unsigned bytes), e (non-nil) −8·Σ of each four quants.
TEXT ·smallNPrepVNNI(SB), NOSPLIT, $0-32
	MOVQ q+0(FP), SI
	MOVQ blocks+8(FP), CX
	MOVQ xo+16(FP), DI
	MOVQ e+24(FP), DX
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Y16
	MOVL $0x08080808, AX
	VPBROADCASTD AX, Y17
	TESTQ CX, CX
	JZ prepdone
prepblock:
	VMOVDQU32 (SI), Y18
	TESTQ DI, DI
	JZ prepe
	VPXORD Y16, Y18, Y19
	VMOVDQU32 Y19, (DI)
	ADDQ $32, DI
prepe:
	TESTQ DX, DX
	JZ prepnext
	VPXORD Y19, Y19, Y19
	VPDPBUSD Y18, Y17, Y19
	VPXORD Y20, Y20, Y20
	VPSUBD Y19, Y20, Y19
	VMOVDQU32 Y19, (DX)
	ADDQ $32, DX
prepnext:
	ADDQ $32, SI
	DECQ CX
	JNZ prepblock
prepdone:
	VZEROUPPER
	RET
`
