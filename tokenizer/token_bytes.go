package tokenizer

// TokenBytes returns the bytes one token stands for on its own, before the UTF-8 repair that
// Decode applies: a byte-level token holding part of a character (Llama-3's "\xe2") or a
// byte-fallback token ("<0xE2>") gives its raw byte, where Decode gives U+FFFD. Other tokens
// give the bytes of their Decode text. nil for an unknown id.
func (t *Tokenizer) TokenBytes(id int) []byte {
	if id < 0 || id >= len(t.known) || !t.known[id] {
		return nil
	}
	if t.decBytes != nil {
		return []byte(t.decBytes[id])
	}
	tok := t.idToToken[id]
	switch {
	case hasDecoder[byteLevelDec](t.decoder):
		return byteLevelDec{}.tokenBytes(nil, tok)
	case hasDecoder[byteFallbackDec](t.decoder):
		if b, ok := byteToken(tok); ok {
			return []byte{b}
		}
	}
	return []byte(t.decode([]int{id}, false))
}

// hasDecoder reports whether d is, or is a Sequence holding, a decoder of type D.
func hasDecoder[D decoder](d decoder) bool {
	switch d := d.(type) {
	case D:
		return true
	case decSequence:
		for _, e := range d {
			if hasDecoder[D](e) {
				return true
			}
		}
	}
	return false
}
