package server

import "strings"

// stopText passes generated text on, holding back a tail that could be the start of a stop
// string, and cuts the text before the first stop string. (The engine's generation loop has
// the same rule unexported; this one returns the text instead of calling back, since the
// server hands each token's text to its own request stream.)
type stopText struct {
	stops []string
	held  string
}

// write adds piece and returns the text that can be emitted now, and whether a stop string
// was found (the text after it is dropped).
func (w *stopText) write(piece string) (string, bool) {
	if len(w.stops) == 0 {
		return piece, false
	}
	buf := w.held + piece
	cut := -1
	for _, s := range w.stops {
		if i := strings.Index(buf, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		w.held = ""
		return buf[:cut], true
	}
	keep := 0
	for _, s := range w.stops {
		for k := min(len(s)-1, len(buf)); k > keep; k-- {
			if strings.HasSuffix(buf, s[:k]) {
				keep = k
				break
			}
		}
	}
	w.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], false
}

// flush returns the held text at the end of generation.
func (w *stopText) flush() string {
	h := w.held
	w.held = ""
	return h
}
