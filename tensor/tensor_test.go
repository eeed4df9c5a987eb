package tensor

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

func TestDTypeIDsAndNames(t *testing.T) {
	// ggml type ids from ggml.h's enum ggml_type.
	ids := map[DType]uint32{F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q8_0: 8, Q4_K: 12, Q6_K: 14, I8: 24, I16: 25, I32: 26, I64: 27, F64: 28, BF16: 30}
	for d, id := range ids {
		if d.GGML() != id {
			t.Errorf("%s.GGML() = %d, want %d", d, d.GGML(), id)
		}
		back, err := FromGGML(id)
		if err != nil || back != d {
			t.Errorf("FromGGML(%d) = %v, %v", id, back, err)
		}
		p, err := Parse(d.GGMLName())
		if err != nil || p != d {
			t.Errorf("Parse(%q) = %v, %v", d.GGMLName(), p, err)
		}
	}
	for _, bad := range []uint32{4, 5, 9, 15, 31, 42, 1000} {
		if _, err := FromGGML(bad); err == nil {
			t.Errorf("FromGGML(%d): no error", bad)
		}
	}
	for _, s := range []string{"F32", "F16", "BF16"} {
		d, err := FromSafetensors(s)
		if err != nil || d.SafetensorsName() != s {
			t.Errorf("FromSafetensors(%q) = %v, %v", s, d, err)
		}
	}
	if _, err := FromSafetensors("F8_E4M3"); err == nil {
		t.Error("FromSafetensors(F8_E4M3): no error")
	}
	if Q8_0.SafetensorsName() != "" {
		t.Error("Q8_0 has a safetensors name")
	}
	sizes := []struct {
		d        DType
		n, bytes int
	}{{F32, 10, 40}, {F16, 3, 6}, {BF16, 5, 10}, {Q8_0, 64, 68}, {Q4_0, 32, 18}, {Q4_1, 96, 60}, {Q4_K, 512, 288}, {Q6_K, 256, 210}}
	for _, s := range sizes {
		got, err := s.d.BytesFor(s.n)
		if err != nil || got != s.bytes {
			t.Errorf("%s.BytesFor(%d) = %d, %v; want %d", s.d, s.n, got, err, s.bytes)
		}
	}
	if _, err := Q8_0.BytesFor(33); err == nil {
		t.Error("Q8_0.BytesFor(33): no error")
	}
	if _, err := DType(99).BytesFor(1); err == nil {
		t.Error("DType(99).BytesFor: no error")
	}
}

func TestF16Known(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{0, 0x0000}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800},
		{65504, 0x7bff}, {65519.996, 0x7bff}, {65520, 0x7c00}, {1e10, 0x7c00}, {-1e10, 0xfc00},
		{float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{0.1, 0x2e66}, {1.0 / 3, 0x3555},
		{0x1p-24, 0x0001}, {0x1p-25, 0x0000}, {0x1.000002p-25, 0x0001}, {0x1.8p-24, 0x0002}, // 1.5 ulp ties to even (2)
		{0x1p-14, 0x0400}, {0x1.ff8p-15, 0x03ff}, {0x1.ffcp-15, 0x0400}, // last subnormal; the tie above it rounds to the even first normal
		{1.0009765625, 0x3c01}, {1.00048828125, 0x3c00}, {1.00146484375, 0x3c02}, // ties to even around 1
	}
	for _, c := range cases {
		if got := F32ToF16(c.f); got != c.h {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	if h := F32ToF16(float32(math.NaN())); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("F32ToF16(NaN) = %#04x, not a NaN", h)
	}
	if f := F16ToF32(0x7e00); !math.IsNaN(float64(f)) {
		t.Errorf("F16ToF32(0x7e00) = %g", f)
	}
}

// Every finite f16 survives the round trip, and every midpoint between neighbours rounds to
// the even one while the floats just beside it round to the nearer one.
func TestF16Exhaustive(t *testing.T) {
	for h := uint32(0); h < 0x7c00; h++ {
		for _, s := range []uint32{0, 0x8000} {
			hh := uint16(h | s)
			f := F16ToF32(hh)
			if got := F32ToF16(f); got != hh {
				t.Fatalf("round trip %#04x -> %g -> %#04x", hh, f, got)
			}
			if h == 0x7bff {
				continue
			}
			a, b := float64(f), float64(F16ToF32(hh+1))
			mid := float32((a + b) / 2) // exact: one more significand bit than f16
			want := hh
			if hh&1 == 1 {
				want = hh + 1
			}
			if got := F32ToF16(mid); got != want {
				t.Fatalf("midpoint of %#04x,%#04x (%g) -> %#04x, want %#04x", hh, hh+1, mid, got, want)
			}
			lo := math.Nextafter32(mid, float32(a))
			hi := math.Nextafter32(mid, float32(b))
			if F32ToF16(lo) != hh || F32ToF16(hi) != hh+1 {
				t.Fatalf("neighbours of midpoint %g: %#04x %#04x", mid, F32ToF16(lo), F32ToF16(hi))
			}
		}
	}
	// The value F16ToF32 gives matches an independent float64 formula.
	for h := uint16(1); h < 0x7c00; h += 7 {
		e, m := int(h>>10), float64(h&0x3ff)
		var want float64
		if e == 0 {
			want = m * math.Pow(2, -24)
		} else {
			want = (1 + m/1024) * math.Pow(2, float64(e-15))
		}
		if got := F16ToF32(h); float64(got) != want {
			t.Fatalf("F16ToF32(%#04x) = %g, want %g", h, got, want)
		}
	}
}

func TestBF16(t *testing.T) {
	cases := []struct {
		bits uint32
		h    uint16
	}{
		{0x3f800000, 0x3f80}, // 1
		{0x3f808000, 0x3f80}, // tie, even stays
		{0x3f818000, 0x3f82}, // tie, odd rounds up
		{0x3f808001, 0x3f81}, // above tie
		{0x3f807fff, 0x3f80}, // below tie
		{0x7f7fffff, 0x7f80}, // max float rounds to Inf
		{0xff800000, 0xff80}, // -Inf
		{0x7fc00000, 0x7fc0}, // qNaN
		{0x7f800001, 0x7fc0}, // sNaN with low payload becomes a quiet NaN
		{0xffa12345, 0xffe1}, // negative NaN keeps sign and top payload
	}
	for _, c := range cases {
		if got := F32ToBF16(math.Float32frombits(c.bits)); got != c.h {
			t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", c.bits, got, c.h)
		}
	}
	for h := uint32(0); h < 0x10000; h++ {
		if h&0x7f80 == 0x7f80 && h&0x7f != 0 {
			continue // NaN
		}
		if got := F32ToBF16(BF16ToF32(uint16(h))); got != uint16(h) {
			t.Fatalf("bf16 round trip %#04x -> %#04x", h, got)
		}
	}
}

func TestDequantizeQ8_0Q4_0Q4_1ByHand(t *testing.T) {
	// Q8_0: d = 0.5 (f16 0x3800); y = q * 0.5.
	blk := make([]byte, 34)
	binary.LittleEndian.PutUint16(blk, 0x3800)
	for j := range 32 {
		blk[2+j] = byte(int8(j*8 - 128))
	}
	y := make([]float32, 32)
	if err := Dequantize(Q8_0, blk, y); err != nil {
		t.Fatal(err)
	}
	for j := range 32 {
		if want := float32(j*8-128) * 0.5; y[j] != want {
			t.Fatalf("Q8_0 y[%d] = %g, want %g", j, y[j], want)
		}
	}
	// Q4_0: d = 2; byte j holds element j (low nibble) and j+16 (high); y = (q-8)*d.
	blk = make([]byte, 18)
	binary.LittleEndian.PutUint16(blk, 0x4000)
	for j := range 16 {
		blk[2+j] = byte(j) | byte(15-j)<<4
	}
	if err := Dequantize(Q4_0, blk, y); err != nil {
		t.Fatal(err)
	}
	for j := range 16 {
		if y[j] != float32((j-8)*2) || y[j+16] != float32((7-j)*2) {
			t.Fatalf("Q4_0 y[%d]=%g y[%d]=%g", j, y[j], j+16, y[j+16])
		}
	}
	// Q4_1: d = 0.25, m = -1; y = q*d + m.
	blk = make([]byte, 20)
	binary.LittleEndian.PutUint16(blk, 0x3400)
	binary.LittleEndian.PutUint16(blk[2:], 0xbc00)
	for j := range 16 {
		blk[4+j] = byte(j) | byte(j/2)<<4
	}
	if err := Dequantize(Q4_1, blk, y); err != nil {
		t.Fatal(err)
	}
	for j := range 16 {
		if y[j] != float32(j)*0.25-1 || y[j+16] != float32(j/2)*0.25-1 {
			t.Fatalf("Q4_1 y[%d]=%g y[%d]=%g", j, y[j], j+16, y[j+16])
		}
	}
}

// packQ4K builds a Q4_K block from 8 six-bit scales and mins and 256 four-bit values, packing
// the way ggml's quantize_row_q4_K_ref does.
func packQ4K(d, dmin uint16, sc, mn [8]uint8, q [256]uint8) []byte {
	b := make([]byte, 144)
	binary.LittleEndian.PutUint16(b, d)
	binary.LittleEndian.PutUint16(b[2:], dmin)
	s := b[4:16]
	for j := range 4 {
		s[j] = sc[j] | (sc[j+4]>>4)<<6
		s[j+4] = mn[j] | (mn[j+4]>>4)<<6
		s[j+8] = sc[j+4]&0xf | (mn[j+4]&0xf)<<4
	}
	for i, v := range q {
		sub := i / 32 // sub-block; pairs (0,1), (2,3)... share 32 bytes: even = low nibble
		idx := 16 + 32*(sub/2) + i%32
		if sub%2 == 0 {
			b[idx] |= v
		} else {
			b[idx] |= v << 4
		}
	}
	return b
}

func TestDequantizeQ4K(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var sc, mn [8]uint8
	var q [256]uint8
	for j := range 8 {
		sc[j], mn[j] = uint8(r.IntN(64)), uint8(r.IntN(64))
	}
	sc[7], mn[5] = 63, 63 // exercise the high bits
	for i := range q {
		q[i] = uint8(r.IntN(16))
	}
	blk := packQ4K(0x3c00, 0x3800, sc, mn, q) // d = 1, dmin = 0.5
	y := make([]float32, 256)
	if err := Dequantize(Q4_K, blk, y); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		want := float64(sc[i/32])*float64(q[i]) - 0.5*float64(mn[i/32])
		if float64(y[i]) != want {
			t.Fatalf("Q4_K y[%d] = %g, want %g", i, y[i], want)
		}
	}
}

func TestDequantizeQ6K(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 210)
	var q [256]int
	var sc [16]int8
	for i := range sc {
		sc[i] = int8(r.IntN(256) - 128)
		b[192+i] = byte(sc[i])
	}
	binary.LittleEndian.PutUint16(b[208:], 0x3800) // d = 0.5
	for i := range q {
		q[i] = r.IntN(64) // stored 6-bit value; the weight is (q-32)
		n, rr := i/128, i%128
		k, l := rr/32, rr%32
		b[64*n+l+32*(k&1)] |= byte(q[i]&0xf) << (4 * (k >> 1))
		b[128+32*n+l] |= byte(q[i]>>4) << (2 * k)
	}
	y := make([]float32, 256)
	if err := Dequantize(Q6_K, b, y); err != nil {
		t.Fatal(err)
	}
	for i := range y {
		n, rr := i/128, i%128
		s := sc[8*n+(rr%32)/16+2*(rr/32)]
		want := 0.5 * float64(s) * float64(q[i]-32)
		if float64(y[i]) != want {
			t.Fatalf("Q6_K y[%d] = %g, want %g", i, y[i], want)
		}
	}
}

func TestQuantizeByHand(t *testing.T) {
	// Q8_0 with amax 127: d = 1, values rounded half away from zero.
	x := make([]float32, 32)
	x[0], x[1], x[2], x[3], x[4] = -127, 2.5, -2.5, 0.49, 126.6
	b := make([]byte, 34)
	if err := Quantize(Q8_0, x, b); err != nil {
		t.Fatal(err)
	}
	if d := binary.LittleEndian.Uint16(b); d != 0x3c00 {
		t.Fatalf("Q8_0 d = %#04x", d)
	}
	for j, want := range []int8{-127, 3, -3, 0, 127} {
		if int8(b[2+j]) != want {
			t.Errorf("Q8_0 q[%d] = %d, want %d", j, int8(b[2+j]), want)
		}
	}
	// Q4_0: the max-magnitude element is -8, so d = -8/-8 = 1; q = min(15, trunc(x+8.5)).
	x = make([]float32, 32)
	x[0], x[1], x[2], x[3], x[16], x[17] = -8, 7, 7.6, -0.6, -0.5, 3.4
	b = make([]byte, 18)
	if err := Quantize(Q4_0, x, b); err != nil {
		t.Fatal(err)
	}
	if d := binary.LittleEndian.Uint16(b); d != 0x3c00 {
		t.Fatalf("Q4_0 d = %#04x", d)
	}
	lo := []byte{0, 15, 15, 7}
	hi := []byte{8, 11, 8, 8}
	for j := range 4 {
		if b[2+j]&0xf != lo[j] || b[2+j]>>4 != hi[j] {
			t.Errorf("Q4_0 byte %d = %#02x, want lo %d hi %d", j, b[2+j], lo[j], hi[j])
		}
	}
	// Q4_0 where the largest magnitude is positive: d is negative.
	x = make([]float32, 32)
	x[0] = 16
	if err := Quantize(Q4_0, x, b); err != nil {
		t.Fatal(err)
	}
	if d := binary.LittleEndian.Uint16(b); d != 0xc000 || b[2]&0xf != 0 {
		t.Fatalf("Q4_0 positive max: d=%#04x q0=%d", d, b[2]&0xf)
	}
	// Q4_1 of 0..15 and 15..0: d = 1, m = 0, q = value.
	for j := range 16 {
		x[j], x[16+j] = float32(j), float32(15-j)
	}
	b = make([]byte, 20)
	if err := Quantize(Q4_1, x, b); err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint16(b) != 0x3c00 || binary.LittleEndian.Uint16(b[2:]) != 0 {
		t.Fatalf("Q4_1 d/m = %#04x %#04x", binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:]))
	}
	for j := range 16 {
		if b[4+j] != byte(j)|byte(15-j)<<4 {
			t.Fatalf("Q4_1 byte %d = %#02x", j, b[4+j])
		}
	}
}

func TestQuantizeRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(r.NormFloat64()) * float32(math.Pow(10, float64(i/1024-2)))
	}
	x[100] = 0
	for i := 64; i < 96; i++ {
		x[i] = 0 // an all-zero block must give d = 0 and zeros back
	}
	y := make([]float32, len(x))
	for _, dt := range []DType{F32, F16, BF16, Q8_0, Q4_0, Q4_1} {
		n, _ := dt.BytesFor(len(x))
		b := make([]byte, n)
		if err := Quantize(dt, x, b); err != nil {
			t.Fatal(err)
		}
		if err := Dequantize(dt, b, y); err != nil {
			t.Fatal(err)
		}
		for blk := 0; blk < len(x)/32; blk++ {
			var amax, lo, hi float64 = 0, math.Inf(1), math.Inf(-1)
			for _, v := range x[32*blk : 32*blk+32] {
				amax = max(amax, math.Abs(float64(v)))
				lo, hi = min(lo, float64(v)), max(hi, float64(v))
			}
			for i := 32 * blk; i < 32*blk+32; i++ {
				err := math.Abs(float64(y[i]) - float64(x[i]))
				var bound float64
				switch dt {
				case F32:
					bound = 0
				case F16:
					bound = math.Abs(float64(x[i]))*0x1p-11 + 0x1p-25
				case BF16:
					bound = math.Abs(float64(x[i])) * 0x1p-8
				case Q8_0:
					bound = amax/127/2*1.01 + amax*0x1p-11 // half a step, plus the f16 rounding of d
				case Q4_0:
					bound = amax/8*1.01 + amax*0x1p-10 // one step at the extreme end (clamped at 15)
				case Q4_1:
					bound = (hi-lo)/15/2*1.01 + (hi-lo)*0x1p-9 + math.Abs(lo)*0x1p-10
				}
				if err > bound {
					t.Fatalf("%s: x[%d]=%g -> %g, error %g > %g", dt, i, x[i], y[i], err, bound)
				}
			}
		}
		if dt.Quantized() {
			for i := 64; i < 96; i++ {
				if y[i] != 0 {
					t.Fatalf("%s: zero block gave %g", dt, y[i])
				}
			}
		}
	}
}

func TestSizeErrors(t *testing.T) {
	if err := Dequantize(Q8_0, make([]byte, 33), make([]float32, 32)); err == nil {
		t.Error("short Q8_0 source accepted")
	}
	if err := Dequantize(Q8_0, make([]byte, 34), make([]float32, 31)); err == nil {
		t.Error("non-multiple element count accepted")
	}
	if err := Quantize(Q3_K, make([]float32, 256), make([]byte, 110)); err == nil {
		t.Error("Quantize(Q3_K) is not supported but returned no error")
	}
	if err := Dequantize(DType(77), nil, nil); err == nil {
		t.Error("unknown dtype accepted")
	}
	info := Info{Name: "w", DType: F16, Shape: []int{2, 3}, Data: make([]byte, 12)}
	if err := info.Check(); err != nil {
		t.Error(err)
	}
	info.Data = info.Data[:10]
	if err := info.Check(); err == nil {
		t.Error("Check accepted short data")
	}
	if n := (Info{Shape: []int{1 << 40, 1 << 40}}).NumElements(); n != -1 {
		t.Errorf("overflowing shape: NumElements = %d", n)
	}
}

func TestViews(t *testing.T) {
	v := []float32{1, -2.5, 3}
	b := Bytes(v)
	if len(b) != 12 || binary.LittleEndian.Uint32(b[4:]) != math.Float32bits(-2.5) {
		t.Fatalf("Bytes: %v", b)
	}
	f, err := Float32s(b)
	if err != nil || len(f) != 3 || f[1] != -2.5 {
		t.Fatalf("Float32s: %v %v", f, err)
	}
	if _, err := Float32s(b[1:5]); err == nil {
		t.Error("misaligned view accepted")
	}
}

// The bulk F16 loops repeat the conversion fast paths; they must agree with the functions.
func TestBulkF16MatchesScalar(t *testing.T) {
	src := make([]byte, 2*65536)
	for h := range 65536 {
		src[2*h], src[2*h+1] = byte(h), byte(h>>8)
	}
	dst := make([]float32, 65536)
	if err := Dequantize(F16, src, dst); err != nil {
		t.Fatal(err)
	}
	for h := range 65536 {
		if math.Float32bits(dst[h]) != math.Float32bits(F16ToF32(uint16(h))) {
			t.Fatalf("Dequantize(F16) of %#04x = %g, F16ToF32 %g", h, dst[h], F16ToF32(uint16(h)))
		}
	}
	r := rand.New(rand.NewPCG(7, 7))
	x := make([]float32, 1<<16)
	for i := range x {
		x[i] = math.Float32frombits(r.Uint32()) // every exponent, NaNs and Infs included
	}
	q := make([]byte, 2*len(x))
	if err := Quantize(F16, x, q); err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if got := uint16(q[2*i]) | uint16(q[2*i+1])<<8; got != F32ToF16(v) {
			t.Fatalf("Quantize(F16) of %g = %#04x, F32ToF16 %#04x", v, got, F32ToF16(v))
		}
	}
}
