package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// attnCase is an f32 cache of n positions (rows shuffled, as paged blocks leave them) and
// a query of head size hd, with scores spread wide enough that some weights underflow.
func attnCase(r *rand.Rand, n, hd, spread int) (q, k, v []float32, rows []int32, off, stride int) {
	off, stride = hd, 3*hd+8 // the second of three KV heads, rows padded
	k, v = make([]float32, (n+3)*stride), make([]float32, (n+3)*stride)
	for i := range k {
		k[i], v[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	q = make([]float32, hd)
	for i := range q {
		q[i] = float32(r.NormFloat64() * float64(spread))
	}
	rows = make([]int32, n)
	for i, p := range r.Perm(n + 3)[:n] {
		rows[i] = int32(p)
	}
	return
}

// The AVX2 kernel, in assembly and in archsimd, gives attendF32Ref's bits for every length (each tail of the eight-wide
// loops), head sizes with and without a 64-wide block, both variants of ggml's expf, and
// scores that underflow; and both are attention: within 1e-5 of a float64 softmax.
func TestAttendF32SIMDEqualsRef(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	defer func(v bool) { ggmlAVX512 = v }(ggmlAVX512)
	asmOn := attnAsmSwitch(true)
	attnAsmSwitch(asmOn)
	simd := 0
	for _, hd := range []int{8, 24, 64, 80, 128, 136} {
		for _, n := range []int{1, 2, 7, 8, 9, 15, 16, 17, 63, 100, 301} {
			for _, spread := range []int{1, 8} {
				for _, avx512 := range []bool{true, false} {
					ggmlAVX512 = avx512
					q, k, v, rows, off, stride := attnCase(r, n, hd, spread)
					scale := float32(1 / math.Sqrt(float64(hd)))
					want, got := make([]float32, hd), make([]float32, hd)
					attendF32Ref(want, q, k, v, rows, off, stride, scale, make([]float32, n))
					name := fmt.Sprintf("hd %d n %d spread %d avx512 %v", hd, n, spread, avx512)
					// Both SIMD variants: the assembly passes and the archsimd ones.
					for _, asm := range []bool{asmOn, false} {
						attnAsmSwitch(asm)
						ok := simdAttendF32(got, q, k, v, rows, off, stride, scale, make([]float32, n))
						attnAsmSwitch(asmOn)
						if !ok {
							break
						}
						simd++
						for i := range want {
							if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
								t.Fatalf("%s asm %v: out[%d] = %v, reference %v", name, asm, i, got[i], want[i])
							}
						}
					}
					// Against attention in float64.
					s := make([]float64, n)
					mx := math.Inf(-1)
					for j, row := range rows {
						for d := range q {
							s[j] += float64(q[d]) * float64(k[int(row)*stride+off+d])
						}
						s[j] *= float64(scale)
						mx = max(mx, s[j])
					}
					var sum float64
					for j := range s {
						s[j] = math.Exp(s[j] - mx)
						sum += s[j]
					}
					for d := range q {
						var o float64
						for j, row := range rows {
							o += s[j] / sum * float64(v[int(row)*stride+off+d])
						}
						if math.Abs(o-float64(want[d])) > 1e-5*(1+math.Abs(o)) {
							t.Fatalf("%s: out[%d] = %v, float64 attention %v", name, d, want[d], o)
						}
					}
				}
			}
		}
	}
	if pathSwitches()["simd"] && simd == 0 {
		t.Fatal("the SIMD kernel ran no case")
	}
	t.Logf("%d cases through the SIMD kernel", simd)
}

// attnExp is expGGML down to ggml's exponent step −126 (x ≈ −87.68), and zero past it.
func TestAttnExp(t *testing.T) {
	for _, x := range []float32{0, -1, -10.5, -87, -87.3, -87.4, -87.67, -87.7, -100, -1e30, float32(math.Inf(-1))} {
		got := attnExp(x)
		want := expGGML(x)
		if x < -87.68 {
			want = 0
		} else if want == 0 {
			t.Fatalf("expGGML(%v) = 0", x)
		}
		if got != want {
			t.Errorf("attnExp(%v) = %v, want %v", x, got, want)
		}
	}
	if got := attnExp(float32(math.NaN())); got != 0 {
		t.Errorf("attnExp(NaN) = %v, want 0", got)
	}
}

// AttendF32Shared gives each query AttendF32's bits over its own prefix of the rows, for
// every number of queries (groups of four with a short last one), lengths equal and
// different (each query's own last rows), head sizes with and without a 64-wide block, and
// with the 512-bit passes on and off (and the paired scores with and without their scratch).
func TestAttendF32Shared(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	wide := avx512AttnSwitch(true)
	defer avx512AttnSwitch(wide)
	for _, hd := range []int{8, 24, 64, 80, 128} {
		for _, nq := range []int{1, 2, 3, 4, 5, 8, 15, 16} {
			for _, base := range []int{1, 7, 8, 9, 64, 203} {
				for _, spread := range []int{0, 1, 5} {
					for _, w := range []bool{wide, false} {
						avx512AttnSwitch(w)
						q0, k, v, rows, off, stride := attnCase(r, base+spread, hd, 4)
						qs, outs, ns := make([][]float32, nq), make([][]float32, nq), make([]int, nq)
						scratch := 0
						for i := range qs {
							qs[i] = make([]float32, hd)
							for d := range qs[i] {
								qs[i][d] = q0[d] * float32(r.NormFloat64())
							}
							outs[i] = make([]float32, hd)
							ns[i] = base + r.IntN(spread+1)
							scratch += ns[i]
						}
						if r.IntN(4) > 0 { // room for the paired scores, mostly
							scratch += nq * hd
						}
						AttendF32Shared(outs, qs, ns, k, v, rows, off, stride, 0.125, make([]float32, scratch))
						for i := range qs {
							want := make([]float32, hd)
							AttendF32(want, qs[i], k, v, rows[:ns[i]], off, stride, 0.125, make([]float32, ns[i]))
							for d := range want {
								if math.Float32bits(outs[i][d]) != math.Float32bits(want[d]) {
									t.Fatalf("hd %d queries %d lengths %v 512-bit %v: query %d out[%d] = %v, AttendF32 %v",
										hd, nq, ns, w, i, d, outs[i][d], want[d])
								}
							}
						}
					}
				}
			}
		}
	}
}
