package kernels

import (
	"math"
	"os"

	"github.com/tokenwise/tokenwise/tensor"
)

// MatVec computes out[r] = W[r,:]·x for every row r: the decode-step product, where every
// weight is read once for one token. Rows are split across the pool's workers. scratch
// (from NewScratch) holds per-worker row buffers for dtypes that are dequantized first.
func MatVec(p *Pool, out []float32, w *Mat, x []float32, s *Scratch) {
	MatMulMany(p, []Product{{w, out}}, x, 1, s)
}

// Scratch holds one float32 buffer per worker, grown on demand, so that kernels which
// dequantize a row first allocate nothing per call.
type Scratch struct {
	bufs [][]float32
	act  qact      // activations quantized for block-quantized weights, shared by the workers
	actK qactK     // the same for k-quant weights (Q8_K)
	xr   []float32 // activations rounded to f16/bf16
	// groups are MatVecSubset's four-row groups.
	groups []int32
}

// NewScratch makes scratch space for a pool of the given size.
func NewScratch(threads int) *Scratch { return &Scratch{bufs: make([][]float32, threads)} }

func (s *Scratch) buf(worker, n int) []float32 {
	if cap(s.bufs[worker]) < n {
		s.bufs[worker] = make([]float32, n)
	}
	return s.bufs[worker][:n]
}

// useF16RowDot selects the f16 and bf16 matrix×vector products row by row in ggml's order
// (asmMatVecF16, asmMatVecBF16) over the four-row kernels; TOKENWISE_F16_DECODE=rows4
// selects the latter, to measure one against the other.
var useF16RowDot = os.Getenv("TOKENWISE_F16_DECODE") != "rows4"

func matVecRows(out []float32, w *Mat, x []float32, lo, hi int, tmp []float32) {
	if w.DType == tensor.F16 && useF16RowDot && asmMatVecF16(out[lo:hi], w.u16[lo*w.Cols:hi*w.Cols], x) { // gemm_amd64.s
		return
	}
	if w.DType == tensor.BF16 && useF16RowDot && asmMatVecBF16(out[lo:hi], w.u16[lo*w.Cols:hi*w.Cols], x) {
		return
	}
	if simdMatVecRows(out, w, x, lo, hi) { // AVX2 (simd_amd64.go, GOEXPERIMENT=simd)
		return
	}
	n := w.Cols
	r := lo
	switch w.DType {
	case tensor.F32:
		for ; r+4 <= hi; r += 4 {
			out[r], out[r+1], out[r+2], out[r+3] = dot4F32(w.f32[r*n:(r+4)*n], n, x)
		}
		for ; r < hi; r++ {
			out[r] = Dot(w.f32[r*n:(r+1)*n], x)
		}
	case tensor.BF16:
		for ; r+4 <= hi; r += 4 {
			out[r], out[r+1], out[r+2], out[r+3] = dot4BF16(w.u16[r*n:(r+4)*n], n, x)
		}
		for ; r < hi; r++ {
			out[r] = dotBF16(w.u16[r*n:(r+1)*n], x)
		}
	case tensor.F16:
		for ; r+4 <= hi; r += 4 {
			out[r], out[r+1], out[r+2], out[r+3] = dot4F16(w.u16[r*n:(r+4)*n], n, x)
		}
		for ; r < hi; r++ {
			out[r] = dotF16(w.u16[r*n:(r+1)*n], x)
		}
	case tensor.Q8_0:
		for ; r < hi; r++ {
			out[r] = dotQ8_0(w.Data[r*w.rowBytes:(r+1)*w.rowBytes], x)
		}
	case tensor.Q4_0:
		for ; r < hi; r++ {
			out[r] = dotQ4_0(w.Data[r*w.rowBytes:(r+1)*w.rowBytes], x)
		}
	case tensor.Q4_1:
		for ; r < hi; r++ {
			out[r] = dotQ4_1(w.Data[r*w.rowBytes:(r+1)*w.rowBytes], x)
		}
	default:
		// k-quants: dequantize one row, then a plain dot. NewMat admitted the dtype and
		// checked the sizes, so Dequantize cannot fail here.
		for ; r < hi; r++ {
			_ = w.Row(r, tmp)
			out[r] = Dot(tmp, x)
		}
	}
}

// Dot is the float32 inner product of a and b[:len(a)], with four independent
// accumulators so that consecutive adds do not wait on each other.
func Dot(a, b []float32) float32 {
	b = b[:len(a)]
	if v, ok := simdDot(a, b); ok { // AVX2 (simd_amd64.go, GOEXPERIMENT=simd)
		return v
	}
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		a4, b4 := a[i:i+4:i+4], b[i:i+4:i+4]
		s0 += a4[0] * b4[0]
		s1 += a4[1] * b4[1]
		s2 += a4[2] * b4[2]
		s3 += a4[3] * b4[3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// dot4F32 does four rows (w holds 4×n values) against one x: each x element is loaded
// once for four rows, the main saving of a row-blocked matvec.
func dot4F32(w []float32, n int, x []float32) (s0, s1, s2, s3 float32) {
	w0, w1, w2, w3 := w[:n:n], w[n:2*n:2*n], w[2*n:3*n:3*n], w[3*n:4*n:4*n]
	x = x[:n]
	for i, xv := range x {
		s0 += w0[i] * xv
		s1 += w1[i] * xv
		s2 += w2[i] * xv
		s3 += w3[i] * xv
	}
	return
}

func dotBF16(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	var s0, s1 float32
	i := 0
	for ; i+2 <= len(w); i += 2 {
		s0 += bf16(w[i]) * x[i]
		s1 += bf16(w[i+1]) * x[i+1]
	}
	for ; i < len(w); i++ {
		s0 += bf16(w[i]) * x[i]
	}
	return s0 + s1
}

func dot4BF16(w []uint16, n int, x []float32) (s0, s1, s2, s3 float32) {
	w0, w1, w2, w3 := w[:n:n], w[n:2*n:2*n], w[2*n:3*n:3*n], w[3*n:4*n:4*n]
	x = x[:n]
	for i, xv := range x {
		s0 += bf16(w0[i]) * xv
		s1 += bf16(w1[i]) * xv
		s2 += bf16(w2[i]) * xv
		s3 += bf16(w3[i]) * xv
	}
	return
}

func dotF16(w []uint16, x []float32) float32 {
	x = x[:len(w)]
	t := f16Table
	var s float32
	for i, v := range w {
		s += t[v] * x[i]
	}
	return s
}

func dot4F16(w []uint16, n int, x []float32) (s0, s1, s2, s3 float32) {
	w0, w1, w2, w3 := w[:n:n], w[n:2*n:2*n], w[2*n:3*n:3*n], w[3*n:4*n:4*n]
	x = x[:n]
	t := f16Table // a *[65536]float32 indexed by uint16: no bounds check
	for i, xv := range x {
		s0 += t[w0[i]] * xv
		s1 += t[w1[i]] * xv
		s2 += t[w2[i]] * xv
		s3 += t[w3[i]] * xv
	}
	return
}

// dotQ8_0 works on the quantized blocks directly: per block of 32, sum q[i]·x[i] then scale
// once by d, so the row is never widened to float32 in memory.
func dotQ8_0(row []byte, x []float32) float32 {
	var s float32
	for b := 0; b+34 <= len(row); b += 34 {
		blk := row[b : b+34 : b+34]
		xb := x[b/34*32 : b/34*32+32 : b/34*32+32]
		d := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		q := blk[2:34:34]
		var a0, a1, a2, a3 float32
		for i := 0; i < 32; i += 4 {
			a0 += float32(int8(q[i])) * xb[i]
			a1 += float32(int8(q[i+1])) * xb[i+1]
			a2 += float32(int8(q[i+2])) * xb[i+2]
			a3 += float32(int8(q[i+3])) * xb[i+3]
		}
		s += d * ((a0 + a1) + (a2 + a3))
	}
	return s
}

// dotQ4_0: value = d·(nibble−8); low nibbles are elements 0..15 of the block, high 16..31.
func dotQ4_0(row []byte, x []float32) float32 {
	var s float32
	for b, k := 0, 0; b+18 <= len(row); b, k = b+18, k+32 {
		blk := row[b : b+18 : b+18]
		xb := x[k : k+32 : k+32]
		d := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		q := blk[2:18:18]
		var a0, a1 float32
		for i, v := range q {
			a0 += float32(int(v&15)-8) * xb[i]
			a1 += float32(int(v>>4)-8) * xb[i+16]
		}
		s += d * (a0 + a1)
	}
	return s
}

// dotQ4_1: value = d·nibble + m, so a block contributes d·Σq·x + m·Σx.
func dotQ4_1(row []byte, x []float32) float32 {
	var s float32
	for b, k := 0, 0; b+20 <= len(row); b, k = b+20, k+32 {
		blk := row[b : b+20 : b+20]
		xb := x[k : k+32 : k+32]
		d := f16Table[uint16(blk[0])|uint16(blk[1])<<8]
		m := f16Table[uint16(blk[2])|uint16(blk[3])<<8]
		q := blk[4:20:20]
		var a0, a1, sx float32
		for i, v := range q {
			x0, x1 := xb[i], xb[i+16]
			a0 += float32(v&15) * x0
			a1 += float32(v>>4) * x1
			sx += x0 + x1
		}
		s += d*(a0+a1) + m*sx
	}
	return s
}

// RMSNorm writes out = x / sqrt(mean(x²) + eps) * w. The sum of squares is kept in float64:
// hidden sizes reach thousands and activations can be large.
func RMSNorm(out, x, w []float32, eps float64) {
	w = w[:len(x)]
	out = out[:len(x)]
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(ss/float64(len(x))+eps))
	for i, v := range x {
		out[i] = v * scale * w[i]
	}
}

// dotBF16Lanes16 is the arithmetic of the AVX-512 bf16 row kernel (dotRowsBF16Z): ggml's
// 16-lane ggml_vec_dot_f16 order with bf16 weights; len(x) a multiple of 64.
func dotBF16Lanes16(w []uint16, x []float32) float32 {
	var acc [4][16]float32
	w = w[:len(x)]
	for i := 0; i+64 <= len(x); i += 64 {
		for j := range 4 {
			for l := range 16 {
				p := i + 16*j + l
				acc[j][l] = fma32(bf16(w[p]), x[p], acc[j][l])
			}
		}
	}
	return reduceDotF16(&acc, true, x, nil, len(x))
}
