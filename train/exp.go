package train

import "math"

// expNeg is e^x for x ≤ 0 (a softmax's x − max) in float32: x = k·ln2 + r with |r| ≤ ln2/2,
// e^r from its degree-6 Taylor polynomial (truncation below 2e-8 relative), scaled by 2^k;
// within 4e-7 relative of exp (TestExpNeg; 2.5e-7 seen). Plain math.Exp in float64 was 5% of a
// SmolLM2 training step (the LM head's softmax takes vocab × targets of them).
func expNeg(x float32) float32 {
	if x < -87 { // e^-87 ≈ 1.6e-38, near float32's smallest normal: flush to 0
		return 0
	}
	const log2e, ln2hi, ln2lo = 1.44269504, 0.693145752, 1.42860677e-06
	k := int32(x*log2e - 0.5) // round to nearest (x·log2e ≤ 0: truncation is toward 0)
	kf := float32(k)
	r := (x - kf*ln2hi) - kf*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	return p * math.Float32frombits(uint32(k+127)<<23)
}
