package kernels

import (
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// go test ./kernels -run '^$' -bench . -cpu 1,2
func benchMat(b *testing.B, dt tensor.DType, rows, cols int) Mat {
	rng := rand.New(rand.NewPCG(1, 1))
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = float32(rng.NormFloat64())
	}
	nb, _ := dt.BytesFor(rows * cols)
	data := make([]byte, nb)
	if dt == tensor.F32 {
		copy(data, tensor.Bytes(src))
	} else if err := tensor.Quantize(dt, src, data); err != nil {
		b.Fatal(err)
	}
	m, err := NewMat(dt, rows, cols, data)
	if err != nil {
		b.Fatal(err)
	}
	return m
}

func benchMatVec(b *testing.B, dt tensor.DType) {
	const rows, cols = 1536, 576
	m := benchMat(b, dt, rows, cols)
	p := NewPool(runtime.GOMAXPROCS(0))
	defer p.Close()
	s := NewScratch(p.Threads())
	x, out := make([]float32, cols), make([]float32, rows)
	b.SetBytes(int64(len(m.Data)))
	for b.Loop() {
		MatVec(p, out, &m, x, s)
	}
}

func BenchmarkMatVecF32(b *testing.B)  { benchMatVec(b, tensor.F32) }
func BenchmarkMatVecBF16(b *testing.B) { benchMatVec(b, tensor.BF16) }
func BenchmarkMatVecF16(b *testing.B)  { benchMatVec(b, tensor.F16) }
func BenchmarkMatVecQ8_0(b *testing.B) { benchMatVec(b, tensor.Q8_0) }
func BenchmarkMatVecQ4_1(b *testing.B) { benchMatVec(b, tensor.Q4_1) }

func benchMatMul(b *testing.B, dt tensor.DType) {
	const rows, cols, n = 576, 576, 64
	m := benchMat(b, dt, rows, cols)
	p := NewPool(runtime.GOMAXPROCS(0))
	defer p.Close()
	s := NewScratch(p.Threads())
	x, out := make([]float32, n*cols), make([]float32, n*rows)
	for b.Loop() {
		MatMul(p, out, &m, x, n, s)
	}
	b.ReportMetric(2*rows*cols*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkMatMulF32(b *testing.B)  { benchMatMul(b, tensor.F32) }
func BenchmarkMatMulBF16(b *testing.B) { benchMatMul(b, tensor.BF16) }
