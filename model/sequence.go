package model

import (
	"errors"
	"fmt"
)

// The contiguous KV cache: one sequence's keys and values, row p holding position p.

// Sequence is one conversation's state: the tokens seen so far, as keys and values per
// layer (float32, or f16 with Options.KVCache; grown as tokens arrive up to the sequence's
// maximum length).
type Sequence struct {
	m      *Model
	maxLen int
	n      int
	kv     kvStore // per layer, slices of mem; row = position
	mem    kvMem
}

// NewSequence makes a sequence that holds up to maxLen tokens (<= 0 or beyond the model's
// context: the model's context, MaxPositions).
func (m *Model) NewSequence(maxLen int) *Sequence {
	if maxLen <= 0 || maxLen > m.cfg.MaxPositions {
		maxLen = m.cfg.MaxPositions
	}
	s := &Sequence{m: m, maxLen: maxLen}
	if m.kvF16 {
		s.kv.k16, s.kv.v16 = make([][]uint16, m.cfg.NumLayers), make([][]uint16, m.cfg.NumLayers)
	} else {
		s.kv.k, s.kv.v = make([][]float32, m.cfg.NumLayers), make([][]float32, m.cfg.NumLayers)
	}
	return s
}

// Len is the number of tokens in the sequence so far.
func (s *Sequence) Len() int { return s.n }

// MaxLen is the most tokens the sequence can hold.
func (s *Sequence) MaxLen() int { return s.maxLen }

// Reset empties the sequence, keeping its cache memory.
func (s *Sequence) Reset() { s.n = 0 }

// reserve grows the cache to hold n tokens: capacity doubles, so a long generation
// reallocates only a few times, and a short one never holds a full-context cache. Once n is
// at least half of maxLen it takes maxLen at once: the same bound (capacity at most twice
// the tokens held), without a later copy that holds the old and the new cache together
// (a 128-token prompt in a 137-token sequence would otherwise grow 128 -> 137 on its first
// decode step).
func (s *Sequence) reserve(n int) {
	kvDim := s.m.cfg.NumKVHeads * s.m.cfg.HeadDim
	have := 0
	if s.kv.k16 != nil {
		have = len(s.kv.k16[0])
	} else {
		have = len(s.kv.k[0])
	}
	if have >= n*kvDim {
		return
	}
	c := min(max(n, 2*have/kvDim, 64), s.maxLen)
	if 2*n >= s.maxLen {
		c = s.maxLen
	}
	size, keep, spare := c*kvDim, s.n*kvDim, &s.m.spare
	if s.kv.k16 != nil {
		s.mem.k16 = growKV(s.kv.k16, size, keep, &spare.k16)
		s.mem.v16 = growKV(s.kv.v16, size, keep, &spare.v16)
		return
	}
	s.mem.k = growKV(s.kv.k, size, keep, &spare.k)
	s.mem.v = growKV(s.kv.v, size, keep, &spare.v)
}

// growKV replaces each layer's cache with one of size elements, keeping the first keep,
// and returns the memory they share: spare when it is large enough (then spare is taken),
// else a new allocation. One allocation for all layers starts at most one collection, where
// one per layer would cross the collector's goal, and start a cycle, again and again.
func growKV[T float32 | uint16](layers [][]T, size, keep int, spare *[]T) []T {
	need := len(layers) * size
	var all []T
	if cap(*spare) >= need {
		all = (*spare)[:need]
		*spare = nil
		clear(all) // as a new allocation: no stale keys or values of another sequence
	} else {
		all = make([]T, need)
	}
	for l := range layers {
		b := all[l*size : (l+1)*size : (l+1)*size]
		copy(b, layers[l][:keep])
		layers[l] = b
	}
	return all
}

// Release ends the sequence and keeps its cache memory for the model's next sequence (the
// larger of it and what the model already keeps): a loop of generations reuses one cache
// instead of allocating the next while the last one still waits for the collector (bench's
// peak RSS held both, +16 MB for Qwen3-0.6B). The sequence must not be used afterwards;
// Prefill and Decode on it return an error.
func (s *Sequence) Release() {
	if s.m != nil {
		s.m.keepSpare(s.mem)
	}
	*s = Sequence{maxLen: s.maxLen}
}

// keepSpare keeps mem as the cache memory for the model's next sequence or paged cache if it
// is larger than what the model keeps already.
func (m *Model) keepSpare(mem kvMem) {
	m.mu.Lock()
	if mem.bytes() > m.spare.bytes() {
		m.spare = mem
	}
	m.mu.Unlock()
}

// Prefill appends the prompt ids to the sequence in one batched pass and returns the
// logits of the last position only (the rest would be discarded).
func (m *Model) Prefill(s *Sequence, ids []int) ([]float32, error) {
	return m.PrefillInto(nil, s, ids)
}

// Decode appends one token and returns the logits for the next.
func (m *Model) Decode(s *Sequence, id int) ([]float32, error) {
	return m.DecodeInto(nil, s, id)
}

// PrefillInto is Prefill writing the logits into dst when its capacity holds the vocabulary (else
// into a new slice, which it returns). A generation loop that passes the same dst every
// step allocates no vocabulary-sized slice per token: 0.6 MB a step for a 150k vocabulary,
// garbage that would make the collector run, and the heap grow, all through decoding.
func (m *Model) PrefillInto(dst []float32, s *Sequence, ids []int) ([]float32, error) {
	if len(ids) == 0 {
		return nil, errors.New("prefill: no tokens")
	}
	return m.forward(dst, s, ids)
}

// DecodeInto is Decode writing the logits into dst as PrefillInto does.
func (m *Model) DecodeInto(dst []float32, s *Sequence, id int) ([]float32, error) {
	return m.forward(dst, s, []int{id})
}

// prefillChunk bounds the tokens of one batched pass: activations grow with it (a 4096-token
// prompt of a 4B model would need ~300 MB for the MLP alone), while the weights are already
// reused 512 times per read.
const prefillChunk = 512

// forward checks ids, runs them through every layer at positions s.Len()... in chunks, and
// returns the logits of the last one.
func (m *Model) forward(dst []float32, s *Sequence, ids []int) ([]float32, error) {
	if s.m == nil {
		return nil, errors.New("sequence released")
	}
	if s.m != m {
		return nil, errors.New("sequence belongs to another model")
	}
	c := m.cfg
	if s.n+len(ids) > s.maxLen {
		return nil, fmt.Errorf("%d tokens exceed the context: the sequence holds %d and has room for %d (max %d)", len(ids), s.n, s.maxLen-s.n, s.maxLen)
	}
	for i, id := range ids {
		if id < 0 || id >= c.VocabSize {
			return nil, fmt.Errorf("token %d at position %d: outside the vocabulary (size %d)", id, s.n+i, c.VocabSize)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s.reserve(s.n + len(ids))
	// Prompts longer than m.chunk go in several passes (prefillChunk says why); only the
	// last asks for logits.
	r := &m.run
	for len(ids) > 0 {
		n := min(len(ids), m.chunk)
		ch := passChunk{tokens: ids[:n], start: s.n, kv: kvView{store: &s.kv}, last: n == len(ids)}
		r.chunks = append(r.chunks[:0], ch)
		m.pass(r, r.chunks)
		s.n += n
		ids = ids[n:]
	}
	if cap(dst) < c.VocabSize {
		dst = make([]float32, c.VocabSize) // the caller keeps it: not the run's buffer
	}
	logits := m.logits(r, dst)
	r.forget()
	return logits, nil
}
