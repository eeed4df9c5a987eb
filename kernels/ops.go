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

// SiLUMul computes gate[i] = silu(gate[i])·up[i], the SwiGLU activation, in place, as
// ggml's vectorized swiglu does: silu(x) = x/(1+e^−x) with e^−x from ggml_v_expf (below).
func SiLUMul(gate, up []float32) {
	up = up[:len(gate)]
	// The vector code has the AVX-512 build's exp (see expGGML); with the AVX2 one the
	// scalar formula keeps the bits.
	if ggmlAVX512 && simdSiLUMul(gate, up) { // AVX2 (simd_amd64.go, GOEXPERIMENT=simd)
		return
	}
	for i, g := range gate {
		gate[i] = g / (1 + expGGML(-g)) * up[i]
	}
}

// expGGML is ggml_v_expf, the exp approximation of ggml's SIMD code (within ~2 ulp of exp),
// in the variant of the build llama.cpp runs on this CPU (ggmlAVX512): x = n·ln2 + b with n
// integral, e^b from a degree-5 polynomial in fused multiply-adds, scaled by 2ⁿ. The AVX2
// build leaves the polynomial's constant 1 out and adds it in the final fused scaling.
// Matching it, not exp, is what keeps SwiGLU outputs bit-identical to ggml's.
func expGGML(x float32) float32 {
	const shift = 0x1.8p23
	z := fma32(x, 0x1.715476p+0, shift)
	n := z - shift
	b := fma32(-n, 0x1.7f7d1cp-20, fma32(-n, 0x1.62e4p-1, x))
	u := b * b
	hi := fma32(fma32(0x1.0e4020p-7, b, 0x1.573e2ep-5), u, fma32(0x1.555e66p-3, b, 0x1.fffdb6p-2))
	if !ggmlAVX512 {
		return expGGMLAVX2(z, n, fma32(hi, u, 0x1.ffffecp-1*b))
	}
	j := fma32(hi, u, fma32(0x1.ffffecp-1, b, 1))
	if n >= -126 && n <= 126 {
		return j * math.Float32frombits(uint32(int32(n)+127)<<23)
	}
	if n > 192 {
		return float32(math.Inf(1))
	}
	if n < -192 {
		return 0
	}
	return float32(math.Ldexp(float64(j), int(n))) // _mm512_scalef_ps: j·2ⁿ rounded once
}

// expGGMLAVX2 finishes the AVX2 variant: e^x = 2ⁿ + 2ⁿ·j, with 2ⁿ built in the exponent bits
// (split in two factors where n leaves the normal range), as ggml's integer arithmetic does.
func expGGMLAVX2(z, n, j float32) float32 {
	e := math.Float32bits(z) << 23
	if n >= -126 && n <= 126 {
		k := math.Float32frombits(e + math.Float32bits(1))
		return fma32(j, k, k)
	}
	var g uint32
	if n <= 0 {
		g = 0x82000000
	}
	s1 := math.Float32frombits(g + 0x7f000000)
	if n > 192 || n < -192 {
		return s1 * s1
	}
	s2 := math.Float32frombits(e - g)
	return fma32(s2, j, s2) * s1
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
	for i := asmAdd(y, x); i < len(y); i++ { // AVX2 (gemm_amd64.s), then the rest
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
	if simdRopeHalf(x, cos, sin) { // AVX2 (simd_amd64.go, GOEXPERIMENT=simd)
		return
	}
	h := len(x) / 2
	a, b := x[:h:h], x[h:2*h:2*h]
	cos, sin = cos[:h], sin[:h]
	for i := range a {
		a[i], b[i] = rotate(a[i], b[i], cos[i], sin[i])
	}
}

// RopeInterleaved rotates one head in place, pairing elements 2i and 2i+1: llama.cpp's
// NORM mode, used for llama-architecture GGUF files, whose converter permuted the Q and K
// rows so that this pairing equals the Hugging Face one.
func RopeInterleaved(x, cos, sin []float32) {
	h := len(x) / 2
	cos, sin = cos[:h], sin[:h]
	x = x[:2*h]
	for i := asmRopeInterleaved(x, cos, sin); i < h; i++ { // AVX2 (gemm_amd64.s), then the rest
		x[2*i], x[2*i+1] = rotate(x[2*i], x[2*i+1], cos[i], sin[i])
	}
}

// ArgMax returns the first index of x's largest value, or -1 where x is empty or holds
// only −Inf; nan reports a NaN in x (idx is then -1). Why by hand: a sampler picks its
// greedy token from a whole vocabulary of logits each step, for every verified position
// of a speculative step (SmolLM2: five rows of 49152), on the calling thread; the Go loop
// takes about 1 ns a value. BenchmarkArgMax.
func ArgMax(x []float32) (idx int, nan bool) {
	best, bestV := -1, float32(math.Inf(-1))
	start := 0
	if i, isNaN, ok := asmArgMax(x); ok {
		if isNaN {
			return -1, true
		}
		start = len(x) &^ 31
		if x[i] > bestV {
			best, bestV = i, x[i]
		}
	}
	for i := start; i < len(x); i++ {
		v := x[i]
		if v != v {
			return -1, true
		}
		if v > bestV {
			best, bestV = i, v
		}
	}
	return best, false
}

// rotate turns the pair (x0, x1) by the angle with cosine c and sine s, with the rounding
// of ggml's rope as GCC compiles it (contracting x0·c − x1·s into one fused multiply-add
// of the first product).
func rotate(x0, x1, c, s float32) (float32, float32) {
	return fma32(x0, c, -(x1 * s)), fma32(x0, s, x1*c)
}

// RMSNormGGML is RMSNorm computed as ggml computes it, bit for bit: each square rounded to
// float32 and summed in float64, the mean and eps added in float32, scale = 1/sqrtf(·),
// out = (x·scale)·w. On models whose activations are quantized to 8 bits before every
// product, a one-ulp difference here moves logits by hundredths (see model's parity test).
func RMSNormGGML(out, x, w []float32, eps float64) {
	w = w[:len(x)]
	out = out[:len(x)]
	var sum float64
	for _, v := range x {
		sum += float64(v * v)
	}
	rmsScale(out, x, w, sum, eps)
}

// RMSNormRowsGGML is RMSNormGGML on each row of x (rows of len(w) values) into out, the
// same bits. Each row's float64 sum of squares is one chain of adds in order (ggml's), so a
// row waits on each add's latency; the assembly runs four rows' chains interleaved. The
// norms of a pass run on the calling thread while the pool's workers wait.
// BenchmarkRMSNormRows: five rows of 576 values 3.4 µs a row at a time, 2.4 here (Xeon
// model 207).
func RMSNormRowsGGML(out, x, w []float32, eps float64) {
	d := len(w)
	n := len(x) / d
	r := 0
	var sums [4]float64
	for ; r+4 <= n; r += 4 {
		if !asmSumSquares4(x[r*d:(r+4)*d], d, &sums) {
			break
		}
		for k, sum := range sums {
			rmsScale(out[(r+k)*d:(r+k+1)*d], x[(r+k)*d:(r+k+1)*d], w, sum, eps)
		}
	}
	for ; r < n; r++ {
		RMSNormGGML(out[r*d:(r+1)*d], x[r*d:(r+1)*d], w, eps)
	}
}

// rmsScale is RMSNormGGML after its sum of squares: out = (x·scale)·w.
func rmsScale(out, x, w []float32, sum, eps float64) {
	w = w[:len(x)]
	out = out[:len(x)]
	mean := float32(sum / float64(len(x)))
	scale := 1 / float32(math.Sqrt(float64(mean+float32(eps))))
	for i := asmScaleMul(out, x, w, scale); i < len(x); i++ { // AVX2, then the rest
		out[i] = x[i] * scale * w[i]
	}
}

// Rope computes rotary angles as ggml's rope does: the angle of pair i at position p is
// FreqScale·(θ_i/Factors[i]) with θ_0 = p and θ_{i+1} = θ_i·ThetaScale in float32, and
// cos/sin as glibc's cosf/sinf round them (trig32.go). At large positions float32 angles lose phase (HF transformers
// computes them in float32 as well); matching ggml's rounding is what parity needs.
type Rope struct {
	ThetaScale float32   // base^(−2/dim)
	FreqScale  float32   // 1/linear scaling factor; 1 without scaling
	Factors    []float32 // per-pair frequency divisors (llama3 scaling), or nil
}

// NewRope is the rotation of head dimension dim with base frequency base.
func NewRope(dim int, base, freqScale float64, factors []float32) Rope {
	ts := float32(math.Pow(float64(float32(base)), float64(float32(-2)/float32(dim))))
	return Rope{ThetaScale: ts, FreqScale: float32(freqScale), Factors: factors}
}

// Angles fills cos[i], sin[i] for position pos.
func (r *Rope) Angles(cos, sin []float32, pos int) {
	sin = sin[:len(cos)]
	theta := float32(pos)
	for i := range cos {
		t := theta
		if r.Factors != nil {
			t /= r.Factors[i]
		}
		t *= r.FreqScale
		cos[i], sin[i] = cosf32(t), sinf32(t)
		theta *= r.ThetaScale
	}
}
