package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// withISA runs f with the kernels on instruction set i, then puts back the one before.
func withISA(t *testing.T, i ISA, f func()) {
	t.Helper()
	prev, err := SetISA(i)
	if err != nil {
		t.Fatal(err)
	}
	defer SetISA(prev)
	f()
}

func TestSetISA(t *testing.T) {
	if CurrentISA() != DefaultISA() {
		t.Fatalf("CurrentISA %v, DefaultISA %v before any SetISA", CurrentISA(), DefaultISA())
	}
	if DefaultISA() > BestISA() {
		t.Fatalf("DefaultISA %v above BestISA %v", DefaultISA(), BestISA())
	}
	s := SupportedISAs()
	if len(s) == 0 || s[0] != ISAGo || s[len(s)-1] != BestISA() {
		t.Fatalf("SupportedISAs %v, BestISA %v", s, BestISA())
	}
	for _, i := range []ISA{ISAGo, ISAAVX2, ISAAVX512} {
		if p, err := ParseISA(i.String()); p != i || err != nil {
			t.Fatalf("ParseISA(%q) = %v, %v", i.String(), p, err)
		}
	}
	if _, err := ParseISA("sse"); err == nil {
		t.Fatal("ParseISA took an unknown name")
	}
	for _, c := range []struct {
		env  map[string]string
		best ISA
		want ISA
	}{
		{nil, ISAAVX512, ISAAVX512},
		{nil, ISAGo, ISAGo},
		{map[string]string{"TOKENWISE_NO_AVX512": "1"}, ISAAVX512, ISAAVX2},
		{map[string]string{"TOKENWISE_NO_AVX512": "1"}, ISAGo, ISAGo},
		{map[string]string{"TOKENWISE_ISA": "go"}, ISAAVX512, ISAGo},
		{map[string]string{"TOKENWISE_ISA": "avx2"}, ISAAVX512, ISAAVX2},
		{map[string]string{"TOKENWISE_ISA": "avx512"}, ISAAVX2, ISAAVX2}, // the CPU cannot
		{map[string]string{"TOKENWISE_ISA": "avx512", "TOKENWISE_NO_AVX512": "1"}, ISAAVX512, ISAAVX2},
		{map[string]string{"TOKENWISE_ISA": "sse"}, ISAAVX2, ISAAVX2},
	} {
		if got := envISA(func(k string) string { return c.env[k] }, c.best); got != c.want {
			t.Errorf("environment %v, best %v: default %v, want %v", c.env, c.best, got, c.want)
		}
	}
	before := CurrentISA()
	for _, bad := range []ISA{BestISA() + 1, ISAAVX512 + 1, -1} {
		if bad <= BestISA() && bad >= ISAGo {
			continue
		}
		if prev, err := SetISA(bad); err == nil || prev != before || CurrentISA() != before {
			t.Fatalf("SetISA(%v) = %v, %v; CurrentISA now %v (was %v)", bad, prev, err, CurrentISA(), before)
		}
	}
	for _, i := range s {
		withISA(t, i, func() {
			if CurrentISA() != i {
				t.Fatalf("SetISA(%v): CurrentISA %v", i, CurrentISA())
			}
			on := pathSwitches()
			for name, v := range on {
				wide := name == "avx512Attn" || name == "avx512Tile" || name == "vnni"
				if v && (i == ISAGo || (i == ISAAVX2 && wide)) {
					t.Errorf("%v: %s on", i, name)
				}
			}
			if i == ISAAVX512 && !noAsm && !on["avx512Tile"] {
				t.Errorf("%v: the AVX-512 tile is off", i)
			}
			if i >= ISAAVX2 && !noAsm && !on["asm"] {
				t.Errorf("%v: the assembly is off", i)
			}
		})
		if CurrentISA() != before {
			t.Fatalf("after %v: CurrentISA %v, want %v back", i, CurrentISA(), before)
		}
	}
}

// isaTests are the kernel tests TestKernelsEveryISA runs again under each ISA the CPU has:
// each compares the dispatched kernels with a plain-Go reference (bit for bit where the
// kernels reproduce ggml's arithmetic, within float32 rounding elsewhere), so together
// they test every path one process can select. isa_amd64_test.go adds the amd64 ones.
var isaTests = []struct {
	name string
	f    func(*testing.T)
}{
	{"MatVecMatMul", TestMatVecMatMul},
	{"MatMulMany", TestMatMulMany},
	{"RMSNorm", TestRMSNorm},
	{"SoftmaxSiLU", TestSoftmaxSiLU},
	{"Rope", TestRope},
	{"RoundF16", TestRoundF16},
	{"DotF16", TestDotF16},
	{"MadScaleRoundF16", TestMadScaleRoundF16},
	{"FlashF16", TestFlashF16},
	{"SiLUMulGGMLBuilds", TestSiLUMulGGMLBuilds},
	{"FlashF16Attend", TestFlashF16Attend},
	{"F16EncodeBits", TestF16EncodeBits},
	{"AttendTiled", TestAttendTiled},
	{"AttendTiledReuse", TestAttendTiledReuse},
	{"QuantizeQ8", TestQuantizeQ8},
	{"QuantDotLanes", TestQuantDotLanes},
	{"RoundActivations", TestRoundActivations},
	{"RoundActivationsF16Bits", TestRoundActivationsF16Bits},
	{"QuantizeQ8K", TestQuantizeQ8K},
	{"QuantRowsSIMD", TestQuantRowsSIMD},
	{"Q8Tiles", TestQ8Tiles},
	{"QuantQ8Asm", TestQuantQ8Asm},
	{"DotAddScaledTails", TestDotAddScaledTails},
	{"F16WeightsAllValues", TestF16WeightsAllValues},
	{"SiLUMulSIMDMatchesScalar", TestSiLUMulSIMDMatchesScalar},
	{"RopeHalfMatchesRotate", TestRopeHalfMatchesRotate},
	{"SumWords", TestSumWords},
}

// TestKernelsEveryISA runs isaTests under every ISA this CPU runs, in this one process
// (the plain-Go kernels included, which a default run on an AVX2 CPU never reaches).
func TestKernelsEveryISA(t *testing.T) {
	for _, i := range SupportedISAs() {
		t.Run(i.String(), func(t *testing.T) {
			withISA(t, i, func() {
				for _, tc := range isaTests {
					t.Run(tc.name, tc.f)
				}
			})
		})
	}
}

// isaCase computes some kernels' outputs as bits, to compare across ISAs.
type isaCase struct {
	name string
	run  func() []uint32
}

// f32Bits appends the bits of v to b.
func f32Bits(b []uint32, v ...float32) []uint32 {
	for _, x := range v {
		b = append(b, math.Float32bits(x))
	}
	return b
}

// isaIdenticalCases are the kernels that reproduce ggml's arithmetic (quantized products
// with their activation quantizer, f16 KV attention, SwiGLU, RoPE, f16/bf16 conversions)
// and the read probe, through their exported entry points: their outputs must have the
// same bits under every ISA.
func isaIdenticalCases(t *testing.T) []isaCase {
	rng := rand.New(rand.NewPCG(101, 102))
	pool := NewPool(2)
	t.Cleanup(pool.Close)
	s := NewScratch(pool.Threads())
	var cases []isaCase
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_1, tensor.Q4_K, tensor.Q5_K, tensor.Q6_K} {
		bs := dt.BlockSize()
		for _, cols := range []int{bs, 3 * bs, 1024 / bs * bs * 2} {
			const rows = 13 // three four-row tiles and a row
			w, _ := randMat(t, rng, dt, rows, cols)
			x := randVec(rng, 9*cols)
			cases = append(cases, isaCase{fmt.Sprintf("MatVec+MatMul/%v/%d", dt, cols), func() []uint32 {
				var b []uint32
				for _, n := range []int{1, 4, 9} { // decode, one token tile, tiles and a tail
					out := make([]float32, n*rows)
					MatMul(pool, out, &w, x[:n*cols], n, s)
					b = f32Bits(b, out...)
				}
				return b
			}})
		}
	}
	for _, dt := range []tensor.DType{tensor.F16, tensor.BF16} {
		w, _ := randMat(t, rng, dt, 3, 77)
		cases = append(cases, isaCase{fmt.Sprintf("Row/%v", dt), func() []uint32 {
			row := make([]float32, 77)
			var b []uint32
			for r := range 3 {
				_ = w.Row(r, row)
				b = f32Bits(b, row...)
			}
			return b
		}})
	}
	x := randomF32(rng, 1000)
	cases = append(cases, isaCase{"RoundF16+F16Encode", func() []uint32 {
		r := append([]float32(nil), x...)
		RoundF16(r)
		h := make([]uint16, len(x))
		F16Encode(h, x)
		b := f32Bits(nil, r...)
		for _, v := range h {
			b = append(b, uint32(v))
		}
		return b
	}})
	k := make([]uint16, 1000)
	F16Encode(k, randVec(rng, 1000))
	q := randVec(rng, 1000)
	RoundF16(q)
	cases = append(cases, isaCase{"DotF16+MadRoundF16+ScaleRoundF16", func() []uint32 {
		var b []uint32
		for _, n := range []int{8, 32, 64, 100, 256, 1000} {
			b = f32Bits(b, DotF16(q[:n], k[:n]))
			y := append([]float32(nil), q[:n]...)
			MadRoundF16(y, 0.37, k[:n])
			ScaleRoundF16(y, 1.7)
			b = f32Bits(b, y...)
		}
		return b
	}})
	for _, hd := range []int{64, 96, 128} {
		const slots = 70
		kv := make([]uint16, 2*slots*hd)
		F16Encode(kv, randVec(rng, len(kv)))
		kc, vc := kv[:slots*hd], kv[slots*hd:]
		q16 := randVec(rng, hd)
		RoundF16(q16)
		cases = append(cases, isaCase{fmt.Sprintf("FlashF16.Attend/hd=%d", hd), func() []uint32 {
			var b []uint32
			for _, n := range []int{1, 7, 65} {
				rows := make([]int32, n)
				for j := range rows {
					rows[j] = int32((j * 37) % slots)
				}
				var f FlashF16
				out := make([]float32, hd)
				f.Attend(out, q16, kc, vc, rows, 0, hd, 0.125)
				b = f32Bits(b, out...)
			}
			return b
		}})
	}
	gate, up := randVec(rng, 203), randVec(rng, 203)
	cases = append(cases, isaCase{"SiLUMul", func() []uint32 {
		g := append([]float32(nil), gate...)
		SiLUMul(g, up)
		return f32Bits(nil, g...)
	}})
	cs, sn := randVec(rng, 50), randVec(rng, 50)
	cases = append(cases, isaCase{"RopeHalf", func() []uint32 {
		v := append([]float32(nil), gate[:100]...)
		RopeHalf(v, cs, sn)
		return f32Bits(nil, v...)
	}})
	words := make([]uint64, 32*5+3)
	for i := range words {
		words[i] = rng.Uint64()
	}
	cases = append(cases, isaCase{"SumWords", func() []uint32 {
		v := SumWords(words)
		return []uint32{uint32(v), uint32(v >> 32)}
	}})
	return cases
}

// TestISAsBitIdentical: the kernels that reproduce ggml's arithmetic give the same bits
// under every ISA this CPU runs, in every ggml build. (TestKernelsEveryISA covers the tiled
// attention, against a reference of its own arithmetic.) The float32/f16/bf16 weight
// products and Dot/AddScaled are not among them (see ISA): TestKernelsEveryISA holds each
// ISA's to float32 rounding of the exact product, and the f16 matrix×vector product to
// DotF16's bits under the ISAs with assembly (TestMatVecF16RowOrder).
func TestISAsBitIdentical(t *testing.T) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAVX2))
	for _, build := range []GGMLBuild{GGMLAVX2, GGMLAVX512, GGMLAMX} {
		SetGGMLBuild(build)
		for _, c := range isaIdenticalCases(t) {
			var want []uint32
			withISA(t, ISAGo, func() { want = c.run() })
			for _, i := range SupportedISAs()[1:] {
				var got []uint32
				withISA(t, i, func() { got = c.run() })
				for j := range want {
					if got[j] != want[j] {
						t.Errorf("%v build, %s: %v gives %#x at [%d], go %#x", build, c.name, i, got[j], j, want[j])
						break
					}
				}
			}
		}
	}
}
