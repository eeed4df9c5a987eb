package tokenizer

// Accessors for vocabulary specialization (package specialize): it needs to see a text the
// way the model sees it — added-token matches, pre-tokens, and each pre-token's ids — to
// count which ids a corpus uses and which merges would shorten it. Owned by the
// specialization work; the rest of the package does not depend on this file.

// Piece is one unit of an encoded text before post-processing: an added token matched in the
// text (Added, one id), or one pre-token with the ids the model gives it. Text is the piece as
// the model reads it: the raw bytes of a ByteLevel pre-token (not its ByteLevel characters),
// the normalized and pre-tokenized string otherwise.
type Piece struct {
	Text  string
	IDs   []int
	Added bool
}

// Pieces splits text like Encode(text, false) and returns its pieces in order; the ids of all
// pieces concatenated are exactly Encode(text, false).
func (t *Tokenizer) Pieces(text string) []Piece {
	sc, _ := t.pool.Get().(*scratch)
	if sc == nil {
		sc = new(scratch)
	}
	defer t.pool.Put(sc)

	root := span{s: text, first: true, id: -1}
	spans := t.added.splitAdded(root, t.added.raw, nil)
	if t.normalizer != nil || t.added.norm != nil {
		var next []span
		for _, sp := range spans {
			if sp.id >= 0 {
				next = append(next, sp)
				continue
			}
			if t.normalizer != nil {
				sp = t.normalizer.normalize(sp)
			}
			next = t.added.splitAdded(sp, t.added.norm, next)
		}
		spans = next
	}
	for _, p := range t.pre {
		var next []span
		for _, sp := range spans {
			if sp.id >= 0 {
				next = append(next, sp)
				continue
			}
			next = p.split(sp, next, sc)
		}
		spans = next
	}
	out := make([]Piece, 0, len(spans))
	for _, sp := range spans {
		if sp.id >= 0 {
			out = append(out, Piece{Text: sp.s, IDs: []int{int(sp.id)}, Added: true})
			continue
		}
		sc.toks = t.model.tokenize(sp.s, &sc.bpe, sc.toks[:0])
		ids := make([]int, len(sc.toks))
		for i, tk := range sc.toks {
			ids[i] = int(tk.id)
		}
		out = append(out, Piece{Text: sp.s, IDs: ids})
	}
	return out
}

// ByteLevelInput reports whether pieces reach the model as raw bytes that it maps to
// ByteLevel characters itself (GPT-2 style byte-level BPE).
func (t *Tokenizer) ByteLevelInput() bool { return t.model.byteInput }

// ByteLevelChar is the ByteLevel alphabet's character for byte b ("Ġ" for a space).
func ByteLevelChar(b byte) string { return string(byteToRune[b]) }
