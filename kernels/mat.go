package kernels

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/tokenwise/tokenwise/tensor"
)

// Mat is a row-major weight matrix in its stored dtype: each of Rows rows holds Cols
// elements in DType.BytesFor(Cols) bytes. Data usually aliases a memory-mapped file, so
// the kernels read weights in place and never keep a second copy.
type Mat struct {
	DType      tensor.DType
	Rows, Cols int
	Data       []byte

	rowBytes int
	f32      []float32 // typed views of Data, made once by NewMat
	u16      []uint16
	amx      *amxPack // the quantized dtypes: the AMX-arithmetic repack, made on first use (amxrows.go)
	// outsideAMX: llama.cpp's sapphirerapids library keeps this matrix out of its AMX
	// buffer (SetOutsideAMX), so GGMLAMX multiplies it in the AVX-512 arithmetic.
	outsideAMX bool
}

// SetOutsideAMX marks m as one that llama.cpp's sapphirerapids library multiplies outside its
// AMX backend, with the AVX-512 build's products: the experts of a mixture (their products
// are MUL_MAT_ID, which it does not take). A tied embedding used as the LM head is not one:
// llama.cpp loads the table twice, the head's copy into the AMX buffer (its log: "amx repack
// tensor token_embd.weight"). Only GGMLAMX looks at it.
func (m *Mat) SetOutsideAMX() { m.outsideAMX = true }

// NewMat checks that data holds exactly rows×cols elements of dt and wraps it.
func NewMat(dt tensor.DType, rows, cols int, data []byte) (Mat, error) {
	if rows <= 0 || cols <= 0 {
		return Mat{}, fmt.Errorf("matrix %d×%d: empty", rows, cols)
	}
	switch dt {
	case tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_1, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K:
	default:
		return Mat{}, fmt.Errorf("matrix dtype %v: not supported by the kernels", dt)
	}
	if bs := dt.BlockSize(); cols%bs != 0 {
		return Mat{}, fmt.Errorf("matrix %d×%d %v: row length is not a multiple of the block size %d", rows, cols, dt, bs)
	}
	rb, err := dt.BytesFor(cols)
	if err != nil {
		return Mat{}, fmt.Errorf("matrix %d×%d: %w", rows, cols, err)
	}
	if len(data) != rows*rb {
		return Mat{}, fmt.Errorf("matrix %d×%d %v: have %d bytes, want %d", rows, cols, dt, len(data), rows*rb)
	}
	m := Mat{DType: dt, Rows: rows, Cols: cols, Data: data, rowBytes: rb}
	switch dt {
	case tensor.Q4_0, tensor.Q4_1, tensor.Q8_0, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K:
		m.amx = new(amxPack)
	case tensor.F32:
		m.f32 = f32View(data)
	case tensor.F16, tensor.BF16:
		m.u16 = u16View(data)
	}
	return m, nil
}

// F32Mat wraps a float32 matrix held in memory.
func F32Mat(rows, cols int, data []float32) Mat {
	return Mat{DType: tensor.F32, Rows: rows, Cols: cols, f32: data, rowBytes: 4 * cols,
		Data: unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(data))), 4*len(data))}
}

// Row converts row r to float32 into dst (len Cols).
func (m *Mat) Row(r int, dst []float32) error {
	switch m.DType {
	case tensor.F32:
		copy(dst, m.f32[r*m.Cols:(r+1)*m.Cols])
		return nil
	case tensor.BF16:
		src := m.u16[r*m.Cols : (r+1)*m.Cols]
		i := asmWidenBF16(dst, src)                  // AVX2 assembly (gemm_amd64.s), with or without GOEXPERIMENT=simd
		if i == 0 && simdWidenRow(dst, src, false) { // AVX2 (simd_amd64.go, GOEXPERIMENT=simd)
			return nil
		}
		for ; i < len(src); i++ {
			dst[i] = bf16(src[i])
		}
		return nil
	case tensor.F16:
		src := m.u16[r*m.Cols : (r+1)*m.Cols]
		i := asmWidenF16(dst, src) // F16C assembly
		if i == 0 && simdWidenRow(dst, src, true) {
			return nil
		}
		for ; i < len(src); i++ {
			dst[i] = f16Table[src[i]]
		}
		return nil
	}
	return tensor.Dequantize(m.DType, m.Data[r*m.rowBytes:(r+1)*m.rowBytes], dst[:m.Cols])
}

// f32View reinterprets little-endian float32 bytes in place. Misaligned data (possible after
// an odd-sized tensor in a file) is copied once rather than read unaligned.
func f32View(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%4 != 0 {
		c := make([]float32, len(b)/4)
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c))), len(b)), b)
		return c
	}
	return unsafe.Slice((*float32)(p), len(b)/4)
}

func u16View(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%2 != 0 {
		c := make([]uint16, len(b)/2)
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(c))), len(b)), b)
		return c
	}
	return unsafe.Slice((*uint16)(p), len(b)/2)
}

// bf16 is the upper half of a float32, so widening is a shift.
func bf16(v uint16) float32 { return math.Float32frombits(uint32(v) << 16) }

// f16Table maps every half-precision bit pattern to its float32 value: one 256 KiB table
// lookup is cheaper in plain Go than decoding exponent and mantissa per element.
var f16Table = func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		t[i] = tensor.F16ToF32(uint16(i))
	}
	return &t
}()
