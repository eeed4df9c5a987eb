package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// checkProduct checks one output of MatVec/MatMul for a row whose dequantized weights are w
// (float64) and whose float32 activations were x, against what ggml computes: for
// block-quantized weights the activations are first rounded to Q8_0/Q8_1 blocks, for F16/BF16
// to half precision. The reference is float64 arithmetic on the rounded activations, so the
// tolerance is checkDot's float32 summation bound. raw is the weight row's stored bytes.
func checkProduct(t *testing.T, dt tensor.DType, what string, got float32, w []float64, x []float32, raw []byte) {
	t.Helper()
	if dt == tensor.Q4_K || dt == tensor.Q5_K || dt == tensor.Q6_K {
		var a qactK
		a.quantize(x)
		var want, abs float64
		for i, wv := range w {
			xq := float64(a.d[i/256]) * float64(a.q[i])
			want += wv * xq
			abs += math.Abs(wv * xq)
		}
		if tol := float64(len(w)+4) * 0x1p-24 * abs; math.Abs(float64(got)-want) > tol {
			t.Fatalf("%s: got %g, want %g (tolerance %g)", what, got, want, tol)
		}
		return
	}
	switch actKindOf(dt) {
	case actF32:
		checkDot(t, what, got, w, x)
		return
	case actF16, actBF16:
		xr := make([]float32, len(x))
		for i, v := range x {
			if dt == tensor.F16 {
				xr[i] = tensor.F16ToF32(tensor.F32ToF16(v))
			} else {
				xr[i] = tensor.BF16ToF32(tensor.F32ToBF16(v))
			}
		}
		checkDot(t, what, got, w, xr)
		return
	}
	var a qact
	a.quantize(x, true)
	var want, abs float64
	for i, wv := range w {
		xq := float64(a.d[i/32]) * float64(a.q[i])
		want += wv * xq
		abs += math.Abs(wv * xq)
	}
	if dt == tensor.Q4_1 {
		// ggml adds m·s with s = d·Σq rounded to f16 instead of m·d·Σq.
		for b := range len(x) / 32 {
			m := float64(tensor.F16ToF32(uint16(raw[b*20+2]) | uint16(raw[b*20+3])<<8))
			var sq int
			for _, q := range a.q[b*32 : b*32+32] {
				sq += int(q)
			}
			want += m * (float64(a.s[b]) - float64(a.d[b])*float64(sq))
			abs += math.Abs(m * float64(a.s[b]))
		}
	}
	if tol := float64(len(w)+4) * 0x1p-24 * abs; math.Abs(float64(got)-want) > tol {
		t.Fatalf("%s: got %g, want %g (tolerance %g)", what, got, want, tol)
	}
}

// TestQuantizeQ8 checks the activation quantizer against ggml's definition: scale
// f16(amax/127), quants round(x·127/amax) half to even, each within half a step of x/d, and
// s = f16(d·Σq); and against the tensor package's Q8_0 quantizer (ggml's scalar reference,
// which rounds halves away from zero and multiplies by 1/d, so a quant may differ by one
// at a tie).
func TestQuantizeQ8(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 32 * 64
	x := make([]float32, n)
	for i := range x {
		switch i % 97 {
		case 0:
			x[i] = 0
		default:
			x[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
		}
	}
	for i := range 32 { // an all-zero block
		x[i+32*5] = 0
	}
	for i := range 32 { // exact halves: 127/amax = 1, so x·id = k+0.5 must round to even
		x[i+32*7] = float32(i-16) + 0.5
	}
	x[32*7] = 127
	var a qact
	a.quantize(x, true)
	ref := make([]byte, n/32*34)
	if err := tensor.Quantize(tensor.Q8_0, x, ref); err != nil {
		t.Fatal(err)
	}
	diffs := 0
	for b := range n / 32 {
		blk := x[b*32 : b*32+32]
		var amax float32
		for _, v := range blk {
			amax = max(amax, abs32(v))
		}
		if want := tensor.F16ToF32(tensor.F32ToF16(amax / 127)); a.d[b] != want {
			t.Fatalf("block %d: d = %g, want %g", b, a.d[b], want)
		}
		if rd := tensor.F16ToF32(uint16(ref[b*34]) | uint16(ref[b*34+1])<<8); rd != a.d[b] {
			t.Errorf("block %d: d = %g, tensor.Quantize has %g", b, a.d[b], rd)
		}
		var sum int
		for i, v := range blk {
			q := a.q[b*32+i]
			sum += int(q)
			if amax == 0 {
				if q != 0 {
					t.Fatalf("block %d: zero block has q[%d] = %d", b, i, q)
				}
				continue
			}
			e := float64(v) * 127 / float64(amax)
			if math.Abs(e-float64(q)) > 0.5+1e-5 {
				t.Fatalf("block %d [%d]: %g quantized to %d (exact %g)", b, i, v, q, e)
			}
			if math.Abs(math.Abs(e-math.Trunc(e))-0.5) < 1e-9 && int(q)%2 != 0 {
				t.Fatalf("block %d [%d]: tie %g rounded to odd %d", b, i, e, q)
			}
			if rq := int8(ref[b*34+2+i]); rq != q {
				diffs++
				if d := int(rq) - int(q); d < -1 || d > 1 {
					t.Fatalf("block %d [%d]: q = %d, tensor.Quantize has %d", b, i, q, rq)
				}
			}
		}
		if want := tensor.F16ToF32(tensor.F32ToF16(amax / 127 * float32(sum))); a.s[b] != want {
			t.Fatalf("block %d: s = %g, want %g", b, a.s[b], want)
		}
	}
	if diffs > 40 { // the 16 half-integer ties of block 7 plus rare rounding of x·id vs x/d
		t.Errorf("%d quants differ from tensor.Quantize by one", diffs)
	}
}

// TestQuantDotLanes checks the lane-ordered block dot products against a direct sum over
// exactly representable values (small integers times power-of-two scales), where every
// summation order gives the same float32 result.
func TestQuantDotLanes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_1} {
		for _, nb := range []int{1, 3, 18} {
			bb := dt.BlockBytes()
			row := make([]byte, nb*bb)
			for i := range row {
				row[i] = byte(rng.IntN(256))
			}
			var a qact
			a.d = make([]float32, nb)
			a.s = make([]float32, nb)
			a.q = make([]int8, nb*32)
			var want float64
			for b := range nb {
				dw := float32(1) / float32(int(1)<<rng.IntN(4))
				h := tensor.F32ToF16(dw)
				row[b*bb], row[b*bb+1] = byte(h), byte(h>>8)
				m := float32(0)
				if dt == tensor.Q4_1 {
					m = -float32(1) / 8
					hm := tensor.F32ToF16(m)
					row[b*bb+2], row[b*bb+3] = byte(hm), byte(hm>>8)
				}
				a.d[b] = float32(1) / 4
				var sq int
				for i := range 32 {
					q := int8(rng.IntN(255) - 127)
					a.q[b*32+i] = q
					sq += int(q)
				}
				a.s[b] = a.d[b] * float32(sq)
				for i := range 32 {
					var wq float64
					switch dt {
					case tensor.Q8_0:
						wq = float64(int8(row[b*bb+2+i]))
					case tensor.Q4_0:
						wq = float64(int(row[b*bb+2+i%16]>>(4*(i/16))&15) - 8)
					case tensor.Q4_1:
						wq = float64(row[b*bb+4+i%16] >> (4 * (i / 16)) & 15)
					}
					want += float64(dw) * wq * float64(a.d[b]) * float64(a.q[b*32+i])
				}
				want += float64(m) * float64(a.s[b])
			}
			w := Mat{DType: dt, Rows: 1, Cols: nb * 32, Data: row, rowBytes: len(row)}
			if got := actDot(&w, 0, &a, 0); float64(got) != want {
				t.Errorf("%v, %d blocks: got %g, want %g", dt, nb, got, want)
			}
		}
	}
}

// TestRoundActivations: F16 and BF16 weights see activations rounded to their precision
// (ggml's vec_dot_type for both), so a row times x equals the row times the rounded x.
func TestRoundActivations(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pool := NewPool(2)
	defer pool.Close()
	s := NewScratch(2)
	for _, dt := range []tensor.DType{tensor.F16, tensor.BF16} {
		w, _ := randMat(t, rng, dt, 9, 70)
		x := randVec(rng, 70)
		xr := make([]float32, 70)
		copy(xr, roundActivations(&w, x, s))
		for i := range xr {
			if dt == tensor.F16 && xr[i] != tensor.F16ToF32(tensor.F32ToF16(x[i])) ||
				dt == tensor.BF16 && xr[i] != tensor.BF16ToF32(tensor.F32ToBF16(x[i])) {
				t.Fatalf("%v: rounded x[%d] = %g from %g", dt, i, xr[i], x[i])
			}
		}
		a, b := make([]float32, 9), make([]float32, 9)
		MatVec(pool, a, &w, x, s)
		MatVec(pool, b, &w, xr, s)
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("%v row %d: W·x = %g, W·round(x) = %g", dt, i, a[i], b[i])
			}
		}
	}
}

// TestQuantRowsSIMD: the AVX2 block dots (GOEXPERIMENT=simd builds) give what the plain-Go
// lane-ordered dots give, to the last bit but for float64-emulated FMA double rounding.
func TestQuantRowsSIMD(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_1} {
		const rows, cols, n = 5, 32 * 7, 7 // tokens 0..3 take the four-token panel, 4..6 the one-token kernels
		w, _ := randMat(t, rng, dt, rows, cols)
		var a qact
		a.quantize(randVec(rng, n*cols), true)
		got := make([]float32, n*rows)
		if !simdQuantRows(got, &w, &a, n, 0, rows) {
			t.Skip("no SIMD kernels in this build (GOEXPERIMENT=simd on amd64 with AVX2/FMA)")
		}
		for tk := range n {
			for r := range rows {
				want := actDot(&w, r, &a, tk)
				g := got[tk*rows+r]
				if g != want && math.Abs(float64(g-want)) > 2e-6*math.Abs(float64(want)) {
					t.Errorf("%v token %d row %d: SIMD %g, plain Go %g", dt, tk, r, g, want)
				}
			}
		}
	}
}

// TestQuantizeQ8K checks the Q8_K activation quantizer against ggml's definition: per 256
// values, iscale = −127/max (max: the value of largest magnitude, with its sign), quants
// round(iscale·x) half to even capped at 127, d = 1/iscale, bsums the sums of each 16.
func TestQuantizeQ8K(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	x := randVec(rng, 256*3)
	clear(x[256 : 2*256]) // an all-zero super-block
	x[2*256+17] = -9      // a negative extreme
	var a qactK
	a.quantize(x)
	for b := range 3 {
		xb, q := x[b*256:b*256+256], a.q[b*256:b*256+256]
		var mx, amax float32
		for _, v := range xb {
			if abs32(v) > amax {
				amax, mx = abs32(v), v
			}
		}
		if amax == 0 {
			if a.d[b] != 0 {
				t.Fatalf("zero super-block: d = %g", a.d[b])
			}
			continue
		}
		iscale := -127 / mx
		if a.d[b] != 1/iscale {
			t.Fatalf("super-block %d: d = %g, want %g", b, a.d[b], 1/iscale)
		}
		for i, v := range xb {
			e := float64(iscale * v)
			if math.Abs(e-float64(q[i])) > 0.5 || q[i] > 127 {
				t.Fatalf("super-block %d [%d]: %g quantized to %d (exact %g)", b, i, v, q[i], e)
			}
		}
		for j := range 16 {
			var s int32
			for _, v := range q[j*16 : j*16+16] {
				s += int32(v)
			}
			if int32(a.bsums[b*16+j]) != s {
				t.Fatalf("super-block %d: bsums[%d] = %d, want %d", b, j, a.bsums[b*16+j], s)
			}
		}
	}
	if a.q[2*256+17] != -127 { // −127/max·max, whatever max's sign
		t.Errorf("the extreme quantized to %d, want -127", a.q[2*256+17])
	}
}

// TestQ8Tiles: the AVX-512 VNNI prefill tiles give, for every row and token, the bits of the
// one-row kernel (asmDotQ8_0, ggml_vec_dot_q8_0_q8_0's lane order), including the rows and
// tokens past the last whole tile, which quantRows leaves to the one-row kernels.
func TestQ8Tiles(t *testing.T) {
	if !useVNNI {
		t.Skip("no AVX-512 VNNI on this CPU (or TOKENWISE_NO_ASM)")
	}
	defer func(v bool) { q8Wide = v }(q8Wide)
	for _, wide := range []bool{false, true} {
		q8Wide = wide
		testQ8Tiles(t)
	}
}

func testQ8Tiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, sh := range []struct{ rows, cols, n, lo, hi int }{
		{4, 32, 4, 0, 4}, {11, 32 * 5, 9, 0, 11}, {16, 1024, 13, 4, 15}, {8, 32 * 3, 3, 0, 8},
	} {
		w, _ := randMat(t, rng, tensor.Q8_0, sh.rows, sh.cols)
		var a qact
		a.quantize(randVec(rng, sh.n*sh.cols), false)
		got := make([]float32, sh.n*sh.rows)
		quantRows(got, &w, &a, sh.n, sh.lo, sh.hi)
		nb := sh.cols / 32
		for tk := range sh.n {
			for r := sh.lo; r < sh.hi; r++ {
				row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
				want, _ := asmDotQ8_0(row, a.d8[tk*nb*8:(tk+1)*nb*8], a.q[tk*nb*32:(tk+1)*nb*32])
				if g := got[tk*sh.rows+r]; math.Float32bits(g) != math.Float32bits(want) {
					t.Fatalf("%v (512-bit %v): token %d row %d: tile %g, row kernel %g", sh, q8Wide, tk, r, g, want)
				}
			}
		}
	}
}

// TestRoundActivationsF16Bits: the f16 rounding of activations (F16C assembly where it runs)
// gives f16Round's bits on values across the binades, f16 subnormals, exact ties and values
// past the f16 range (infinity, as F16C and ggml give).
func TestRoundActivationsF16Bits(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	x := randomF32(rng, 4099)
	x = append(x, 65504, 65519.99, 65520, 1e6, -1e6, 0x1p-25, -0x1p-24, 0x1.8p-24, 0)
	w, _ := randMat(t, rng, tensor.F16, 1, len(x))
	xr := roundActivations(&w, x, NewScratch(1))
	for i, v := range x {
		if want := f16Round(v); math.Float32bits(xr[i]) != math.Float32bits(want) {
			t.Fatalf("x[%d] = %g: rounded to %g, want %g", i, v, xr[i], want)
		}
	}
}

// TestQuantQ8Asm: the assembly activation quantizer gives quantBlockQ8's quants, scale and
// sum for every block: ordinary values across binades, an all-zero block, exact halves
// (ties to even), and a block with an infinity (its lanes saturate as the Go code's do).
func TestQuantQ8Asm(t *testing.T) {
	rng := rand.New(rand.NewPCG(61, 62))
	const nb = 67
	x := make([]float32, nb*32)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Exp(3*rng.NormFloat64()))
	}
	clear(x[32*3 : 32*4])
	for i := range 32 {
		x[32*5+i] = float32(i-16) + 0.5
	}
	x[32*5] = 127
	x[32*9+4] = float32(math.Inf(1))
	q, d, sum := make([]int8, nb*32), make([]float32, nb), make([]int32, nb)
	if !asmQuantQ8(x, q, d, sum) {
		t.Skip("no AVX-512 quantizer on this CPU")
	}
	for b := range nb {
		var wq [32]int8
		wd, ws := quantBlockQ8((*[32]float32)(x[b*32:]), &wq)
		if math.Float32bits(d[b]) != math.Float32bits(wd) || sum[b] != ws || [32]int8(q[b*32:b*32+32]) != wq {
			t.Fatalf("block %d: d %g sum %d q %v, want d %g sum %d q %v", b, d[b], sum[b], q[b*32:b*32+32], wd, ws, wq)
		}
	}
}

// TestQ4_1AMXArithmetic: under GGMLAMX, a Q4_1 product whose row count is a multiple of 32
// gives every row and token the AMX backend's arithmetic (dotQ4_1AMX, computed here from the
// block's integers independently), in a pass of one token and of several alike; a matrix of
// other row counts keeps the AVX-512 build's vec_dot arithmetic; and the two arithmetics do
// differ on this data (so the switch is seen). TestSmolLM2MatchesLlamaCpp/Q4_1/amx compares
// the whole model with llama.cpp's sapphirerapids library.
func TestQ4_1AMXArithmetic(t *testing.T) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAMX))
	rng := rand.New(rand.NewPCG(41, 42))
	p := NewPool(2)
	defer p.Close()
	s := NewScratch(2)
	for _, rows := range []int{32, 64, 40} {
		const cols, n = 32 * 7, 5
		w, _ := randMat(t, rng, tensor.Q4_1, rows, cols)
		x := randVec(rng, n*cols)
		got := make([]float32, n*rows)
		MatMul(p, got, &w, x, n, s)
		var a qact
		a.quantize(x, true)
		differ := 0
		for tk := range n {
			one := make([]float32, rows)
			MatMul(p, one, &w, x[tk*cols:(tk+1)*cols], 1, s)
			for r := range rows {
				row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
				var c float32
				for b := range cols / 32 {
					blk := row[b*20 : (b+1)*20]
					var sum int32
					for i := range 16 {
						sum += int32(blk[4+i]&15)*int32(a.q[tk*cols+b*32+i]) + int32(blk[4+i]>>4)*int32(a.q[tk*cols+b*32+16+i])
					}
					dw := tensor.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
					m := tensor.F16ToF32(uint16(blk[2]) | uint16(blk[3])<<8)
					c = fma32(float32(sum), dw*a.d[tk*cols/32+b], c)
					c = fma32(m, a.s[tk*cols/32+b], c)
				}
				vec := dotQ4_1Act(row, a.d[tk*cols/32:(tk+1)*cols/32], a.s[tk*cols/32:(tk+1)*cols/32], a.q[tk*cols:(tk+1)*cols])
				want := c
				if rows%32 != 0 {
					want = vec
				}
				if g := got[tk*rows+r]; math.Float32bits(g) != math.Float32bits(want) {
					t.Fatalf("%d rows: token %d row %d: %g, want %g (AMX %g, vec_dot %g)", rows, tk, r, g, want, c, vec)
				}
				if math.Float32bits(one[r]) != math.Float32bits(got[tk*rows+r]) {
					t.Fatalf("%d rows: token %d row %d: %g alone, %g in a pass of %d", rows, tk, r, one[r], got[tk*rows+r], n)
				}
				if c != vec {
					differ++
				}
			}
		}
		if differ == 0 {
			t.Fatalf("%d rows: the AMX and vec_dot arithmetics agree on every value: the test cannot tell them apart", rows)
		}
	}
}

// TestQ4AMXKernels: for Q4_0, Q4_1 and Q8_0, the rows-interleaved kernels of the AMX
// arithmetic give every row and token the reference's bits (dotQ4_0AMX, dotQ4_1AMX — which
// TestQ4_1AMXArithmetic checks against the integers — and dotQ8_0AMX, each checked here
// within its rounding of the float64 sum of the dequantized weights), for
// 1 to 17 tokens (token groups of eight and a rest), row ranges that cut 16-row groups at
// one end, both ends, or inside one group, and rows of random bytes (any nibbles, minimums
// and scales) beside the quantizer's, under every ISA this CPU runs (the kernels where
// AVX-512 VNNI is on, the reference elsewhere).
func TestQ4AMXKernels(t *testing.T) {
	defer SetGGMLBuild(SetGGMLBuild(GGMLAMX))
	rng := rand.New(rand.NewPCG(43, 44))
	for _, dt := range []tensor.DType{tensor.Q4_0, tensor.Q4_1, tensor.Q8_0} {
		for _, sh := range []struct{ rows, cols int }{{32, 32}, {64, 32 * 9}, {96, 32 * 130}} {
			testQ4AMXKernels(t, rng, dt, sh.rows, sh.cols)
		}
	}
}

func testQ4AMXKernels(t *testing.T, rng *rand.Rand, dt tensor.DType, rows, cols int) {
	t.Helper()
	sh := struct{ rows, cols int }{rows, cols}
	w, _ := randMat(t, rng, dt, sh.rows, sh.cols)
	size := w.rowBytes / (sh.cols / 32)
	for r := 1; r < sh.rows; r += 2 {
		row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
		for i := range row {
			row[i] = byte(rng.IntN(256))
		}
		for b := 0; b < len(row); b += size {
			offs := []int{0}
			if dt == tensor.Q4_1 {
				offs = []int{0, 2}
			}
			for _, off := range offs {
				h := tensor.F32ToF16(float32(rng.NormFloat64()) * float32(math.Pow(2, float64(rng.IntN(20)-10))))
				row[b+off], row[b+off+1] = byte(h), byte(h>>8)
			}
		}
	}
	deq := make([]float32, sh.rows*sh.cols)
	if err := tensor.Dequantize(dt, w.Data, deq); err != nil {
		t.Fatal(err)
	}
	nb := sh.cols / 32
	ref := func(a *qact, r, tk int) float32 {
		row := w.Data[r*w.rowBytes : (r+1)*w.rowBytes]
		d, q := a.d[tk*nb:(tk+1)*nb], a.q[tk*nb*32:(tk+1)*nb*32]
		switch dt {
		case tensor.Q4_0:
			return dotQ4_0AMX(row, d, q)
		case tensor.Q8_0:
			return dotQ8_0AMX(row, d, q)
		}
		return dotQ4_1AMX(row, d, a.s[tk*nb:(tk+1)*nb], q)
	}
	x := randVec(rng, 17*sh.cols)
	for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 17} { // every kernel (T = 1..8 tokens a call)
		var a qact
		a.quantize(x[:n*sh.cols], dt == tensor.Q4_1)
		if dt != tensor.Q4_1 { // Q4_1's activations carry an f16-rounded d·Σq: TestQ4_1AMXArithmetic
			for tk := range n {
				for r := range sh.rows {
					var want, mag float64
					for e := range sh.cols {
						v := float64(deq[r*sh.cols+e]) * float64(a.q[tk*sh.cols+e]) * float64(a.d[tk*nb+e/32])
						want += v
						mag += math.Abs(v)
					}
					if got := ref(&a, r, tk); math.Abs(float64(got)-want) > 1e-5*mag+1e-30 {
						t.Fatalf("%v %d×%d token %d row %d: reference %g, float64 sum %g", dt, sh.rows, sh.cols, tk, r, got, want)
					}
				}
			}
		}
		for _, isa := range SupportedISAs() {
			withISA(t, isa, func() {
				prepSmallN(&a, &w, n)
				prepAMX(&a, &w, n)
				for i, rg := range [][2]int{{0, sh.rows}, {3, sh.rows - 5}, {17, 30}, {5, 11}, {16, 32}, {0, sh.rows}} {
					lo, hi := rg[0], rg[1]
					if i == 5 { // again in runs of one 16-row group through the tokens (amxRowsRunBytes)
						defer func(b int) { amxRowsRunBytes = b }(amxRowsRunBytes)
						amxRowsRunBytes = 1
					}
					out := make([]float32, n*sh.rows)
					if amxRowsRun() && !asmAMX(out, &w, &a, n, lo, hi) {
						t.Fatalf("%v %v %d×%d n=%d rows %d..%d: the kernels did not run", dt, isa, sh.rows, sh.cols, n, lo, hi)
					}
					clear(out)
					quantRows(out, &w, &a, n, lo, hi)
					for tk := range n {
						for r := range sh.rows {
							g := out[tk*sh.rows+r]
							if r < lo || r >= hi {
								if g != 0 {
									t.Fatalf("%v %d×%d n=%d rows %d..%d: row %d written", dt, sh.rows, sh.cols, n, lo, hi, r)
								}
								continue
							}
							if want := ref(&a, r, tk); math.Float32bits(g) != math.Float32bits(want) {
								t.Fatalf("%v %v %d×%d n=%d rows %d..%d: token %d row %d: %g, reference %g", dt, isa, sh.rows, sh.cols, n, lo, hi, tk, r, g, want)
							}
						}
					}
				}
			})
		}
	}
}

// qact.quantize's scales from the F16C assembly (asmQ8Scales) equal the Go loop's, bit for
// bit: activations from f16's subnormal range to its largest values, blocks of zeros, with
// and without the sums' scale (Q8_1 and Q8_0), every count of blocks past the groups of eight.
func TestQ8ScalesAsm(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, nb := range []int{1, 7, 8, 9, 16, 23, 240} {
		for _, withSum := range []bool{true, false} {
			x := make([]float32, nb*32)
			for i := range x {
				scale := math.Pow(10, float64(r.IntN(12)-8)) // 1e-8 .. 1e3
				x[i] = float32(r.NormFloat64() * scale)
			}
			for i := range 32 { // one block of zeros
				x[i] = 0
			}
			var a qact
			a.quantize(x, withSum)
			want := qact{d: make([]float32, nb), s: make([]float32, nb), d8: make([]float32, 8*nb), s8: make([]float32, 8*nb)}
			for b := range nb {
				want.d[b] = f16Round(a.raw[b])
				if withSum {
					want.s[b] = f16Round(a.raw[b] * float32(a.sums[b]))
				}
				for i := range 8 {
					want.d8[8*b+i], want.s8[8*b+i] = want.d[b], want.s[b]
				}
			}
			for b := range nb {
				if math.Float32bits(a.d[b]) != math.Float32bits(want.d[b]) || a.d8[8*b+7] != want.d[b] {
					t.Fatalf("%d blocks, sums %v: block %d d %v (d8 %v), want %v", nb, withSum, b, a.d[b], a.d8[8*b+7], want.d[b])
				}
				if withSum && (math.Float32bits(a.s[b]) != math.Float32bits(want.s[b]) || a.s8[8*b+3] != want.s[b]) {
					t.Fatalf("%d blocks: block %d s %v (s8 %v), want %v", nb, b, a.s[b], a.s8[8*b+3], want.s[b])
				}
			}
		}
	}
}

// BenchmarkQuantizeQ8 is qact.quantize on the activations of SmolLM2's products in a
// five-token verify pass (576 and 1536 columns) and one token's.
func BenchmarkQuantizeQ8(b *testing.B) {
	for _, n := range []int{576, 5 * 576, 5 * 1536} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(i%97) * 0.01
		}
		var a qact
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				a.quantize(x, true)
			}
		})
	}
}
