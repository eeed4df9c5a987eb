package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tokenwise/tokenwise/tokenizer/internal/pattern"
)

// decoder is HF's Decoder::decode_chain: token strings in, strings out; Decode joins them.
type decoder interface {
	decodeChain(toks []string) []string
}

func (t *Tokenizer) decode(ids []int, skipSpecial bool) string {
	skip := func(id int) bool {
		return id < 0 || id >= len(t.known) || !t.known[id] || (skipSpecial && t.special[id])
	}
	if t.decBytes != nil {
		// ByteLevel decoder alone: each token's bytes were worked out at load time, so
		// decoding is concatenation plus the final UTF-8 repair.
		n := 0
		for _, id := range ids {
			if !skip(id) {
				n += len(t.decBytes[id])
			}
		}
		b := make([]byte, 0, n)
		for _, id := range ids {
			if !skip(id) {
				b = append(b, t.decBytes[id]...)
			}
		}
		return lossyUTF8(b)
	}
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		if skip(id) {
			continue
		}
		if t.decText != nil {
			toks = append(toks, t.decText[id])
		} else {
			toks = append(toks, t.idToToken[id])
		}
	}
	if t.decoder == nil {
		return strings.Join(toks, " ")
	}
	if t.decRest == nil {
		return strings.Join(toks, "")
	}
	return strings.Join(t.decRest.decodeChain(toks), "")
}

// prepareDecode precomputes what the decoder does to each token on its own: the bytes of
// every token for a lone ByteLevel decoder, or the text after the leading Replace decoders
// of a Sequence (Gemma's "▁" -> " "), so Decode does not redo it for every occurrence.
func (t *Tokenizer) prepareDecode() {
	t.decRest = t.decoder
	switch d := t.decoder.(type) {
	case byteLevelDec:
		t.decBytes = make([]string, len(t.idToToken))
		for id, tok := range t.idToToken {
			t.decBytes[id] = string(d.tokenBytes(nil, tok))
		}
	case decSequence:
		k := 0
		for k < len(d) {
			if _, ok := d[k].(*replaceDec); !ok {
				break
			}
			k++
		}
		if k == 0 {
			return
		}
		t.decText = make([]string, len(t.idToToken))
		for id, tok := range t.idToToken {
			for _, r := range d[:k] {
				tok = r.(*replaceDec).r.normalize(span{s: tok, id: -1}).s
			}
			t.decText[id] = tok
		}
		t.decRest = nil
		if k < len(d) {
			t.decRest = d[k:]
		}
	}
}

// byteLevelDec turns ByteLevel characters back into bytes. A token with a character outside
// the 256-entry alphabet (an added token, say) is kept as its own text, as in HF.
type byteLevelDec struct{}

func (d byteLevelDec) decodeChain(toks []string) []string {
	var b []byte
	for _, tok := range toks {
		b = d.tokenBytes(b, tok)
	}
	return []string{lossyUTF8(b)}
}

// tokenBytes appends the bytes one token stands for.
func (byteLevelDec) tokenBytes(b []byte, tok string) []byte {
	start := len(b)
	for _, r := range tok {
		v, in := runeToByte(r)
		if !in {
			return append(b[:start], tok...)
		}
		b = append(b, v)
	}
	return b
}

// lossyUTF8 is Rust's String::from_utf8_lossy: each maximal invalid subsequence becomes one
// U+FFFD (Go's strings.ToValidUTF8 would fold a whole run of bad bytes into one).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			out = append(out, b[i:i+size]...)
			i += size
			continue
		}
		i += invalidPrefixLen(b[i:])
		out = append(out, "\uFFFD"...)
	}
	return string(out)
}

// invalidPrefixLen is the length of the maximal prefix of b that starts a valid UTF-8
// sequence but does not complete it (at least 1).
func invalidPrefixLen(b []byte) int {
	c := b[0]
	var n int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		n = 2
	case c >= 0xE0 && c <= 0xEF:
		n = 3
		if c == 0xE0 {
			lo = 0xA0
		} else if c == 0xED {
			hi = 0x9F
		}
	case c >= 0xF0 && c <= 0xF4:
		n = 4
		if c == 0xF0 {
			lo = 0x90
		} else if c == 0xF4 {
			hi = 0x8F
		}
	default:
		return 1
	}
	k := 1
	for k < n && k < len(b) {
		if k == 1 {
			if b[k] < lo || b[k] > hi {
				break
			}
		} else if b[k] < 0x80 || b[k] > 0xBF {
			break
		}
		k++
	}
	return k
}

type metaspaceDec struct {
	repl   rune
	scheme int
}

func (d metaspaceDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, tok := range toks {
		var sb strings.Builder
		for _, r := range tok {
			if r == d.repl {
				if i == 0 && d.scheme != prependNever {
					continue
				}
				sb.WriteByte(' ')
			} else {
				sb.WriteRune(r)
			}
		}
		out[i] = sb.String()
	}
	return out
}

type replaceDec struct{ r replace }

func (d *replaceDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, tok := range toks {
		out[i] = d.r.normalize(span{s: tok, id: -1}).s
	}
	return out
}

type byteFallbackDec struct{}

func (byteFallbackDec) decodeChain(toks []string) []string {
	out := make([]string, 0, len(toks))
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, tok := range toks {
		if b, ok := byteToken(tok); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, tok)
	}
	flush()
	return out
}

// byteToken parses "<0xNN>".
func byteToken(tok string) (byte, bool) {
	if len(tok) != 6 || tok[:3] != "<0x" || tok[5] != '>' {
		return 0, false
	}
	hi, ok1 := hexVal(tok[3])
	lo, ok2 := hexVal(tok[4])
	return hi<<4 | lo, ok1 && ok2
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

type fuseDec struct{}

func (fuseDec) decodeChain(toks []string) []string { return []string{strings.Join(toks, "")} }

type stripDec struct {
	content     rune
	start, stop int
}

func (d stripDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, tok := range toks {
		rs := []rune(tok)
		a := 0
		for k := 0; k < d.start && k < len(rs); k++ {
			if rs[k] != d.content {
				break
			}
			a = k + 1
		}
		b := len(rs)
		for k := 0; k < d.stop && len(rs)-k-1 >= 0; k++ {
			idx := len(rs) - k - 1
			if rs[idx] != d.content {
				break
			}
			b = idx
		}
		if b < a {
			b = a
		}
		out[i] = string(rs[a:b])
	}
	return out
}

type wordPieceDec struct {
	prefix  string
	cleanup bool
}

func (d wordPieceDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, tok := range toks {
		if i != 0 {
			if strings.HasPrefix(tok, d.prefix) {
				tok = tok[len(d.prefix):]
			} else {
				tok = " " + tok
			}
		}
		if d.cleanup {
			tok = wordPieceCleanup.Replace(tok)
		}
		out[i] = tok
	}
	return out
}

// HF applies these one after another; none of the patterns overlaps another's output, so a
// single Replacer gives the same text.
var wordPieceCleanup = strings.NewReplacer(" .", ".", " ?", "?", " !", "!", " ,", ",",
	" ' ", "'", " n't", "n't", " 'm", "'m", " do not", " don't", " 's", "'s", " 've", "'ve", " 're", "'re")

type bpeDec struct{ suffix string }

func (d bpeDec) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, tok := range toks {
		rep := " "
		if i == len(toks)-1 {
			rep = ""
		}
		out[i] = strings.ReplaceAll(tok, d.suffix, rep)
	}
	return out
}

type decSequence []decoder

func (q decSequence) decodeChain(toks []string) []string {
	for _, d := range q {
		toks = d.decodeChain(toks)
	}
	return toks
}

func parseDecoder(path string, raw json.RawMessage) (decoder, error) {
	if isNull(raw) {
		return nil, nil
	}
	o, err := decodeObj(path, raw)
	if err != nil {
		return nil, err
	}
	typ, err := o.typ()
	if err != nil {
		return nil, err
	}
	switch typ {
	case "ByteLevel":
		return byteLevelDec{}, nil
	case "ByteFallback":
		return byteFallbackDec{}, nil
	case "Fuse":
		return fuseDec{}, nil
	case "Metaspace":
		d := metaspaceDec{}
		if d.repl, err = o.char("replacement", '▁'); err != nil {
			return nil, err
		}
		if d.scheme, err = parsePrependScheme(o); err != nil {
			return nil, err
		}
		return d, nil
	case "Replace":
		d := &replaceDec{}
		var re pattern.Matcher
		if d.r.lit, re, err = o.patternOf("pattern"); err != nil {
			return nil, err
		}
		d.r.re = re
		if err := o.need("content", &d.r.content); err != nil {
			return nil, err
		}
		return d, nil
	case "Strip":
		d := stripDec{}
		if d.content, err = o.char("content", ' '); err != nil {
			return nil, err
		}
		if err := o.get("start", &d.start); err != nil {
			return nil, err
		}
		if err := o.get("stop", &d.stop); err != nil {
			return nil, err
		}
		return d, nil
	case "WordPiece":
		d := wordPieceDec{prefix: "##", cleanup: true}
		if err := o.get("prefix", &d.prefix); err != nil {
			return nil, err
		}
		if err := o.get("cleanup", &d.cleanup); err != nil {
			return nil, err
		}
		return d, nil
	case "BPEDecoder":
		d := bpeDec{suffix: "</w>"}
		if err := o.get("suffix", &d.suffix); err != nil {
			return nil, err
		}
		return d, nil
	case "Sequence":
		q, err := seq(o, path, "decoders", parseDecoder)
		return decSequence(q), err
	}
	return nil, fmt.Errorf("%s.type: unsupported decoder %q", path, typ)
}

// StreamDecoder turns a stream of ids into text pieces that are always whole UTF-8, like HF's
// DecodeStream: it decodes a short window of recent ids and emits what goes beyond the text
// already emitted, once that does not end in U+FFFD (an incomplete character).
type StreamDecoder struct {
	t           *Tokenizer
	skipSpecial bool
	ids         []int
	prefix      string
	prefixIndex int
}

// NewStreamDecoder starts a stream.
func (t *Tokenizer) NewStreamDecoder(skipSpecial bool) *StreamDecoder {
	return &StreamDecoder{t: t, skipSpecial: skipSpecial}
}

// Next adds one id and returns the text it completes ("" when none yet).
func (d *StreamDecoder) Next(id int) string {
	if d.prefix == "" && len(d.ids) > 0 {
		p := d.t.Decode(d.ids, d.skipSpecial)
		if !strings.HasSuffix(p, "\uFFFD") {
			d.prefix = p
			d.prefixIndex = len(d.ids)
		}
	}
	d.ids = append(d.ids, id)
	s := d.t.Decode(d.ids, d.skipSpecial)
	if len(s) <= len(d.prefix) || strings.HasSuffix(s, "\uFFFD") {
		return ""
	}
	if !strings.HasPrefix(s, d.prefix) {
		// HF reports an error here (a decoder that rewrites earlier text, e.g. Metaspace's
		// first-token rule); we restart the window from this id and emit the new text.
		d.ids = append(d.ids[:0], id)
		d.prefix = d.t.Decode(d.ids, d.skipSpecial)
		d.prefixIndex = 0
		return d.prefix
	}
	newText := s[len(d.prefix):]
	newPrefixIndex := len(d.ids) - d.prefixIndex
	d.ids = append(d.ids[:0], d.ids[d.prefixIndex:]...)
	d.prefix = d.t.Decode(d.ids, d.skipSpecial)
	d.prefixIndex = newPrefixIndex
	return newText
}
