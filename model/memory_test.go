package model

import (
	"math"
	"runtime"
	"testing"
	"unsafe"
	"weak"

	"github.com/tokenwise/tokenwise/tensor"
)

// kvCap is the number of tokens a sequence's cache holds now.
func kvCap(s *Sequence) int {
	kvDim := s.m.cfg.NumKVHeads * s.m.cfg.HeadDim
	if s.kv.k16 != nil {
		return len(s.kv.k16[0]) / kvDim
	}
	return len(s.kv.k[0]) / kvDim
}

// The cache doubles, except that once the tokens fill half of maxLen it takes maxLen at
// once; decoding across every growth gives the logits a one-pass prefill gives.
func TestSequenceGrowth(t *testing.T) {
	for _, kv := range []tensor.DType{tensor.F32, tensor.F16} {
		t.Run(kv.String(), func(t *testing.T) {
			m, _, _ := testModelOpts(t, "llama-gqa-tied", tensor.F32, Options{Threads: 2, KVCache: kv})
			// 60 prompt tokens in a 100-token sequence: one allocation of 100.
			s := m.NewSequence(100)
			ids := make([]int, 70)
			for i := range ids {
				ids[i] = (7*i + 3) % m.cfg.VocabSize
			}
			if _, err := m.Prefill(s, ids[:60]); err != nil {
				t.Fatal(err)
			}
			if c := kvCap(s); c != 100 {
				t.Fatalf("after a 60-token prefill of a 100-token sequence: capacity %d, want 100", c)
			}
			// A growing sequence (max 128): 64 for a short prompt, then 128 at token 65.
			g := m.NewSequence(0)
			var got []float32
			var err error
			for i, id := range ids {
				if got, err = m.Decode(g, id); err != nil {
					t.Fatal(err)
				}
				want := 64
				if i+1 > 64 {
					want = 128
				}
				if c := kvCap(g); c != want {
					t.Fatalf("after %d tokens: capacity %d, want %d", i+1, c, want)
				}
			}
			one := m.NewSequence(0)
			want, err := m.Prefill(one, ids)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 1e-4*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("logit %d: decoded through two growths %g, one prefill %g", i, got[i], want[i])
				}
			}
		})
	}
}

// The model's kept buffers do not keep a finished sequence (and its cache) reachable.
func TestForwardForgetsSequence(t *testing.T) {
	m, _, _ := testModel(t, "llama-gqa-tied", tensor.F32, 2)
	s := m.NewSequence(0)
	if _, err := m.Prefill(s, testPrompt); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Decode(s, 1); err != nil {
		t.Fatal(err)
	}
	w := weak.Make(s)
	s = nil
	runtime.GC()
	if w.Value() != nil {
		t.Fatal("a dropped sequence is still reachable after a forward pass")
	}
}

// PrefillInto and DecodeInto write into dst when it is large enough and give the logits
// Prefill and Decode give.
func TestForwardInto(t *testing.T) {
	m, _, _ := testModel(t, "qwen3-headdim", tensor.F32, 2)
	a, b := m.NewSequence(0), m.NewSequence(0)
	want, err := m.Prefill(a, testPrompt)
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]float32, 3, m.cfg.VocabSize+5)
	got, err := m.PrefillInto(dst, b, testPrompt)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != m.cfg.VocabSize || &got[0] != &dst[0] {
		t.Fatalf("PrefillInto: %d logits, in dst %v; want %d in dst", len(got), &got[0] == &dst[0], m.cfg.VocabSize)
	}
	for step := range 4 {
		id := argmax(want)
		if argmax(got) != id {
			t.Fatalf("step %d: argmax %d into dst, %d allocated", step, argmax(got), id)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("step %d logit %d: %g into dst, %g allocated", step, i, got[i], want[i])
			}
		}
		if want, err = m.Decode(a, id); err != nil {
			t.Fatal(err)
		}
		if got, err = m.DecodeInto(got, b, id); err != nil {
			t.Fatal(err)
		}
		if &got[0] != &dst[0] {
			t.Fatalf("step %d: DecodeInto did not reuse dst", step)
		}
	}
	// Too small a dst: a new slice.
	small := make([]float32, m.cfg.VocabSize-1)
	got, err = m.DecodeInto(small, b, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != m.cfg.VocabSize || &got[0] == &small[0] {
		t.Fatal("DecodeInto with a short dst: want a new slice of the vocabulary")
	}
}

// A released sequence's cache serves the next sequence, cleared; the released one refuses
// further use; results match a sequence with a new cache.
func TestReleaseReusesCache(t *testing.T) {
	for _, kv := range []tensor.DType{tensor.F32, tensor.F16} {
		t.Run(kv.String(), func(t *testing.T) {
			m, _, _ := testModelOpts(t, "qwen3-headdim", tensor.F32, Options{Threads: 2, KVCache: kv})
			first := func(s *Sequence) *byte {
				if s.kv.k16 != nil {
					return (*byte)(unsafe.Pointer(&s.kv.k16[0][0]))
				}
				return (*byte)(unsafe.Pointer(&s.kv.k[0][0]))
			}
			a := m.NewSequence(0)
			long := make([]int, 70)
			for i := range long {
				long[i] = (5*i + 1) % m.cfg.VocabSize
			}
			if _, err := m.Prefill(a, long); err != nil {
				t.Fatal(err)
			}
			mem := first(a)
			a.Release()
			if _, err := m.Decode(a, 1); err == nil {
				t.Fatal("Decode on a released sequence: no error")
			}
			a.Release() // twice is harmless

			b := m.NewSequence(0)
			got, err := m.Prefill(b, testPrompt)
			if err != nil {
				t.Fatal(err)
			}
			if first(b) != mem {
				t.Fatal("the next sequence did not reuse the released cache")
			}
			if c := kvCap(b); c != 64 {
				t.Fatalf("reused cache: capacity %d, want 64 for a %d-token prompt", c, len(testPrompt))
			}
			// Everything past the prompt is zero, as in a new allocation.
			kvDim := m.cfg.NumKVHeads * m.cfg.HeadDim
			for l := range m.cfg.NumLayers {
				if kv == tensor.F16 {
					for i, x := range b.kv.v16[l][len(testPrompt)*kvDim:] {
						if x != 0 {
							t.Fatalf("layer %d value %d past the prompt: %#x, want 0", l, i, x)
						}
					}
				} else {
					for i, x := range b.kv.v[l][len(testPrompt)*kvDim:] {
						if x != 0 {
							t.Fatalf("layer %d value %d past the prompt: %g, want 0", l, i, x)
						}
					}
				}
			}
			c := m.NewSequence(0) // a new cache: the spare is taken
			want, err := m.Prefill(c, testPrompt)
			if err != nil {
				t.Fatal(err)
			}
			if first(c) == mem {
				t.Fatal("two live sequences share a cache")
			}
			for step := range 8 {
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("step %d logit %d: %g on the reused cache, %g on a new one", step, i, got[i], want[i])
					}
				}
				id := argmax(want)
				if got, err = m.Decode(b, id); err != nil {
					t.Fatal(err)
				}
				if want, err = m.Decode(c, id); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
