package tokenizer

import "unicode/utf8"

// byteToRune is GPT-2's byte-to-character table (HF's bytes_char): printable Latin-1 bytes
// map to themselves, the other 68 bytes to U+0100 onwards in byte order.
var byteToRune [256]rune

// byteToString holds the same characters as UTF-8 strings, so mapping a byte costs one load.
var byteToString [256]string

// runeToByteTab inverts byteToRune; every mapped character is below U+0144. -1: not one.
var runeToByteTab [0x144]int16

func init() {
	for i := range runeToByteTab {
		runeToByteTab[i] = -1
	}
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 256 + n
			n++
		}
		byteToString[b] = string(byteToRune[b])
		runeToByteTab[byteToRune[b]] = int16(b)
	}
}

// runeToByte inverts byteToRune.
func runeToByte(r rune) (byte, bool) {
	if r >= 0 && r < 0x144 && runeToByteTab[r] >= 0 {
		return byte(runeToByteTab[r]), true
	}
	return 0, false
}

// scratch is the per-call working memory of Encode, recycled through a sync.Pool so that
// steady-state encoding allocates only the returned slices.
type scratch struct {
	spans, spans2, tmp []span
	ranges             [][2]int
	parts              []part
	toks               []bpeToken
	bpe                bpeScratch
}

func unicodeIsNumeric(r rune) bool { return isNumeric(r) }

// encode runs the whole pipeline: added tokens on the raw text, normalizer, added tokens on the
// normalized text, pre-tokenizers, BPE, post-processor.
func (t *Tokenizer) encode(text string, addSpecial, track bool) ([]int, [][2]int) {
	// The pool belongs to the Tokenizer: a scratch carries a piece cache for this vocabulary.
	sc, _ := t.pool.Get().(*scratch)
	if sc == nil {
		sc = new(scratch)
	}
	defer t.pool.Put(sc)

	spans := t.normalizedSpans(text, track, sc)

	// Fast path for the GPT-style files (one Isolated regex Split, ByteLevel folded into the
	// model): feed each regex match straight to the model, with no span list in between.
	if sp, ok := t.fastSplit(); ok && !track {
		ids := make([]int, 0, len(text)/3+4)
		for _, s := range spans {
			if s.id >= 0 {
				ids = append(ids, int(s.id))
				continue
			}
			sc.ranges = sp.re.FindAll(s.s, sc.ranges[:0])
			keepGaps := sp.behavior == behIsolated
			prev := 0
			for _, m := range sc.ranges {
				if keepGaps && prev < m[0] {
					ids = t.modelIDs(s.s[prev:m[0]], sc, ids)
				}
				ids = t.modelIDs(s.s[m[0]:m[1]], sc, ids)
				prev = m[1]
			}
			if keepGaps && prev < len(s.s) {
				ids = t.modelIDs(s.s[prev:], sc, ids)
			}
		}
		sc.release(spans)
		ids, _ = t.finish(ids, nil, nil, addSpecial)
		return ids, nil
	}

	spans = t.preTokenized(spans, sc)

	ids := make([]int, 0, len(text)/3+4)
	var offs [][2]int
	var vals []string
	if track {
		offs = make([][2]int, 0, cap(ids))
	}
	for _, sp := range spans {
		if sp.id >= 0 {
			ids = append(ids, int(sp.id))
			if track {
				r := sp.rangeOf(0, len(sp.s))
				offs = append(offs, [2]int{int(r[0]), int(r[1])})
				vals = append(vals, sp.s)
			}
			continue
		}
		sc.toks = t.model.tokenize(sp.s, &sc.bpe, sc.toks[:0])
		for _, tk := range sc.toks {
			ids = append(ids, int(tk.id))
			if track {
				r := sp.rangeOf(int(tk.start), int(tk.end))
				offs = append(offs, [2]int{int(r[0]), int(r[1])})
				vals = append(vals, t.idToToken[tk.id])
			}
		}
	}
	sc.release(spans)
	return t.finish(ids, offs, vals, addSpecial)
}

// normalizedSpans is the first half of the pipeline: added tokens matched on the raw text,
// the normalizer run on the text between them, then normalized added tokens matched. Spans
// with id >= 0 are added tokens. The result lives in sc until the next call.
func (t *Tokenizer) normalizedSpans(text string, track bool, sc *scratch) []span {
	root := span{s: text, first: true, id: -1}
	if track {
		// Like HF, every byte starts aligned to its whole character, so a token holding part
		// of a character (byte-level BPE) reports the character's range.
		root.align = make([][2]int32, len(text))
		for i := 0; i < len(text); {
			_, size := utf8.DecodeRuneInString(text[i:])
			for k := i; k < i+size; k++ {
				root.align[k] = [2]int32{int32(i), int32(i + size)}
			}
			i += size
		}
	}
	spans := t.added.splitAdded(root, t.added.raw, sc.spans[:0])
	if t.normalizer != nil || t.added.norm != nil {
		next := sc.spans2[:0]
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
		spans, sc.spans2 = next, spans
	}
	return spans
}

// preTokenized runs the pre-tokenizers: each step splits every text span further; added-token
// spans pass through. The pieces it returns are what the model encodes one by one.
func (t *Tokenizer) preTokenized(spans []span, sc *scratch) []span {
	for _, p := range t.pre {
		next := sc.spans2[:0]
		for _, sp := range spans {
			if sp.id >= 0 {
				next = append(next, sp)
				continue
			}
			next = p.split(sp, next, sc)
		}
		spans, sc.spans2 = next, spans
	}
	return spans
}

// release drops the scratch's references to the text (so a pooled scratch does not keep a
// large input alive) and keeps the buffers.
func (sc *scratch) release(spans []span) {
	clear(spans)
	clear(sc.spans2[:cap(sc.spans2)])
	sc.spans = spans[:0]
	sc.spans2 = sc.spans2[:0]
}

// finish is HF's post_process for one sequence: truncate, add special tokens, pad.
func (t *Tokenizer) finish(ids []int, offs [][2]int, vals []string, addSpecial bool) ([]int, [][2]int) {
	if tr := t.trunc; tr != nil {
		limit := tr.maxLen
		if addSpecial && t.post != nil {
			limit = max(0, limit-t.post.added())
		}
		if len(ids) > limit {
			a, b := 0, limit
			if tr.left {
				a, b = len(ids)-limit, len(ids)
			}
			ids = ids[a:b]
			if offs != nil {
				offs, vals = offs[a:b], vals[a:b]
			}
		}
	}
	if t.post != nil {
		ids, offs = t.post.process(t, ids, offs, vals, addSpecial)
	}
	if t.pad != nil {
		ids, offs = t.pad.apply(ids, offs, len(ids))
	}
	return ids, offs
}

// apply pads ids (and offsets, with empty ranges) to target, or the fixed length, rounded up
// to the multiple.
func (p *padding) apply(ids []int, offs [][2]int, target int) ([]int, [][2]int) {
	if p.fixed > 0 {
		target = p.fixed
	}
	if p.multiple > 0 && target%p.multiple != 0 {
		target += p.multiple - target%p.multiple
	}
	n := target - len(ids)
	if n <= 0 {
		return ids, offs
	}
	padIDs := make([]int, n)
	for i := range padIDs {
		padIDs[i] = p.padID
	}
	if p.left {
		ids = append(padIDs, ids...)
		if offs != nil {
			offs = append(make([][2]int, n), offs...)
		}
	} else {
		ids = append(ids, padIDs...)
		if offs != nil {
			offs = append(offs, make([][2]int, n)...)
		}
	}
	return ids, offs
}

// padBatch pads a batch to its longest member, as HF's encode_batch does with BatchLongest.
func (t *Tokenizer) padBatch(out [][]int) {
	if t.pad == nil || t.pad.fixed > 0 {
		return
	}
	longest := 0
	for _, ids := range out {
		longest = max(longest, len(ids))
	}
	for i := range out {
		out[i], _ = t.pad.apply(out[i], nil, longest)
	}
}

// fastSplit reports whether the pre-tokenizer is a single regex Split that keeps the matches
// as pieces: Isolated (GPT-2, Llama-3, Qwen) or Removed with invert (o200k). For Isolated the
// text between matches is a piece too; for inverted Removed it is dropped.
func (t *Tokenizer) fastSplit() (*splitPre, bool) {
	if len(t.pre) != 1 {
		return nil, false
	}
	p, ok := t.pre[0].(*splitPre)
	return p, ok && p.re != nil && ((p.behavior == behIsolated && !p.invert) ||
		(p.behavior == behRemoved && p.invert))
}

func (t *Tokenizer) modelIDs(piece string, sc *scratch, ids []int) []int {
	sc.toks = t.model.tokenize(piece, &sc.bpe, sc.toks[:0])
	for _, tk := range sc.toks {
		ids = append(ids, int(tk.id))
	}
	return ids
}
