// Package tensor holds what every weight format and kernel shares: the element types
// (plain floats and ggml's block-quantized types), exact f16/bf16 conversions, and
// dequantization/quantization that match ggml's reference code bit for bit.
//
// A DType's numeric value is ggml's type id (ggml_type in ggml.h), so GGUF files map onto
// it directly. Data is always little-endian, as in both safetensors and GGUF; the zero-copy
// views (Float32s, Uint16s, Bytes) assume a little-endian host (amd64, arm64).
//
// Dequantize reads F32, F16, BF16, F64, I8..I64, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and the k-quants
// Q2_K..Q6_K; Quantize writes F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K and Q6_K. Both are checked
// bit for bit against gguf-py's ports of ggml's reference code (ref_test.go), the k-quants
// (which gguf-py does not quantize) against llama-quantize (quantk_test.go).
package tensor

import (
	"fmt"
	"strings"
)

// DType is an element type. Its value equals ggml's type id.
type DType uint8

// The values are ggml's type ids; do not renumber.
const (
	F32  DType = 0
	F16  DType = 1
	Q4_0 DType = 2
	Q4_1 DType = 3
	Q5_0 DType = 6
	Q5_1 DType = 7
	Q8_0 DType = 8
	Q2_K DType = 10
	Q3_K DType = 11
	Q4_K DType = 12
	Q5_K DType = 13
	Q6_K DType = 14
	// Types llama.cpp writes that this package can size but not dequantize: a GGUF holding
	// them still opens (its metadata and other tensors are usable).
	IQ2_XXS DType = 16
	IQ2_XS  DType = 17
	IQ3_XXS DType = 18
	IQ1_S   DType = 19
	IQ4_NL  DType = 20
	IQ3_S   DType = 21
	IQ2_S   DType = 22
	IQ4_XS  DType = 23
	IQ1_M   DType = 29
	TQ1_0   DType = 34
	TQ2_0   DType = 35
	MXFP4   DType = 39
	NVFP4   DType = 40
	Q1_0    DType = 41

	I8   DType = 24
	I16  DType = 25
	I32  DType = 26
	I64  DType = 27
	F64  DType = 28
	BF16 DType = 30
)

// QK_K is the number of elements in a k-quant super-block.
const QK_K = 256

type dtypeInfo struct {
	name        string // our name, also the safetensors dtype string where st is true
	st          bool   // has a safetensors dtype string
	blockElems  int
	blockBytes  int
	ggmlName    string
	quantized   bool
	floatFamily bool
}

// Block layouts (ggml-common.h):
//
//	Q4_0: f16 d; u8 qs[16]                      32 elems, 18 bytes
//	Q4_1: f16 d; f16 m; u8 qs[16]               32 elems, 20 bytes
//	Q5_0: f16 d; u32 qh; u8 qs[16]              32 elems, 22 bytes
//	Q5_1: f16 d; f16 m; u32 qh; u8 qs[16]       32 elems, 24 bytes
//	Q8_0: f16 d; i8 qs[32]                      32 elems, 34 bytes
//	Q2_K: u8 scales[16]; u8 qs[64]; f16 d; f16 dmin              256 elems, 84 bytes
//	Q3_K: u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d          256 elems, 110 bytes
//	Q4_K: f16 d; f16 dmin; u8 scales[12]; u8 qs[128]             256 elems, 144 bytes
//	Q5_K: f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]  256 elems, 176 bytes
//	Q6_K: u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d            256 elems, 210 bytes
var dtypes = map[DType]dtypeInfo{
	F32:  {name: "F32", st: true, blockElems: 1, blockBytes: 4, ggmlName: "f32", floatFamily: true},
	F16:  {name: "F16", st: true, blockElems: 1, blockBytes: 2, ggmlName: "f16", floatFamily: true},
	BF16: {name: "BF16", st: true, blockElems: 1, blockBytes: 2, ggmlName: "bf16", floatFamily: true},
	F64:  {name: "F64", st: true, blockElems: 1, blockBytes: 8, ggmlName: "f64", floatFamily: true},
	I8:   {name: "I8", st: true, blockElems: 1, blockBytes: 1, ggmlName: "i8"},
	I16:  {name: "I16", st: true, blockElems: 1, blockBytes: 2, ggmlName: "i16"},
	I32:  {name: "I32", st: true, blockElems: 1, blockBytes: 4, ggmlName: "i32"},
	I64:  {name: "I64", st: true, blockElems: 1, blockBytes: 8, ggmlName: "i64"},
	Q4_0: {name: "Q4_0", blockElems: 32, blockBytes: 18, ggmlName: "q4_0", quantized: true},
	Q4_1: {name: "Q4_1", blockElems: 32, blockBytes: 20, ggmlName: "q4_1", quantized: true},
	Q5_0: {name: "Q5_0", blockElems: 32, blockBytes: 22, ggmlName: "q5_0", quantized: true},
	Q5_1: {name: "Q5_1", blockElems: 32, blockBytes: 24, ggmlName: "q5_1", quantized: true},
	Q8_0: {name: "Q8_0", blockElems: 32, blockBytes: 34, ggmlName: "q8_0", quantized: true},
	Q2_K: {name: "Q2_K", blockElems: QK_K, blockBytes: 84, ggmlName: "q2_K", quantized: true},
	Q3_K: {name: "Q3_K", blockElems: QK_K, blockBytes: 110, ggmlName: "q3_K", quantized: true},
	Q4_K: {name: "Q4_K", blockElems: QK_K, blockBytes: 144, ggmlName: "q4_K", quantized: true},
	Q5_K: {name: "Q5_K", blockElems: QK_K, blockBytes: 176, ggmlName: "q5_K", quantized: true},
	Q6_K: {name: "Q6_K", blockElems: QK_K, blockBytes: 210, ggmlName: "q6_K", quantized: true},

	// Sizes only (ggml's type_traits, as in gguf-py's GGML_QUANT_SIZES).
	IQ2_XXS: {name: "IQ2_XXS", blockElems: QK_K, blockBytes: 66, ggmlName: "iq2_xxs", quantized: true},
	IQ2_XS:  {name: "IQ2_XS", blockElems: QK_K, blockBytes: 74, ggmlName: "iq2_xs", quantized: true},
	IQ3_XXS: {name: "IQ3_XXS", blockElems: QK_K, blockBytes: 98, ggmlName: "iq3_xxs", quantized: true},
	IQ1_S:   {name: "IQ1_S", blockElems: QK_K, blockBytes: 50, ggmlName: "iq1_s", quantized: true},
	IQ4_NL:  {name: "IQ4_NL", blockElems: 32, blockBytes: 18, ggmlName: "iq4_nl", quantized: true},
	IQ3_S:   {name: "IQ3_S", blockElems: QK_K, blockBytes: 110, ggmlName: "iq3_s", quantized: true},
	IQ2_S:   {name: "IQ2_S", blockElems: QK_K, blockBytes: 82, ggmlName: "iq2_s", quantized: true},
	IQ4_XS:  {name: "IQ4_XS", blockElems: QK_K, blockBytes: 136, ggmlName: "iq4_xs", quantized: true},
	IQ1_M:   {name: "IQ1_M", blockElems: QK_K, blockBytes: 56, ggmlName: "iq1_m", quantized: true},
	TQ1_0:   {name: "TQ1_0", blockElems: QK_K, blockBytes: 54, ggmlName: "tq1_0", quantized: true},
	TQ2_0:   {name: "TQ2_0", blockElems: QK_K, blockBytes: 66, ggmlName: "tq2_0", quantized: true},
	MXFP4:   {name: "MXFP4", blockElems: 32, blockBytes: 17, ggmlName: "mxfp4", quantized: true},
	NVFP4:   {name: "NVFP4", blockElems: 64, blockBytes: 36, ggmlName: "nvfp4", quantized: true},
	Q1_0:    {name: "Q1_0", blockElems: 128, blockBytes: 18, ggmlName: "q1_0", quantized: true},
}

// Valid reports whether d is a type this package knows.
func (d DType) Valid() bool { _, ok := dtypes[d]; return ok }

// String returns the type's name ("F32", "BF16", "Q8_0", "Q4_K", ...), or "DType(n)" if unknown.
func (d DType) String() string {
	if in, ok := dtypes[d]; ok {
		return in.name
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// BlockSize is the number of elements in one block (1 for plain types).
func (d DType) BlockSize() int { return dtypes[d].blockElems }

// BlockBytes is the number of bytes in one block (the element size for plain types).
func (d DType) BlockBytes() int { return dtypes[d].blockBytes }

// Quantized reports whether d is a block-quantized ggml type.
func (d DType) Quantized() bool { return dtypes[d].quantized }

// IsFloat reports whether d is a plain floating-point type (F32, F16, BF16, F64).
func (d DType) IsFloat() bool { return dtypes[d].floatFamily }

// maxElems bounds element counts so byte sizes never overflow int on any platform we run on.
const maxElems = 1 << 50

// BytesFor returns the size in bytes of n elements of type d. n must be a multiple of the
// block size.
func (d DType) BytesFor(n int) (int, error) {
	in, ok := dtypes[d]
	if !ok {
		return 0, fmt.Errorf("unknown dtype %s", d)
	}
	if n < 0 || n > maxElems {
		return 0, fmt.Errorf("%s: element count %d out of range", d, n)
	}
	if n%in.blockElems != 0 {
		return 0, fmt.Errorf("%s: %d elements is not a multiple of the block size %d", d, n, in.blockElems)
	}
	return n / in.blockElems * in.blockBytes, nil
}

// GGML returns ggml's type id for d.
func (d DType) GGML() uint32 { return uint32(d) }

// GGMLName returns ggml's lower-case type name ("f32", "q4_K", ...).
func (d DType) GGMLName() string { return dtypes[d].ggmlName }

// FromGGML maps a ggml type id to a DType; ids this package cannot handle are an error.
func FromGGML(id uint32) (DType, error) {
	if id > 255 || !DType(id).Valid() {
		return 0, fmt.Errorf("unsupported ggml type id %d", id)
	}
	return DType(id), nil
}

// SafetensorsName returns the safetensors dtype string ("F32", "F16", "BF16", ...), or ""
// when d cannot be stored in safetensors (the ggml block-quantized types).
func (d DType) SafetensorsName() string {
	if in, ok := dtypes[d]; ok && in.st {
		return in.name
	}
	return ""
}

// FromSafetensors maps a safetensors dtype string to a DType.
func FromSafetensors(s string) (DType, error) {
	for d, in := range dtypes {
		if in.st && in.name == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unsupported safetensors dtype %q", s)
}

// Parse accepts a type name in any case: "f32", "bf16", "q8_0", "Q4_K", ...
func Parse(s string) (DType, error) {
	for d, in := range dtypes {
		if strings.EqualFold(in.name, s) {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown dtype %q", s)
}

// Info describes one tensor. Shape is row-major, outermost dimension first (PyTorch order),
// whatever file it came from. Data usually aliases a memory-mapped file: do not write to it.
type Info struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// NumElements is the product of Shape (1 for a scalar), or -1 if a dimension is negative or
// the product exceeds the supported range.
func (t Info) NumElements() int {
	n := 1
	for _, s := range t.Shape {
		if s < 0 {
			return -1
		}
		if s != 0 && n > maxElems/s {
			return -1
		}
		n *= s
	}
	return n
}

// Check verifies that len(Data) is exactly what Shape and DType require.
func (t Info) Check() error {
	n := t.NumElements()
	if n < 0 {
		return fmt.Errorf("tensor %q: invalid shape %v", t.Name, t.Shape)
	}
	want, err := t.DType.BytesFor(n)
	if err != nil {
		return fmt.Errorf("tensor %q: shape %v: %w", t.Name, t.Shape, err)
	}
	if len(t.Data) != want {
		return fmt.Errorf("tensor %q: %s%v needs %d bytes, has %d", t.Name, t.DType, t.Shape, want, len(t.Data))
	}
	return nil
}
