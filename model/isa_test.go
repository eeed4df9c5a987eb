package model

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/tensor"
)

// isaConfigs have head sizes of 64, which the fused and tiled f16 attention kernels take,
// and matrix sides that are multiples of 64, which every quantized and f16 kernel takes: the
// shapes where the ISAs' kernels differ most. One is Qwen2 (q/k/v biases, tied head), one
// Qwen3 (q/k norms, head_dim set apart from hidden/heads).
var isaConfigs = map[string]string{
	"qwen2-hd64": `{"model_type":"qwen2","vocab_size":160,"hidden_size":128,"intermediate_size":192,"num_hidden_layers":2,
		"num_attention_heads":2,"num_key_value_heads":1,"max_position_embeddings":256,"rms_norm_eps":1e-6,"rope_theta":1000000,
		"use_sliding_window":false,"tie_word_embeddings":true}`,
	"qwen3-hd64": `{"model_type":"qwen3","vocab_size":131,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,"max_position_embeddings":256,"rms_norm_eps":1e-6,
		"rope_theta":1000000,"tie_word_embeddings":false,"attention_bias":false}`,
}

// isaModel builds config name with weights in dtype dt: RandomWeights' float32 values,
// quantized to dt for the matrices (norms and biases stay float32). mkRef makes a fresh
// float64 reference of the same weights (a reference keeps its sequence).
func isaModel(t *testing.T, name string, dt tensor.DType, kv tensor.DType) (m *Model, mkRef func() *refModel) {
	t.Helper()
	cfg, err := ParseConfig([]byte(isaConfigs[name]))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := RandomWeights(cfg, 7, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range ws {
		if len(w.Shape) != 2 || dt == tensor.F32 {
			continue
		}
		v := make([]float32, w.Shape[0]*w.Shape[1])
		if err := tensor.Dequantize(tensor.F32, w.Data, v); err != nil {
			t.Fatal(err)
		}
		nb, err := dt.BytesFor(len(v))
		if err != nil {
			t.Fatal(err)
		}
		ws[i].DType, ws[i].Data = dt, make([]byte, nb)
		if err := tensor.Quantize(dt, v, ws[i].Data); err != nil {
			t.Fatal(err)
		}
	}
	if m, err = build(cfg, newMemSource(ws), hfNames, false, Options{Threads: 2, KVCache: kv}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, func() *refModel {
		r, err := newRef(cfg, ws)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// isaRun sets the ISA, prefills prompt and decodes steps greedy tokens; it returns the
// logits after the prefill and each step, and the tokens, and puts the ISA back.
func isaRun(t *testing.T, m *Model, isa kernels.ISA, prompt []int, steps int) ([][]float32, []int) {
	t.Helper()
	prev, err := kernels.SetISA(isa)
	if err != nil {
		t.Fatal(err)
	}
	defer kernels.SetISA(prev)
	s := m.NewSequence(0)
	defer s.Release()
	logits, err := m.Prefill(s, prompt)
	if err != nil {
		t.Fatal(err)
	}
	all := [][]float32{slices.Clone(logits)}
	var ids []int
	for range steps {
		id := argmax(logits)
		ids = append(ids, id)
		if logits, err = m.Decode(s, id); err != nil {
			t.Fatal(err)
		}
		all = append(all, slices.Clone(logits))
	}
	return all, ids
}

// TestISAQuantizedBitIdentical: a model whose products and attention reproduce ggml's
// arithmetic (Q8_0 or Q4_1 matrices, f16 KV cache) gives the same logits, bit for bit, and
// so the same greedy tokens under every ISA the CPU runs, pure Go included, in both ggml
// builds: prefills of 9 tokens (attention per position) and of 70 (the tiled attention),
// then greedy decode steps. This runs in every `go test ./model`, so the plain-Go kernels
// run a model end to end on amd64 too.
func TestISAQuantizedBitIdentical(t *testing.T) {
	defer kernels.SetGGMLBuild(kernels.SetGGMLBuild(kernels.GGMLAVX2))
	for _, name := range []string{"qwen2-hd64", "qwen3-hd64"} {
		for _, dt := range []tensor.DType{tensor.Q8_0, tensor.Q4_1} {
			t.Run(fmt.Sprintf("%s/%v", name, dt), func(t *testing.T) {
				m, _ := isaModel(t, name, dt, tensor.F16)
				for _, build := range []kernels.GGMLBuild{kernels.GGMLAVX2, kernels.GGMLAVX512} {
					kernels.SetGGMLBuild(build)
					for _, prompt := range [][]int{testPrompt, longPrompt(kernels.AttnTile + 6)} {
						want, wantIDs := isaRun(t, m, kernels.ISAGo, prompt, 6)
						for _, isa := range kernels.SupportedISAs()[1:] {
							got, ids := isaRun(t, m, isa, prompt, 6)
							if !slices.Equal(ids, wantIDs) {
								t.Fatalf("%v build, %d-token prompt: greedy %v under %v, %v under go", build, len(prompt), ids, isa, wantIDs)
							}
							for step := range want {
								for i := range want[step] {
									if math.Float32bits(got[step][i]) != math.Float32bits(want[step][i]) {
										t.Fatalf("%v build, %d-token prompt, step %d: logit %d = %v under %v, %v under go",
											build, len(prompt), step, i, got[step][i], isa, want[step][i])
									}
								}
							}
						}
					}
				}
			})
		}
	}
}

// TestISAFloatWeights: with float32, f16 or bf16 matrices the products sum in each ISA's own
// lane order (16 lanes in the AVX-512 prefill tile, 8 in the AVX2 kernels, scalar
// accumulators in plain Go; see kernels.ISA), so the logits are not the same bits across
// ISAs. Under every ISA they must stay within the tolerance the default path is held to
// against the float64 reference (activationTol, kvF16Tol), and give the reference's greedy
// tokens, hence the same tokens under every ISA.
func TestISAFloatWeights(t *testing.T) {
	for _, name := range []string{"qwen2-hd64", "qwen3-hd64"} {
		for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
			for _, kv := range []tensor.DType{tensor.F32, tensor.F16} {
				t.Run(fmt.Sprintf("%s/%v/kv=%v", name, dt, kv), func(t *testing.T) {
					m, mkRef := isaModel(t, name, dt, kv)
					tol := activationTol[dt]
					if kv == tensor.F16 {
						tol = max(tol, kvF16Tol)
					}
					for _, isa := range kernels.SupportedISAs() {
						prev, err := kernels.SetISA(isa)
						if err != nil {
							t.Fatal(err)
						}
						defer kernels.SetISA(prev)
						followReference(t, m, mkRef(), testPrompt, 8, tol, isa.String()+": ").Release()
						kernels.SetISA(prev)
					}
				})
			}
		}
	}
}
