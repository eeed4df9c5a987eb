package kernels

import (
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// go test ./kernels -run '^$' -bench 'RowDot' (with and without GOEXPERIMENT=simd)
func benchRowDot(b *testing.B, dt tensor.DType) {
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, cols = 64, 2048
	src := randVec(rng, rows*cols)
	nb, _ := dt.BytesFor(rows * cols)
	data := make([]byte, nb)
	if err := tensor.Quantize(dt, src, data); err != nil {
		b.Fatal(err)
	}
	w, err := NewMat(dt, rows, cols, data)
	if err != nil {
		b.Fatal(err)
	}
	var a qact
	a.quantize(randVec(rng, cols), true)
	out := make([]float32, rows)
	b.SetBytes(int64(nb))
	for b.Loop() {
		quantRows(out, &w, &a, 1, 0, rows)
	}
}

func BenchmarkRowDotQ8_0(b *testing.B) { benchRowDot(b, tensor.Q8_0) }
func BenchmarkRowDotQ4_1(b *testing.B) { benchRowDot(b, tensor.Q4_1) }

func benchQuantMatMul(b *testing.B, dt tensor.DType) {
	const rows, cols, n = 576, 576, 64
	m := benchMat(b, dt, rows, cols)
	p := NewPool(1)
	defer p.Close()
	s := NewScratch(1)
	x, out := randVec(rand.New(rand.NewPCG(2, 2)), n*cols), make([]float32, n*rows)
	for b.Loop() {
		MatMul(p, out, &m, x, n, s)
	}
	b.ReportMetric(2*rows*cols*n*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

func BenchmarkMatMulQ8_0(b *testing.B) { benchQuantMatMul(b, tensor.Q8_0) }
func BenchmarkMatMulQ4_1(b *testing.B) { benchQuantMatMul(b, tensor.Q4_1) }
