package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// TestDotAddScaledTails checks Dot and AddScaled (SIMD in GOEXPERIMENT=simd builds) on lengths
// around the vector width against float64 references.
func TestDotAddScaledTails(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 31, 33, 64, 67, 130} {
		a, b := randVec(rng, n), randVec(rng, n+3)
		w := make([]float64, n)
		for i, v := range a {
			w[i] = float64(v)
		}
		checkDot(t, "Dot", Dot(a, b), w, b)
		y := randVec(rng, n)
		want := make([]float64, n)
		for i := range y {
			want[i] = float64(y[i]) + 0.375*float64(b[i])
		}
		AddScaled(y, 0.375, b)
		for i := range y {
			if math.Abs(float64(y[i])-want[i]) > 1e-6*(1+math.Abs(want[i])) {
				t.Fatalf("AddScaled n=%d [%d]: got %g, want %g", n, i, y[i], want[i])
			}
		}
	}
}

// TestF16WeightsAllValues multiplies every finite half-precision bit pattern, as a weight,
// by one-hot activations: each product must be the exact float32 value of the half,
// subnormals included (the SIMD widening does them in integer arithmetic).
func TestF16WeightsAllValues(t *testing.T) {
	const cols = 16
	var vals []uint16
	for h := range 1 << 16 {
		if h&0x7c00 != 0x7c00 { // skip Inf and NaN
			vals = append(vals, uint16(h))
		}
	}
	for len(vals)%cols != 0 {
		vals = append(vals, 0)
	}
	rows := len(vals) / cols
	data := make([]byte, 2*len(vals))
	for i, v := range vals {
		data[2*i], data[2*i+1] = byte(v), byte(v>>8)
	}
	w, err := NewMat(tensor.F16, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	p := NewPool(2)
	defer p.Close()
	s := NewScratch(p.Threads())
	out := make([]float32, 2*rows)
	for j := range cols {
		// One token (the matrix×vector kernels) and two (rows widened, then multiplied).
		for n := 1; n <= 2; n++ {
			x := make([]float32, n*cols)
			x[j], x[(n-1)*cols+j] = 1, 1
			MatMul(p, out, &w, x, n, s)
			for r := range rows {
				h := vals[r*cols+j]
				if want := tensor.F16ToF32(h); out[(n-1)*rows+r] != want {
					t.Fatalf("f16 %#04x, %d tokens: weight read as %g, want %g", h, n, out[(n-1)*rows+r], want)
				}
			}
		}
	}
}

// TestSiLUMulSIMDMatchesScalar: the vector SwiGLU gives the scalar expGGML formula's bits
// for gates across the whole useful range, including |gate| > 87 (the scalar fallback
// inside the vector loop) and lengths with tails.
func TestSiLUMulSIMDMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	const n = 100003
	gate, up := make([]float32, n), make([]float32, n)
	for i := range gate {
		switch i % 3 {
		case 0:
			gate[i] = float32(rng.NormFloat64() * 3)
		case 1:
			gate[i] = float32(rng.Float64()*240 - 120)
		default:
			gate[i] = float32(rng.NormFloat64() * 1e-3)
		}
		up[i] = float32(rng.NormFloat64())
	}
	want := make([]float32, n)
	for i, g := range gate {
		want[i] = g / (1 + expGGML(-g)) * up[i]
	}
	got := append([]float32(nil), gate...)
	SiLUMul(got, up)
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("gate %g, up %g: SiLUMul %g, scalar formula %g", gate[i], up[i], got[i], want[i])
		}
	}
}

// TestRopeHalfMatchesRotate: RopeHalf (eight pairs at a time in GOEXPERIMENT=simd builds)
// gives rotate's bits for every pair, on head sizes with and without a tail past the vector
// loop and angles from real positions, many heads over.
func TestRopeHalfMatchesRotate(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	for _, d := range []int{2, 16, 64, 128, 134} {
		freqs := RopeFreqs(d, 1e6)
		cos, sin := make([]float32, d/2), make([]float32, d/2)
		for head := range 4000 {
			RopeAngles(cos, sin, head*37%40960, freqs)
			x := randVec(rng, d)
			if head%7 == 0 {
				x[0], x[d/2] = 0, float32(math.Copysign(0, -1)) // signed zeros
			}
			got := append([]float32(nil), x...)
			RopeHalf(got, cos, sin)
			for i := range d / 2 {
				w0, w1 := rotate(x[i], x[i+d/2], cos[i], sin[i])
				if math.Float32bits(got[i]) != math.Float32bits(w0) || math.Float32bits(got[i+d/2]) != math.Float32bits(w1) {
					t.Fatalf("d %d head %d pair %d: RopeHalf %g,%g, rotate %g,%g", d, head, i, got[i], got[i+d/2], w0, w1)
				}
			}
		}
	}
}

// TestRopeInterleavedMatchesRotate: RopeInterleaved (four pairs at a time in the AVX2
// assembly) gives rotate's bits for every pair (2i, 2i+1), head sizes with and without a tail
// past the vector loop, signed zeros, angles from real positions.
func TestRopeInterleavedMatchesRotate(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	for _, d := range []int{2, 8, 10, 64, 128, 134} {
		freqs := RopeFreqs(d, 1e4)
		cos, sin := make([]float32, d/2), make([]float32, d/2)
		for head := range 4000 {
			RopeAngles(cos, sin, head*37%40960, freqs)
			x := randVec(rng, d)
			if head%7 == 0 {
				x[0], x[1] = 0, float32(math.Copysign(0, -1)) // signed zeros
			}
			got := append([]float32(nil), x...)
			RopeInterleaved(got, cos, sin)
			for i := range d / 2 {
				w0, w1 := rotate(x[2*i], x[2*i+1], cos[i], sin[i])
				if math.Float32bits(got[2*i]) != math.Float32bits(w0) || math.Float32bits(got[2*i+1]) != math.Float32bits(w1) {
					t.Fatalf("d %d head %d pair %d: RopeInterleaved %g,%g, rotate %g,%g", d, head, i, got[2*i], got[2*i+1], w0, w1)
				}
			}
		}
	}
}

// BenchmarkRopeInterleaved: one 64-wide head.
func BenchmarkRopeInterleaved(b *testing.B) {
	const d = 64
	cos, sin := make([]float32, d/2), make([]float32, d/2)
	RopeAngles(cos, sin, 100, RopeFreqs(d, 1e4))
	x := randVec(rand.New(rand.NewPCG(1, 1)), d)
	for b.Loop() {
		RopeInterleaved(x, cos, sin)
	}
}

// ArgMax (32 values at a time in the AVX2 assembly, then a Go tail) returns the first index
// of the largest value as a scalar scan does: ties, signed zeros, all −Inf, NaN anywhere
// (in the vector part and in the tail), lengths around 32.
func TestArgMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	scalar := func(x []float32) (int, bool) {
		best, bestV := -1, float32(math.Inf(-1))
		for i, v := range x {
			if v != v {
				return -1, true
			}
			if v > bestV {
				best, bestV = i, v
			}
		}
		return best, false
	}
	for _, n := range []int{0, 1, 31, 32, 33, 64, 100, 49152, 49159} {
		for c := range 40 {
			x := randVec(rng, n)
			switch {
			case c == 1 && n > 0:
				for i := range x {
					x[i] = float32(math.Inf(-1))
				}
			case c == 2 && n > 3:
				x[n/3], x[n-1] = 1e30, 1e30 // a tie: the first wins
			case c == 3 && n > 2:
				for i := range x {
					x[i] = -1
				}
				x[n/2], x[n-1] = float32(math.Copysign(0, -1)), 0
			case c == 4 && n > 0:
				x[rng.IntN(n)] = float32(math.NaN())
			case c == 5 && n > 0:
				x[n-1] = float32(math.NaN())
			case c == 6 && n > 0:
				x[rng.IntN(n)] = float32(math.Inf(1))
			}
			gi, gn := ArgMax(x)
			wi, wn := scalar(x)
			if gi != wi || gn != wn {
				t.Fatalf("n %d case %d: ArgMax %d, %v; scalar scan %d, %v", n, c, gi, gn, wi, wn)
			}
		}
	}
}

// BenchmarkArgMax: one row of SmolLM2's 49152 logits.
func BenchmarkArgMax(b *testing.B) {
	x := randVec(rand.New(rand.NewPCG(1, 2)), 49152)
	for b.Loop() {
		ArgMax(x)
	}
}
