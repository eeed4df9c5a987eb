package convert

import (
	"fmt"
	"strconv"
	"strings"

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
	if _, ok := parseKMix(s); ok {
		return 0, false, fmt.Errorf("dtype %s: a mix of k-quants, for GGUF files only", s)
	}
	return 0, false, fmt.Errorf("dtype %q not supported (f32, f16, bf16, q8_0; for GGUF also q4_k_m, q6_k)", s)
}

// kMix is a --dtype that names one of llama-quantize's file types rather than one dtype:
// llama.cpp picks each tensor's k-quant by its role and layer (llama_tensor_get_type in
// src/llama-quant.cpp), and an export with the same name writes the same dtype per tensor,
// so that its blocks are llama-quantize's byte for byte (tensor.Quantize).
type kMix struct {
	name  string
	base  tensor.DType // the dtype of the tensors no rule singles out
	ftype int          // general.file_type (enum llama_ftype)
}

// KMixNames lists the k-quant file types export and synth write, for messages and help.
const KMixNames = "q4_k_s, q4_k_m, q5_k_s, q5_k_m or q6_k"

// IsKMix says whether s (any case) names one of llama-quantize's k-quant file types that
// export and synth write (KMixNames).
func IsKMix(s string) bool { _, ok := parseKMix(s); return ok }

// parseKMix reads the k-quant file types tokenwise writes: q4_k_s, q4_k_m, q5_k_s, q5_k_m
// and q6_k (general.file_type: enum llama_ftype in include/llama.h).
func parseKMix(s string) (kMix, bool) {
	switch strings.ToLower(s) {
	case "q4_k_s":
		return kMix{"q4_k_s", tensor.Q4_K, 14}, true
	case "q4_k_m":
		return kMix{"q4_k_m", tensor.Q4_K, 15}, true
	case "q5_k_s":
		return kMix{"q5_k_s", tensor.Q5_K, 16}, true
	case "q5_k_m":
		return kMix{"q5_k_m", tensor.Q5_K, 17}, true
	case "q6_k":
		return kMix{"q6_k", tensor.Q6_K, 18}, true
	}
	return kMix{}, false
}

// dtypeFor is llama-quantize's choice for the tensor gname (GGUF name; a matrix, or a
// mixture's stacked experts) with rows of cols elements, in a model of nLayers layers and
// nExperts experts (0 or 1: dense) whose output matrix is token_embd when tied
// (llama_tensor_get_type in src/llama-quant.cpp, without an importance matrix, for the
// architectures tokenwise runs: separate q/k/v matrices, not Falcon, not a 70B):
//   - every file type: output.weight, and token_embd.weight when it is also the output, Q6_K;
//     a mixture's router (ffn_gate_inp) F32 (convert_hf_to_gguf.py writes it so and
//     llama-quantize leaves it); with exactly 8 experts (Mixtral) attn_k and attn_v Q8_0;
//   - Q4_K_M and Q5_K_M: attn_v and the down projections (ffn_down, ffn_down_exps) of layer
//     i Q6_K where use_more_bits(i, nLayers) (the first and last eighth of the layers, and
//     every third in between); with 8 experts, Q4_K_M's attn_output Q5_K;
//   - Q4_K_S: attn_v of layers 0-3 and the down projections of the first eighth of the
//     layers Q5_K; with 8 experts attn_output Q5_K;
//   - every other matrix the file type's base type (Q4_K, Q5_K, Q6_K).
//
// A row that is not a multiple of 256 falls back as llama-quantize does: Q6_K to Q8_0; Q4_K
// and Q5_K to Q5_0 and Q5_1, which tokenwise does not write, so that is an error.
func (m kMix) dtypeFor(gname string, cols, nLayers, nExperts int, tied bool) (tensor.DType, error) {
	if strings.HasSuffix(gname, ".ffn_gate_inp.weight") {
		return tensor.F32, nil
	}
	dt := m.base
	layer := -1
	if rest, ok := strings.CutPrefix(gname, "blk."); ok {
		if i, err := strconv.Atoi(rest[:max(0, strings.IndexByte(rest, '.'))]); err == nil {
			layer = i
		}
	}
	attnV, attnK := strings.HasSuffix(gname, ".attn_v.weight"), strings.HasSuffix(gname, ".attn_k.weight")
	down := strings.Contains(gname, ".ffn_down")
	switch {
	case gname == "output.weight", tied && gname == "token_embd.weight":
		dt = tensor.Q6_K
	case layer < 0:
	case m.name == "q4_k_m" || m.name == "q5_k_m":
		if (attnV || down) && useMoreBits(layer, nLayers) {
			dt = tensor.Q6_K
		}
	case m.name == "q4_k_s":
		if attnV && layer < 4 || down && layer < nLayers/8 {
			dt = tensor.Q5_K
		}
	}
	if nExperts == 8 {
		switch {
		case attnV || attnK:
			dt = tensor.Q8_0
		case (m.name == "q4_k_m" || m.name == "q4_k_s") && strings.HasSuffix(gname, ".attn_output.weight"):
			dt = tensor.Q5_K
		}
	}
	if cols%256 != 0 {
		switch dt {
		case tensor.Q6_K, tensor.Q8_0:
			return tensor.Q8_0, nil
		case tensor.Q5_K:
			return 0, fmt.Errorf("tensor %q: rows of %d are not a multiple of 256, where llama-quantize %s writes Q5_1, which tokenwise does not (use --dtype q8_0 or q6_k)", gname, cols, m.name)
		}
		return 0, fmt.Errorf("tensor %q: rows of %d are not a multiple of 256, where llama-quantize %s writes Q5_0, which tokenwise does not (use --dtype q8_0 or q6_k)", gname, cols, m.name)
	}
	return dt, nil
}

// useMoreBits is llama-quant.cpp's use_more_bits: the layers that get the larger type.
func useMoreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

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
