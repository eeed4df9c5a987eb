package tensor

import (
	"math/rand/v2"
	"testing"
)

// go test ./tensor -run X -bench . : dequantize throughput, reported per output element.
func BenchmarkDequantize(b *testing.B) {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, dt := range []DType{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K} {
		size, _ := dt.BytesFor(n)
		src := make([]byte, size)
		if dt.Quantized() && dt.BlockSize() == QK_K {
			for i := range src {
				src[i] = byte(r.Uint32())
			}
		} else if err := Quantize(dt, x, src); err != nil {
			b.Fatal(err)
		}
		dst := make([]float32, n)
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				Dequantize(dt, src, dst)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/elem")
		})
	}
}

func BenchmarkQuantize(b *testing.B) {
	const n = 1 << 20
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	for _, dt := range []DType{F16, BF16, Q8_0, Q4_0} {
		size, _ := dt.BytesFor(n)
		dst := make([]byte, size)
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(4 * n)
			for b.Loop() {
				Quantize(dt, x, dst)
			}
		})
	}
}
