package convert

import (
	"fmt"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// TestKMixDTypes: llama-quantize's Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M and Q6_K choices per tensor for a 32-layer model
// (Llama-3.2-1B's depth has 16; both are in the table) and its fallbacks.
func TestKMixDTypes(t *testing.T) {
	q4km, _ := parseKMix("Q4_K_M")
	q6k, _ := parseKMix("q6_k")
	q4ks, _ := parseKMix("q4_k_s")
	q5km, _ := parseKMix("Q5_K_M")
	q5ks, _ := parseKMix("q5_k_s")
	// use_more_bits(i, 32): i < 4, i >= 28, or (i−4)%3 == 2 → 6, 9, 12, ..., 27.
	more := map[int]bool{}
	for i := range 32 {
		more[i] = i < 4 || i >= 28 || (i-4)%3 == 2
	}
	for i := range 32 {
		for _, part := range []string{"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"} {
			name := fmt.Sprintf("blk.%d.%s.weight", i, part)
			want := tensor.Q4_K
			if (part == "attn_v" || part == "ffn_down") && more[i] {
				want = tensor.Q6_K
			}
			if got, err := q4km.dtypeFor(name, 2048, 32, 0, false); err != nil || got != want {
				t.Errorf("q4_k_m %s: %v, %v; want %v", name, got, err, want)
			}
			if got, err := q6k.dtypeFor(name, 2048, 32, 0, false); err != nil || got != tensor.Q6_K {
				t.Errorf("q6_k %s: %v, %v; want Q6_K", name, got, err)
			}
			// Q5_K_M: Q4_K_M's rule over a Q5_K base.
			want5 := tensor.Q5_K
			if want == tensor.Q6_K {
				want5 = tensor.Q6_K
			}
			if got, err := q5km.dtypeFor(name, 2048, 32, 0, false); err != nil || got != want5 {
				t.Errorf("q5_k_m %s: %v, %v; want %v", name, got, err, want5)
			}
			if got, err := q5ks.dtypeFor(name, 2048, 32, 0, false); err != nil || got != tensor.Q5_K {
				t.Errorf("q5_k_s %s: %v, %v; want Q5_K", name, got, err)
			}
			// Q4_K_S: attn_v of layers 0-3 and ffn_down of the first eighth (0-3 of 32) Q5_K.
			want4s := tensor.Q4_K
			if (part == "attn_v" || part == "ffn_down") && i < 4 {
				want4s = tensor.Q5_K
			}
			if got, err := q4ks.dtypeFor(name, 2048, 32, 0, false); err != nil || got != want4s {
				t.Errorf("q4_k_s %s: %v, %v; want %v", name, got, err, want4s)
			}
		}
	}
	for _, c := range []struct {
		name string
		tied bool
		want tensor.DType
	}{
		{"output.weight", false, tensor.Q6_K},
		{"token_embd.weight", false, tensor.Q4_K},
		{"token_embd.weight", true, tensor.Q6_K},
	} {
		if got, err := q4km.dtypeFor(c.name, 2048, 32, 0, c.tied); err != nil || got != c.want {
			t.Errorf("q4_k_m %s (tied %v): %v, %v; want %v", c.name, c.tied, got, err, c.want)
		}
	}
	// Rows that are not whole super-blocks: Q6_K falls back to Q8_0; Q4_K's fallback (Q5_0)
	// is not written, so it is an error that says so.
	if got, err := q4km.dtypeFor("output.weight", 576, 30, 0, false); err != nil || got != tensor.Q8_0 {
		t.Errorf("q4_k_m output.weight at 576 columns: %v, %v; want Q8_0", got, err)
	}
	if _, err := q4km.dtypeFor("blk.1.attn_q.weight", 576, 30, 0, false); err == nil {
		t.Error("q4_k_m at 576 columns: no error for Q4_K's Q5_0 fallback")
	}
	if _, err := q5km.dtypeFor("blk.1.attn_q.weight", 576, 30, 0, false); err == nil {
		t.Error("q5_k_m at 576 columns: no error for Q5_K's Q5_1 fallback")
	}
	for _, mix := range []kMix{q4ks, q4km, q5ks, q5km, q6k} {
		if got, err := mix.dtypeFor("output.weight", 2048, 32, 0, false); err != nil || got != tensor.Q6_K {
			t.Errorf("%s output.weight: %v, %v; want Q6_K", mix.name, got, err)
		}
	}
	// Mixtures (llama_tensor_get_type): the router stays F32, the stacked down projections
	// follow use_more_bits like ffn_down, gate and up are the base type; with exactly 8
	// experts attn_k/attn_v are Q8_0 and Q4_K_M's and Q4_K_S's attn_output Q5_K.
	for _, c := range []struct {
		mix     kMix
		name    string
		experts int
		want    tensor.DType
		wantErr bool
	}{
		{q4km, "blk.5.ffn_gate_inp.weight", 128, tensor.F32, false},
		{q6k, "blk.5.ffn_gate_inp.weight", 128, tensor.F32, false},
		{q4km, "blk.0.ffn_down_exps.weight", 128, tensor.Q6_K, false},
		{q4km, "blk.5.ffn_down_exps.weight", 128, tensor.Q4_K, false},
		{q4km, "blk.6.ffn_down_exps.weight", 128, tensor.Q6_K, false},
		{q4km, "blk.6.ffn_gate_exps.weight", 128, tensor.Q4_K, false},
		{q4km, "blk.6.ffn_up_exps.weight", 128, tensor.Q4_K, false},
		{q4km, "blk.5.attn_k.weight", 128, tensor.Q4_K, false},
		{q4km, "blk.5.attn_k.weight", 8, tensor.Q8_0, false},
		{q4km, "blk.5.attn_v.weight", 8, tensor.Q8_0, false},
		{q6k, "blk.5.attn_v.weight", 8, tensor.Q8_0, false},
		{q6k, "blk.5.attn_output.weight", 8, tensor.Q6_K, false},
		{q4km, "blk.5.attn_output.weight", 8, tensor.Q5_K, false},
		{q4ks, "blk.5.attn_output.weight", 8, tensor.Q5_K, false},
		{q5km, "blk.5.attn_output.weight", 8, tensor.Q5_K, false},
		{q5ks, "blk.5.attn_v.weight", 8, tensor.Q8_0, false},
		{q5km, "blk.0.ffn_down_exps.weight", 128, tensor.Q6_K, false},
		{q5km, "blk.5.ffn_down_exps.weight", 128, tensor.Q5_K, false},
		{q5km, "blk.5.ffn_gate_inp.weight", 128, tensor.F32, false},
	} {
		got, err := c.mix.dtypeFor(c.name, 2048, 32, c.experts, false)
		if (err != nil) != c.wantErr || (!c.wantErr && got != c.want) {
			t.Errorf("%s %s, %d experts: %v, %v; want %v (error %v)", c.mix.name, c.name, c.experts, got, err, c.want, c.wantErr)
		}
	}
	if _, _, err := parseDType("q4_k_m"); err == nil {
		t.Error("parseDType accepted q4_k_m (an HF folder cannot hold it)")
	}
	for i, want := range map[int]bool{0: true, 1: false, 2: false, 3: true, 4: false, 5: false, 6: true, 7: true} {
		if useMoreBits(i, 8) != want {
			t.Errorf("useMoreBits(%d, 8) = %v", i, !want)
		}
	}
}
