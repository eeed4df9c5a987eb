package tensor

import (
	"fmt"
	"math"
	"unsafe"
)

// F16ToF32 widens an IEEE binary16 value; exact for every input, NaN payloads kept.
func F16ToF32(h uint16) float32 {
	// Normal numbers (the common case) only need the exponent rebiased; kept small to inline.
	if h&0x7c00-0x400 < 0x7800 { // exponent neither 0 nor 31 (unsigned wrap-around)
		return math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + 112<<23))
	}
	return f16ToF32Rare(h)
}

func f16ToF32Rare(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	mant := uint32(h & 0x3ff)
	if h&0x7c00 == 0x7c00 { // Inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	}
	// Zero or subnormal: mant * 2^-24, exact in float32.
	v := float32(mant) * (1.0 / (1 << 24))
	return math.Float32frombits(sign | math.Float32bits(v))
}

// F32ToF16 rounds to the nearest binary16, ties to even (as x86 F16C, numpy and ggml do).
// Overflow gives ±Inf; NaN stays NaN (quiet, sign and top payload bits kept).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	abs := b & 0x7fffffff
	if abs-0x38800000 < 0x477ff000-0x38800000 { // result is a normal f16 (the common case)
		// Rebias, then round to nearest even: add just under half an ulp plus the lowest kept
		// bit, and truncate. A carry into the exponent is still the right answer.
		return uint16(b>>16)&0x8000 | uint16((abs-112<<23+0xfff+(abs>>13)&1)>>13)
	}
	return f32ToF16Rare(b)
}

func f32ToF16Rare(b uint32) uint16 {
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN
		return sign | 0x7e00 | uint16(abs>>13)&0x3ff
	case abs >= 0x477ff000: // >= 65520 rounds to Inf (65504 has an odd mantissa)
		return sign | 0x7c00
	case abs > 0x33000000: // subnormal in f16; exactly 2^-25 ties to 0
		e := abs >> 23
		mant := abs&0x7fffff | 0x800000
		shift := 126 - e
		h := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	return sign
}

// BF16ToF32 widens a bfloat16 value (exact).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to the nearest bfloat16, ties to even, like PyTorch and ggml.
// NaN stays a quiet NaN with its sign and top payload bits (ggml_compute_fp32_to_bf16).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// Float32s views b as float32s without copying. b must be 4-byte aligned (mmapped tensor
// data from safetensors/GGUF files written by tokenwise or HF is) and a multiple of 4 long.
func Float32s(b []byte) ([]float32, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("float32 view: %d bytes is not a multiple of 4", len(b))
	}
	if len(b) == 0 {
		return nil, nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 != 0 {
		return nil, fmt.Errorf("float32 view: data not 4-byte aligned")
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4), nil
}

// Uint16s views b as uint16s (raw f16/bf16 bits) without copying; b must be 2-byte aligned.
func Uint16s(b []byte) ([]uint16, error) {
	if len(b)%2 != 0 {
		return nil, fmt.Errorf("uint16 view: %d bytes is not a multiple of 2", len(b))
	}
	if len(b) == 0 {
		return nil, nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%2 != 0 {
		return nil, fmt.Errorf("uint16 view: data not 2-byte aligned")
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2), nil
}

// Bytes views a slice of numbers as its little-endian bytes without copying.
func Bytes[T float32 | float64 | uint16 | int8 | int16 | int32 | int64 | uint32](v []T) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*int(unsafe.Sizeof(v[0])))
}
