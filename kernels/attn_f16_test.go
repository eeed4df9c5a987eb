package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// randomF32 returns values spread over many binades, including ones below half precision's
// normal range (2⁻¹⁴) and a few exact halfway cases of f16 rounding.
func randomF32(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch i % 4 {
		case 0:
			x[i] = float32(r.NormFloat64())
		case 1:
			x[i] = float32(r.NormFloat64() * math.Ldexp(1, -14-r.IntN(12)))
		case 2:
			x[i] = float32(r.NormFloat64() * math.Ldexp(1, r.IntN(14)))
		default: // an f16 value plus half its ulp: a tie
			h := tensor.F16ToF32(tensor.F32ToF16(float32(r.NormFloat64())))
			x[i] = math.Float32frombits(math.Float32bits(h) | 1<<12)
		}
	}
	return x
}

// TestRoundF16: RoundF16 (vector and scalar code) gives exactly the f16 value that
// tensor.F32ToF16 rounds to.
func TestRoundF16(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := randomF32(r, 4099)
	got := append([]float32(nil), x...)
	RoundF16(got)
	for i, v := range x {
		want := tensor.F16ToF32(tensor.F32ToF16(v))
		if math.Float32bits(got[i]) != math.Float32bits(want) || math.Float32bits(roundF16(v)) != math.Float32bits(want) {
			t.Fatalf("%g (%#x): RoundF16 %g, roundF16 %g, want %g", v, math.Float32bits(v), got[i], roundF16(v), want)
		}
	}
}

// TestDotF16: the vector code sums in exactly ggml's order (the scalar emulation), for
// head sizes with and without a tail, and both lane orders stay within float32 rounding of
// the exact dot product.
func TestDotF16(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{64, 128, 80, 96, 256, 70, 5} {
		q := randomF32(r, n)
		RoundF16(q)
		k := make([]uint16, n)
		F16Encode(k, randomF32(r, n))
		var exact, abs float64
		for i := range q {
			p := float64(q[i]) * float64(tensor.F16ToF32(k[i]))
			exact += p
			abs += math.Abs(p)
		}
		got := DotF16(q, k)
		if want := dotF16Lanes(q, k, ggmlAVX512); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("n=%d: DotF16 %v, ggml order %v", n, got, want)
		}
		for _, lanes16 := range []bool{false, true} {
			if d := math.Abs(float64(dotF16Lanes(q, k, lanes16)) - exact); d > 1e-6*abs {
				t.Fatalf("n=%d lanes16=%v: %v, exact %v", n, lanes16, dotF16Lanes(q, k, lanes16), exact)
			}
		}
	}
}

// TestMadScaleRoundF16: vector and scalar code agree bit for bit, and the result is the f16
// rounding of the fused float32 operation.
func TestMadScaleRoundF16(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{64, 19} {
		y := randomF32(r, n)
		RoundF16(y)
		x := make([]uint16, n)
		F16Encode(x, randomF32(r, n))
		a := float32(r.Float64())
		got := append([]float32(nil), y...)
		MadRoundF16(got, a, x)
		for i := range y {
			want := tensor.F16ToF32(tensor.F32ToF16(fma32(tensor.F16ToF32(x[i]), a, y[i])))
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d mad %d: %v, want %v", n, i, got[i], want)
			}
		}
		ScaleRoundF16(got, a)
		for i := range got {
			want := tensor.F16ToF32(tensor.F32ToF16(roundF16(fma32(tensor.F16ToF32(x[i]), a, y[i])) * a))
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d scale %d: %v, want %v", n, i, got[i], want)
			}
		}
	}
}

// TestFlashF16: the online softmax with its f16 accumulator stays within half-precision
// error of exact attention over the same (f16) keys and values: each weight·value product
// is rounded to 2⁻¹¹ relative at most once per position, so 40 positions stay within
// 2⁻⁸ of the largest |v| (measured: ~2⁻¹²).
func TestFlashF16(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const hd, n = 64, 40
	q := randomF32(r, hd)
	for i := range q {
		q[i] = float32(r.NormFloat64())
	}
	kf, vf := make([]float32, n*hd), make([]float32, n*hd)
	for i := range kf {
		kf[i], vf[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	k, v := make([]uint16, n*hd), make([]uint16, n*hd)
	F16Encode(k, kf)
	F16Encode(v, vf)
	q16 := append([]float32(nil), q...)
	RoundF16(q16)
	scale := float32(0.125)
	var f FlashF16
	f.Reset(hd)
	s := make([]float64, n)
	mx := math.Inf(-1)
	for p := range n {
		sc := DotF16(q16, k[p*hd:(p+1)*hd]) * scale
		f.Add(sc, v[p*hd:(p+1)*hd])
		s[p] = float64(sc)
		mx = max(mx, s[p])
	}
	got := make([]float32, hd)
	f.Finish(got)
	var sum float64
	for p := range s {
		s[p] = math.Exp(s[p] - mx)
		sum += s[p]
	}
	for d := range hd {
		var want, vmax float64
		for p := range n {
			vv := float64(tensor.F16ToF32(v[p*hd+d]))
			want += s[p] / sum * vv
			vmax = max(vmax, math.Abs(vv))
		}
		if math.Abs(float64(got[d])-want) > 0x1p-8*vmax {
			t.Fatalf("dim %d: %v, exact %v", d, got[d], want)
		}
	}
}

// TestLibmFloat32: the ports of glibc's sinf, cosf and expf give glibc's bits (glibc 2.36,
// x86-64 with FMA) on inputs where they differ from the correctly rounded result, and stay
// within 1 ulp of the exact function elsewhere.
func TestLibmFloat32(t *testing.T) {
	cases := []struct {
		name string
		f    func(float32) float32
		in   [][2]uint32 // input bits, glibc's output bits
	}{
		{"sinf", sinf32, [][2]uint32{{0x40b19880, 0xbf2b59d8}, {0x42787f0e, 0xbf266ff4}, {0xc282d7ae, 0xbf064975},
			{0x4181b165, 0xbef71b48}, {0x459ebd4e, 0x3e9380f1}, {0xc5da99e6, 0xbf62ebe0}, {0x441ae723, 0xbf285ee3}}},
		{"cosf", cosf32, [][2]uint32{{0xc09d31a2, 0x3e4b5b59}, {0x421f7915, 0xbf10325a}, {0xc0912505, 0xbe33eb88},
			{0xc2cca6f6, 0xbe63cbe2}, {0x456f4503, 0xbe8ec3df}, {0xc5a9b4df, 0xbeb73aa3}, {0xc60c1d7a, 0x3e9ac51f}}},
		{"expf", expf32, [][2]uint32{{0xc12bf3ef, 0x37b46d89}, {0xc1c9ad1f, 0x2d462256}, {0xc1e76887, 0x2a9a3026},
			{0xc1df7b01, 0x2b4fae63}, {0xc199681b, 0x31a1784a}, {0xc1a24fcc, 0x30d430a8}}},
	}
	for _, c := range cases {
		for _, io := range c.in {
			x := math.Float32frombits(io[0])
			if got := c.f(x); math.Float32bits(got) != io[1] {
				t.Errorf("%s(%v): %v (%#x), glibc %v (%#x)", c.name, x, got, math.Float32bits(got), math.Float32frombits(io[1]), io[1])
			}
		}
	}
	exact := map[string]func(float64) float64{"sinf": math.Sin, "cosf": math.Cos, "expf": math.Exp}
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range cases {
		for range 20000 {
			x := float32((r.Float64() - 0.5) * 20000)
			if c.name == "expf" {
				x = float32((r.Float64() - 0.8) * 120)
			}
			got, want := float64(c.f(x)), exact[c.name](float64(x))
			ulp := math.Abs(float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want)))
			if math.Abs(got-want) > ulp {
				t.Fatalf("%s(%v) = %v, exact %v", c.name, x, got, want)
			}
		}
	}
}

// TestExpGGML: ggml's SIMD exp stays within about 2 ulp of exp (ggml documents 1.45 ulp
// plus the final rounding; measured up to 2.05 near e⁵⁰), over the range SiLU feeds it.
// Its exact bits are checked end to end by model's llama.cpp parity test.
func TestExpGGML(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 100000 {
		x := float32((r.Float64() - 0.5) * 160)
		got, want := float64(expGGML(x)), math.Exp(float64(x))
		if want > math.MaxFloat32 {
			if !math.IsInf(got, 1) {
				t.Fatalf("exp(%v) = %v, want +Inf", x, got)
			}
			continue
		}
		ulp := math.Abs(float64(math.Nextafter32(float32(want), float32(math.Inf(1)))) - float64(float32(want)))
		if want < 0x1p-126 {
			ulp = 0x1p-149
		}
		if math.Abs(got-want) > 2.5*ulp {
			t.Fatalf("exp(%v) = %v, exact %v", x, got, want)
		}
	}
}

// TestSiLUMulGGMLBuilds: SwiGLU gives the bits of llama.cpp's AVX-512 build (its zen4 CPU
// library) and of its AVX2 build (haswell), whichever expGGML follows; the inputs are gate
// and up values of SmolLM2-135M's first layer where the two builds differ, with both
// builds' outputs (from their ffn_swiglu tensors).
func TestSiLUMulGGMLBuilds(t *testing.T) {
	cases := [][4]uint32{ // gate, up, AVX-512 result, AVX2 result
		{0x3e52b7a6, 0xbe3b8910, 0xbcaa308e, 0xbcaa308f},
		{0x3f86b768, 0x3e94e9de, 0x3e68591d, 0x3e68591c},
		{0xbe691b6c, 0xbef489ba, 0x3d456f2e, 0x3d456f2c},
		{0x3e9e9a13, 0x3f0360aa, 0x3dbbcce9, 0x3dbbccea},
		{0x3fa2e486, 0xbee52d14, 0xbee3d52d, 0xbee3d52c},
		{0x3f060505, 0x3e8fd6b4, 0x3dbd25f4, 0x3dbd25f5},
	}
	defer func(v bool) { ggmlAVX512 = v }(ggmlAVX512)
	for _, avx512 := range []bool{true, false} {
		ggmlAVX512 = avx512
		gate, up := make([]float32, 16*len(cases)), make([]float32, 16*len(cases))
		for i := range gate { // each case at a scalar and at a vector position
			c := cases[i%len(cases)]
			gate[i], up[i] = math.Float32frombits(c[0]), math.Float32frombits(c[1])
		}
		SiLUMul(gate, up)
		for i, g := range gate {
			c := cases[i%len(cases)]
			want := c[2]
			if !avx512 {
				want = c[3]
			}
			if math.Float32bits(g) != want {
				t.Fatalf("avx512=%v: swiglu(%v, %v) = %v, llama.cpp %v", avx512, math.Float32frombits(c[0]), math.Float32frombits(c[1]), g, math.Float32frombits(want))
			}
		}
	}
}

// TestFlashF16Attend: Attend (the fused assembly passes where they apply) gives the bits of
// Reset, Add per position, Finish, in both of ggml's lane orders, over head sizes the
// assembly takes (64, 128, 256) and one it leaves to the Go loop (96), rows in cache order
// and scattered (a paged cache), with scores spread wide enough for many new maxima.
func TestFlashF16Attend(t *testing.T) {
	defer func(v bool) { ggmlAVX512 = v }(ggmlAVX512)
	r := rand.New(rand.NewPCG(11, 12))
	for _, lanes16 := range []bool{false, true} {
		ggmlAVX512 = lanes16
		for _, hd := range []int{64, 96, 128, 256} {
			for _, n := range []int{1, 2, 7, 65, 300} {
				const kvHeads = 2
				stride := kvHeads * hd
				slots := n + 13
				kf, vf := make([]float32, slots*stride), make([]float32, slots*stride)
				for i := range kf {
					kf[i] = float32(r.NormFloat64() * (1 + r.Float64()))
					vf[i] = float32(r.NormFloat64())
				}
				k, v := make([]uint16, len(kf)), make([]uint16, len(vf))
				F16Encode(k, kf)
				F16Encode(v, vf)
				// Scores of order 1 (softmax weights spread over many positions, so that
				// any wrong score shows), with a few tiny query elements.
				q16 := make([]float32, hd)
				for i := range q16 {
					q16[i] = float32(r.NormFloat64() * math.Ldexp(1, -14*(i%17/16)))
				}
				RoundF16(q16)
				rows := make([]int32, n)
				perm := r.Perm(slots)
				for j := range rows {
					rows[j] = int32(j)
					if n%2 == 1 {
						rows[j] = int32(perm[j])
					}
				}
				off := hd * r.IntN(kvHeads)
				scale := float32(0.0883883)

				var ref FlashF16
				ref.Reset(hd)
				for _, row := range rows {
					s := int(row)*stride + off
					ref.Add(DotF16(q16, k[s:s+hd])*scale, v[s:s+hd])
				}
				want := make([]float32, hd)
				ref.Finish(want)

				var f FlashF16
				got := make([]float32, hd)
				f.Attend(got, q16, k, v, rows, off, stride, scale)
				for d := range hd {
					if math.Float32bits(got[d]) != math.Float32bits(want[d]) {
						t.Fatalf("lanes16 %v, hd %d, n %d: dim %d = %v, want %v", lanes16, hd, n, d, got[d], want[d])
					}
				}
			}
		}
	}
}

// TestFlashF16AttendRowsOutside: a row beyond the cache is refused, not read.
func TestFlashF16AttendRowsOutside(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Attend read past the cache")
		}
	}()
	k := make([]uint16, 4*64)
	var f FlashF16
	f.Attend(make([]float32, 64), make([]float32, 64), k, k, []int32{0, 4}, 0, 64, 1)
}

// TestF16EncodeBits: F16Encode (F16C assembly where it runs) gives tensor.F32ToF16's bits
// across the binades, on subnormals, ties and values past the f16 range.
func TestF16EncodeBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	x := append(randomF32(rng, 4099), 65504, 65519.99, 65520, 1e6, -1e6, 0x1p-25, -0x1p-24, 0x1.8p-24, 0)
	got := make([]uint16, len(x))
	F16Encode(got, x)
	for i, v := range x {
		if want := tensor.F32ToF16(v); got[i] != want {
			t.Fatalf("x[%d] = %g: %#04x, want %#04x", i, v, got[i], want)
		}
	}
}

// TestAttendPairF16: two query heads over the same cached rows through AttendPair give the
// bits of one Attend each, for heads the two-head kernels take (64, 128, 256) and one they
// do not (192), over row counts around the prefetch distance, with rows in a shuffled
// (paged) order, under both of llama.cpp's builds' orders.
func TestAttendPairF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, build := range []GGMLBuild{GGMLAVX2, GGMLAVX512} {
		prev := SetGGMLBuild(build)
		for _, hd := range []int{64, 128, 192, 256} {
			const heads = 3 // KV heads in a row; the pair reads the middle one
			stride, off := heads*hd, hd
			for _, n := range []int{1, 2, 8, 9, 17, 300} {
				k, v := make([]uint16, (n+5)*stride), make([]uint16, (n+5)*stride)
				for i := range k {
					k[i] = tensor.F32ToF16(float32(rng.NormFloat64()) * 2)
					v[i] = tensor.F32ToF16(float32(rng.NormFloat64()))
				}
				rows := make([]int32, n)
				for j, r := range rng.Perm(n + 5)[:n] {
					rows[j] = int32(r)
				}
				q16 := make([]float32, 2*hd)
				for i := range q16 {
					q16[i] = float32(rng.NormFloat64())
				}
				RoundF16(q16)
				var f, g FlashF16
				want0, want1 := make([]float32, hd), make([]float32, hd)
				g.Attend(want0, q16[:hd], k, v, rows, off, stride, 0.125)
				g.Attend(want1, q16[hd:], k, v, rows, off, stride, 0.125)
				got0, got1 := make([]float32, hd), make([]float32, hd)
				f.AttendPair(got0, got1, q16, k, v, rows, off, stride, 0.125)
				for i := range hd {
					if math.Float32bits(got0[i]) != math.Float32bits(want0[i]) || math.Float32bits(got1[i]) != math.Float32bits(want1[i]) {
						t.Fatalf("%v hd %d n %d (pair kernels %v): element %d: %v, %v; want %v, %v", build, hd, n, asmAttendPairF16(hd), i, got0[i], got1[i], want0[i], want1[i])
					}
				}
			}
		}
		SetGGMLBuild(prev)
	}
}
