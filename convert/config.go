package convert

import (
	"math"

	"github.com/tokenwise/tokenwise/model"
)

// llama3RopeFactors computes the rope_freqs tensor llama.cpp uses for Llama 3.1+ scaling:
// frequency i is divided by factors[i] (convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors,
// computed there in float32 for the frequencies and float64 for the rest).
func llama3RopeFactors(r *model.RopeScaling, theta float64, headDim int) []float32 {
	lowWavelen := float64(r.OriginalMaxPositions) / r.LowFreqFactor
	highWavelen := float64(r.OriginalMaxPositions) / r.HighFreqFactor
	out := make([]float32, 0, headDim/2)
	for i := 0; i < headDim; i += 2 {
		// torch: 1.0 / (base ** (arange(0, dim, 2, float32) / dim)) in float32
		exp := float32(i) / float32(headDim)
		freq := float32(1.0 / float32(math.Pow(theta, float64(exp))))
		wavelen := 2 * math.Pi / float64(freq)
		var f float64
		switch {
		case wavelen < highWavelen:
			f = 1
		case wavelen > lowWavelen:
			f = r.Factor
		default:
			smooth := (float64(r.OriginalMaxPositions)/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			f = 1 / ((1-smooth)/r.Factor + smooth)
		}
		out = append(out, float32(f))
	}
	return out
}
