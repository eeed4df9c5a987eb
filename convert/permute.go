package convert

import (
	"fmt"

	"github.com/tokenwise/tokenwise/tensor"
)

// llama.cpp runs Llama-family rotary embeddings on interleaved pairs (x[2i], x[2i+1]), where
// transformers rotates the two halves of each head (x[i], x[i+d/2]). convert_hf_to_gguf.py
// therefore reorders the rows of q_proj and k_proj (weights and biases) within each head:
//
//	permute(W, n_head) = W.reshape(n_head, 2, d/2, ...).swapaxes(1, 2).reshape(W.shape)
//
// so GGUF row h*d + 2i+j holds HF row h*d + j*d/2 + i. The reordering moves whole rows, so
// it works on any dtype, quantized ones included (a block never spans two rows).

// permuteRows reorders the rows of t for llama.cpp (inverse=false) or back to HF order
// (inverse=true). heads is the number of heads the rows are split into.
func permuteRows(t tensor.Info, heads int, inverse bool) (tensor.Info, error) {
	if len(t.Shape) == 0 || heads <= 0 || t.Shape[0]%(2*heads) != 0 {
		return t, fmt.Errorf("tensor %q: shape %v cannot be split into %d heads of even size", t.Name, t.Shape, heads)
	}
	rows := t.Shape[0]
	if len(t.Data)%rows != 0 {
		return t, fmt.Errorf("tensor %q: %d bytes do not divide into %d rows", t.Name, len(t.Data), rows)
	}
	rowBytes := len(t.Data) / rows
	d := rows / heads
	half := d / 2
	out := make([]byte, len(t.Data))
	for h := 0; h < heads; h++ {
		for i := 0; i < half; i++ {
			for j := 0; j < 2; j++ {
				gg := h*d + 2*i + j    // row in GGUF order
				hf := h*d + j*half + i // row in HF order
				src, dst := hf, gg
				if inverse {
					src, dst = gg, hf
				}
				copy(out[dst*rowBytes:(dst+1)*rowBytes], t.Data[src*rowBytes:(src+1)*rowBytes])
			}
		}
	}
	t.Data = out
	return t, nil
}
