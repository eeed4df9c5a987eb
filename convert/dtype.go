package convert

import (
	"fmt"

	"github.com/tokenwise/tokenwise/tensor"
)

// castTensor returns t stored as dtype to. Data is copied only when the dtype changes, so a
// same-dtype conversion stays bit-exact and aliases its source.
func castTensor(t tensor.Info, to tensor.DType) (tensor.Info, error) {
	if t.DType == to {
		return t, nil
	}
	n := t.NumElements()
	if n < 0 {
		return t, fmt.Errorf("tensor %q: invalid shape %v", t.Name, t.Shape)
	}
	f := make([]float32, n)
	if err := tensor.Dequantize(t.DType, t.Data, f); err != nil {
		return t, fmt.Errorf("tensor %q: reading %s: %w", t.Name, t.DType, err)
	}
	size, err := to.BytesFor(n)
	if err != nil {
		return t, fmt.Errorf("tensor %q: %s%v: %w", t.Name, to, t.Shape, err)
	}
	if to.Quantized() && (len(t.Shape) == 0 || t.Shape[len(t.Shape)-1]%to.BlockSize() != 0) {
		return t, fmt.Errorf("tensor %q: rows of %v are not a multiple of %s's block of %d", t.Name, t.Shape, to, to.BlockSize())
	}
	out := make([]byte, size)
	if err := tensor.Quantize(to, f, out); err != nil {
		return t, fmt.Errorf("tensor %q: converting to %s: %w", t.Name, to, err)
	}
	t.DType, t.Data = to, out
	return t, nil
}

// parseDType reads a --dtype value; "" means "keep".
func parseDType(s string) (tensor.DType, bool, error) {
	switch s {
	case "":
		return 0, false, nil
	case "f32", "F32", "float32":
		return tensor.F32, true, nil
	case "f16", "F16", "float16":
		return tensor.F16, true, nil
	case "bf16", "BF16", "bfloat16":
		return tensor.BF16, true, nil
	case "q8_0", "Q8_0":
		return tensor.Q8_0, true, nil
	}
	return 0, false, fmt.Errorf("dtype %q not supported (f32, f16, bf16, q8_0)", s)
}

// torchDType is config.json's torch_dtype spelling.
func torchDType(d tensor.DType) string {
	switch d {
	case tensor.F16:
		return "float16"
	case tensor.BF16:
		return "bfloat16"
	}
	return "float32"
}
