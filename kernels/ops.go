package kernels

import "math"

// Softmax replaces x with exp(x−max)/Σexp(x−max) in place; subtracting the max keeps exp
// from overflowing.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := float32(math.Exp(float64(v - mx)))
		x[i] = e
		sum += float64(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// SiLUMul computes gate[i] = silu(gate[i])·up[i], the SwiGLU activation, in place.
func SiLUMul(gate, up []float32) {
	up = up[:len(gate)]
	for i, g := range gate {
		gate[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

// AddScaled does y += a·x.
func AddScaled(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	if simdAddScaled(y, a, x) { // AVX2 (simd_amd64.go, GOEXPERIMENT=simd)
		return
	}
	for i := range y {
		y[i] += a * x[i]
	}
}

// Add does y += x.
func Add(y, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += x[i]
	}
}

// RopeFreqs returns the inverse frequencies θ_i = base^(−2i/dim), i < dim/2, of rotary
// position embeddings; scaling adjusts them (see the model package).
func RopeFreqs(dim int, base float64) []float64 {
	f := make([]float64, dim/2)
	for i := range f {
		f[i] = 1 / math.Pow(base, float64(2*i)/float64(dim))
	}
	return f
}

// RopeAngles fills cos[i], sin[i] with the rotation of position pos at frequency freqs[i].
// Angles are formed in float64: pos·θ reaches 10⁵ radians, where float32 loses the phase.
func RopeAngles(cos, sin []float32, pos int, freqs []float64) {
	cos, sin = cos[:len(freqs)], sin[:len(freqs)]
	for i, f := range freqs {
		s, c := math.Sincos(float64(pos) * f)
		cos[i], sin[i] = float32(c), float32(s)
	}
}

// RopeHalf rotates one head in place, pairing element i with i+d/2: the rotate_half layout of
// Hugging Face Llama/Qwen and llama.cpp's NEOX mode.
func RopeHalf(x, cos, sin []float32) {
	h := len(x) / 2
	a, b := x[:h:h], x[h:2*h:2*h]
	cos, sin = cos[:h], sin[:h]
	for i := range a {
		x0, x1 := a[i], b[i]
		a[i] = x0*cos[i] - x1*sin[i]
		b[i] = x0*sin[i] + x1*cos[i]
	}
}

// RopeInterleaved rotates one head in place, pairing elements 2i and 2i+1: llama.cpp's
// NORM mode, used for llama-architecture GGUF files, whose converter permuted the Q and K
// rows so that this pairing equals the Hugging Face one.
func RopeInterleaved(x, cos, sin []float32) {
	h := len(x) / 2
	cos, sin = cos[:h], sin[:h]
	x = x[:2*h]
	for i := range h {
		x0, x1 := x[2*i], x[2*i+1]
		x[2*i] = x0*cos[i] - x1*sin[i]
		x[2*i+1] = x0*sin[i] + x1*cos[i]
	}
}
