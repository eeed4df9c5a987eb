package tokenizer

import (
	"sync"
	"unicode/utf8"
)

// byteToRune is GPT-2's byte-to-character table (HF's bytes_char): printable Latin-1 bytes
// map to themselves, the other 68 bytes to U+0100 onwards in byte order.
var byteToRune [256]rune

// byteToString holds the same characters as UTF-8 strings, so mapping a byte costs one load.
var byteToString [256]string

var runeToByteTab = map[rune]byte{}

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 256 + n
			n++
		}
		byteToString[b] = string(byteToRune[b])
		runeToByteTab[byteToRune[b]] = byte(b)
	}
}

// runeToByte inverts byteToRune. Every mapped character is below U+0144, so a flat check
// handles the common case before the map.
func runeToByte(r rune) (byte, bool) {
	if r < 0x144 {
		b, ok := runeToByteTab[r]
		return b, ok
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

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func unicodeIsNumeric(r rune) bool { return isNumeric(r) }

// encode runs the whole pipeline: added tokens on the raw text, normalizer, added tokens on the
// normalized text, pre-tokenizers, BPE, post-processor.
func (t *Tokenizer) encode(text string, addSpecial, track bool) ([]int, [][2]int) {
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)

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
	spans := sc.spans[:0]
	spans = t.added.splitAdded(root, t.added.raw, spans)

	// Normalize the text spans, then look for normalized added tokens in them.
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

	// Pre-tokenize: each step splits every text span further; token spans pass through.
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
	sc.spans = spans[:0]
	if t.post != nil {
		ids, offs = t.post.process(t, ids, offs, vals, addSpecial)
	}
	return ids, offs
}
