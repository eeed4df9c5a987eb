package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Dequantize converts len(dst) elements of type dt, stored in src, to float32.
// len(src) must be exactly dt.BytesFor(len(dst)).
//
// The arithmetic follows ggml's dequantize_row_* (same operation order, each product rounded
// to float32, no fused multiply-add), so results equal ggml's scalar reference code.
func Dequantize(dt DType, src []byte, dst []float32) error {
	want, err := dt.BytesFor(len(dst))
	if err != nil {
		return fmt.Errorf("dequantize: %w", err)
	}
	if len(src) != want {
		return fmt.Errorf("dequantize %s: %d elements need %d bytes, got %d", dt, len(dst), want, len(src))
	}
	le := binary.LittleEndian
	switch dt {
	case F32:
		copy(Bytes(dst), src) // little-endian host: the bytes are the floats
	case F16:
		src := src[:2*len(dst)]
		for i := range dst {
			// F16ToF32 is over the inlining budget; its fast path is repeated here.
			h := uint16(src[2*i]) | uint16(src[2*i+1])<<8
			if h&0x7c00-0x400 < 0x7800 {
				dst[i] = math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + 112<<23))
			} else {
				dst[i] = f16ToF32Rare(h)
			}
		}
	case BF16:
		src := src[:2*len(dst)]
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(src[2*i])<<16 | uint32(src[2*i+1])<<24)
		}
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(le.Uint64(src[8*i:])))
		}
	case I8:
		for i := range dst {
			dst[i] = float32(int8(src[i]))
		}
	case I16:
		for i := range dst {
			dst[i] = float32(int16(le.Uint16(src[2*i:])))
		}
	case I32:
		for i := range dst {
			dst[i] = float32(int32(le.Uint32(src[4*i:])))
		}
	case I64:
		for i := range dst {
			dst[i] = float32(int64(le.Uint64(src[8*i:])))
		}
	case Q8_0:
		for b := 0; b < len(dst)/32; b++ {
			qs, y := (*[32]byte)(src[34*b+2:]), (*[32]float32)(dst[32*b:])
			d := F16ToF32(le.Uint16(src[34*b:]))
			for j := range 32 {
				y[j] = float32(int8(qs[j])) * d
			}
		}
	case Q4_0:
		for b := 0; b < len(dst)/32; b++ {
			qs, y := (*[16]byte)(src[18*b+2:]), (*[32]float32)(dst[32*b:])
			d := F16ToF32(le.Uint16(src[18*b:]))
			for j := range 16 {
				y[j] = float32(int(qs[j]&0x0f)-8) * d
				y[j+16] = float32(int(qs[j]>>4)-8) * d
			}
		}
	case Q4_1:
		for b := 0; b < len(dst)/32; b++ {
			qs, y := (*[16]byte)(src[20*b+4:]), (*[32]float32)(dst[32*b:])
			d := F16ToF32(le.Uint16(src[20*b:]))
			m := F16ToF32(le.Uint16(src[20*b+2:]))
			for j := range 16 {
				// float32(...) around the product keeps Go from fusing it into an FMA.
				y[j] = float32(float32(qs[j]&0x0f)*d) + m
				y[j+16] = float32(float32(qs[j]>>4)*d) + m
			}
		}
	case Q5_0:
		for b := 0; b < len(dst)/32; b++ {
			blk, y := src[22*b:22*b+22], dst[32*b:32*b+32]
			d := F16ToF32(le.Uint16(blk))
			qh := le.Uint32(blk[2:]) // bit j is the 5th bit of element j
			qs := blk[6:22]
			for j := range 16 {
				x0 := int(qs[j]&0x0f|byte(qh>>j&1)<<4) - 16
				x1 := int(qs[j]>>4|byte(qh>>(j+16)&1)<<4) - 16
				y[j] = float32(x0) * d
				y[j+16] = float32(x1) * d
			}
		}
	case Q5_1:
		for b := 0; b < len(dst)/32; b++ {
			blk, y := src[24*b:24*b+24], dst[32*b:32*b+32]
			d := F16ToF32(le.Uint16(blk))
			m := F16ToF32(le.Uint16(blk[2:]))
			qh := le.Uint32(blk[4:])
			qs := blk[8:24]
			for j := range 16 {
				x0 := qs[j]&0x0f | byte(qh>>j&1)<<4
				x1 := qs[j]>>4 | byte(qh>>(j+16)&1)<<4
				y[j] = float32(float32(x0)*d) + m
				y[j+16] = float32(float32(x1)*d) + m
			}
		}
	case Q2_K:
		for b := 0; b < len(dst)/QK_K; b++ {
			dequantQ2K(src[84*b:84*b+84], dst[QK_K*b:QK_K*b+QK_K])
		}
	case Q3_K:
		for b := 0; b < len(dst)/QK_K; b++ {
			dequantQ3K(src[110*b:110*b+110], dst[QK_K*b:QK_K*b+QK_K])
		}
	case Q4_K:
		for b := 0; b < len(dst)/QK_K; b++ {
			dequantQ4K(src[144*b:144*b+144], dst[QK_K*b:QK_K*b+QK_K])
		}
	case Q5_K:
		for b := 0; b < len(dst)/QK_K; b++ {
			dequantQ5K(src[176*b:176*b+176], dst[QK_K*b:QK_K*b+QK_K])
		}
	case Q6_K:
		for b := 0; b < len(dst)/QK_K; b++ {
			dequantQ6K(src[210*b:210*b+210], dst[QK_K*b:QK_K*b+QK_K])
		}
	default:
		return fmt.Errorf("dequantize: unsupported dtype %s", dt)
	}
	return nil
}

// scaleMinK4 unpacks the j-th 6-bit scale and min of a Q4_K block: the first four pairs sit
// in the low 6 bits of scales[0..7]; the last four are split into a low nibble in
// scales[8..11] and the two high bits left over in scales[0..7].
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0x0f | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

func dequantQ4K(blk []byte, y []float32) {
	d := F16ToF32(binary.LittleEndian.Uint16(blk))
	dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
	scales := blk[4:16]
	q := blk[16:144]
	// Four groups of 64 elements; each group's 32 bytes hold two sub-blocks of 32 (low nibbles, then high).
	for g := range 4 {
		sc, m := scaleMinK4(2*g, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(2*g+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		qq, yy := q[32*g:32*g+32], y[64*g:64*g+64]
		for l := range 32 {
			yy[l] = float32(d1*float32(qq[l]&0x0f)) - m1
			yy[l+32] = float32(d2*float32(qq[l]>>4)) - m2
		}
	}
}

func dequantQ5K(blk []byte, y []float32) {
	d := F16ToF32(binary.LittleEndian.Uint16(blk))
	dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
	scales, qh, q := blk[4:16], blk[16:48], blk[48:176]
	// As Q4_K, plus a 5th bit per element from qh: bit 2g for the low-nibble sub-block of
	// group g, bit 2g+1 for the high-nibble one.
	for g := range 4 {
		sc, m := scaleMinK4(2*g, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(2*g+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		qq, yy := q[32*g:32*g+32], y[64*g:64*g+64]
		for l := range 32 {
			yy[l] = float32(d1*float32(qq[l]&0x0f|(qh[l]>>(2*g)&1)<<4)) - m1
			yy[l+32] = float32(d2*float32(qq[l]>>4|(qh[l]>>(2*g+1)&1)<<4)) - m2
		}
	}
}

func dequantQ2K(blk []byte, y []float32) {
	scales, q := blk[0:16], blk[16:80]
	d := F16ToF32(binary.LittleEndian.Uint16(blk[80:]))
	dmin := F16ToF32(binary.LittleEndian.Uint16(blk[82:]))
	// Two halves of 128; each 32-byte slice of q holds four 2-bit planes (shift 0, 2, 4, 6),
	// each plane two sub-blocks of 16 with their own 4-bit scale and 4-bit min.
	is := 0
	for n := range 2 {
		qq := q[32*n : 32*n+32]
		for plane := range 4 {
			shift := 2 * plane
			for half := range 2 {
				sc := scales[is]
				is++
				dl, ml := d*float32(sc&0x0f), dmin*float32(sc>>4)
				yy := y[128*n+32*plane+16*half:]
				for l := range 16 {
					yy[l] = float32(dl*float32(qq[16*half+l]>>shift&3)) - ml
				}
			}
		}
	}
}

func dequantQ3K(blk []byte, y []float32) {
	hmask, q, packed := blk[0:32], blk[32:96], blk[96:108]
	d := F16ToF32(binary.LittleEndian.Uint16(blk[108:]))
	// Sixteen 6-bit scales: low 4 bits from packed[0..7] nibbles, high 2 bits from packed[8..11].
	var scales [16]int
	for i := range 16 {
		lo := packed[i%8] >> (4 * (i / 8)) & 0x0f
		hi := packed[8+i%4] >> (2 * (i / 4)) & 3
		scales[i] = int(lo|hi<<4) - 32
	}
	// Like Q2_K's planes; an element's 3rd bit, from hmask, being clear subtracts 4.
	is := 0
	for n := range 2 {
		qq := q[32*n : 32*n+32]
		for plane := range 4 {
			shift := 2 * plane
			bit := byte(1) << (4*n + plane)
			for half := range 2 {
				dl := d * float32(scales[is])
				is++
				yy := y[128*n+32*plane+16*half:]
				for l := range 16 {
					v := int(qq[16*half+l] >> shift & 3)
					if hmask[16*half+l]&bit == 0 {
						v -= 4
					}
					yy[l] = dl * float32(v)
				}
			}
		}
	}
}

func dequantQ6K(blk []byte, y []float32) {
	ql, qh, sc := blk[0:128], blk[128:192], blk[192:208]
	d := F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
	// Two halves of 128 elements; a 6-bit value is 4 low bits from ql and 2 high bits from qh.
	for n := range 2 {
		l4, h2, s, yy := ql[64*n:64*n+64], qh[32*n:32*n+32], sc[8*n:8*n+8], y[128*n:128*n+128]
		for l := range 32 {
			is := l / 16
			q1 := int(l4[l]&0x0f|(h2[l]>>0&3)<<4) - 32
			q2 := int(l4[l+32]&0x0f|(h2[l]>>2&3)<<4) - 32
			q3 := int(l4[l]>>4|(h2[l]>>4&3)<<4) - 32
			q4 := int(l4[l+32]>>4|(h2[l]>>6&3)<<4) - 32
			yy[l] = d * float32(int8(s[is])) * float32(q1)
			yy[l+32] = d * float32(int8(s[is+2])) * float32(q2)
			yy[l+64] = d * float32(int8(s[is+4])) * float32(q3)
			yy[l+96] = d * float32(int8(s[is+6])) * float32(q4)
		}
	}
}

// Quantize encodes src into dst as type dt. len(dst) must be exactly dt.BytesFor(len(src)).
// Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K; the block types match ggml's
// quantize_row_*_ref bit for bit (the reference llama-quantize and convert_hf_to_gguf use).
func Quantize(dt DType, src []float32, dst []byte) error {
	want, err := dt.BytesFor(len(src))
	if err != nil {
		return fmt.Errorf("quantize: %w", err)
	}
	if len(dst) != want {
		return fmt.Errorf("quantize %s: %d elements need %d bytes, got %d", dt, len(src), want, len(dst))
	}
	le := binary.LittleEndian
	switch dt {
	case F32:
		for i, v := range src {
			le.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		dst := dst[:2*len(src)]
		for i, v := range src {
			// F32ToF16's fast path, repeated here because it is over the inlining budget.
			b := math.Float32bits(v)
			var h uint16
			if abs := b & 0x7fffffff; abs-0x38800000 < 0x477ff000-0x38800000 {
				h = uint16(b>>16)&0x8000 | uint16((abs-112<<23+0xfff+(abs>>13)&1)>>13)
			} else {
				h = f32ToF16Rare(b)
			}
			dst[2*i], dst[2*i+1] = byte(h), byte(h>>8)
		}
	case BF16:
		for i, v := range src {
			le.PutUint16(dst[2*i:], F32ToBF16(v))
		}
	case Q8_0:
		for b := 0; b < len(src)/32; b++ {
			quantQ8_0(src[32*b:32*b+32], dst[34*b:34*b+34])
		}
	case Q4_0:
		for b := 0; b < len(src)/32; b++ {
			quantQ4_0(src[32*b:32*b+32], dst[18*b:18*b+18])
		}
	case Q4_1:
		for b := 0; b < len(src)/32; b++ {
			quantQ4_1(src[32*b:32*b+32], dst[20*b:20*b+20])
		}
	case Q4_K:
		eachBlock(len(src)/QK_K, func(b int) { quantQ4K(src[QK_K*b:QK_K*b+QK_K], dst[144*b:144*b+144]) })
	case Q5_K:
		eachBlock(len(src)/QK_K, func(b int) { quantQ5K(src[QK_K*b:QK_K*b+QK_K], dst[176*b:176*b+176]) })
	case Q6_K:
		eachBlock(len(src)/QK_K, func(b int) { quantQ6K(src[QK_K*b:QK_K*b+QK_K], dst[210*b:210*b+210]) })
	default:
		return fmt.Errorf("quantize: unsupported dtype %s", dt)
	}
	return nil
}

// toInt8 converts like a C (int8_t) cast of an in-range float: truncation toward zero.
// Out-of-range inputs (only from NaN/Inf weights, undefined in C) are clamped, never a panic.
func toInt8(v float32) int {
	if !(v > -129 && v < 128) {
		if v >= 128 {
			return 127
		}
		return -128
	}
	return int(int8(v))
}

func quantQ8_0(x []float32, blk []byte) {
	var amax float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); a > amax {
			amax = a
		}
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(blk, F32ToF16(d))
	for j, v := range x {
		// roundf rounds half away from zero, as math.Round does; float64 holds the float32 exactly.
		blk[2+j] = byte(int8(clampRound(v * id)))
	}
}

func clampRound(v float32) int {
	r := math.Round(float64(v))
	if !(r >= -128) {
		return -128
	}
	if r > 127 {
		return 127
	}
	return int(r)
}

func quantQ4_0(x []float32, blk []byte) {
	var amax, max float32
	for _, v := range x {
		if a := float32(math.Abs(float64(v))); amax < a {
			amax, max = a, v
		}
	}
	d := max / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(blk, F32ToF16(d))
	for j := range 16 {
		// float32(...) forbids fusing the multiply into the following add (ggml rounds each step).
		x0 := float32(x[j] * id)
		x1 := float32(x[16+j] * id)
		blk[2+j] = byte(min(15, toInt8(x0+8.5))) | byte(min(15, toInt8(x1+8.5)))<<4
	}
}

func quantQ4_1(x []float32, blk []byte) {
	lo, hi := float32(math.MaxFloat32), float32(-math.MaxFloat32)
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	d := (hi - lo) / 15
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(blk, F32ToF16(d))
	binary.LittleEndian.PutUint16(blk[2:], F32ToF16(lo))
	for j := range 16 {
		x0 := float32((x[j] - lo) * id)
		x1 := float32((x[16+j] - lo) * id)
		blk[4+j] = byte(min(15, toInt8(x0+0.5))) | byte(min(15, toInt8(x1+0.5)))<<4
	}
}
