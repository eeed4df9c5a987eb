package cli

import "testing"

// The memory line names each part of the peak resident set and what the rest is, instead of
// a bare percentage over weights + KV.
func TestMemoryBreakdown(t *testing.T) {
	for _, tc := range []struct {
		peak, weights, kv int64
		want              string
	}{
		{20_800_000, 1_700_000, 200_000, "peak RSS 20.8 MB (weights 1.7 MB, KV cache 0.2 MB, other 18.9 MB: program and Go runtime, tokenizer, activations)"},
		{1_000_000, 1_700_000, 200_000, "peak RSS 1.0 MB (less than weights 1.7 MB + KV 0.2 MB: not all of the weights were resident)"},
	} {
		if got := memoryBreakdown(tc.peak, tc.weights, tc.kv); got != tc.want {
			t.Errorf("memoryBreakdown(%d, %d, %d) = %q, want %q", tc.peak, tc.weights, tc.kv, got, tc.want)
		}
	}
}
