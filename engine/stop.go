package engine

import "strings"

// StopText is the stop-string rule shared by the generation loop and the server: it passes
// generated text on, holding back any tail that could be the start of a stop string, and
// cuts the text before the first stop string. The zero value with Stops set is ready.
type StopText struct {
	Stops []string
	held  string // text not yet passed on: a possible stop-string prefix
}

// Write adds piece and returns the text that may be emitted now, and whether a stop string
// was found (then the text from the stop string on is dropped).
func (w *StopText) Write(piece string) (string, bool) {
	if len(w.Stops) == 0 {
		return piece, false
	}
	buf := w.held + piece
	// The held tail never contains a whole stop string, so the earliest match
	// in buf is the earliest in the whole text.
	cut := -1
	for _, s := range w.Stops {
		if i := strings.Index(buf, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		w.held = ""
		return buf[:cut], true
	}
	// Hold back the longest suffix that is a proper prefix of a stop string.
	// Stop strings are valid UTF-8, so that suffix starts on a character boundary.
	keep := 0
	for _, s := range w.Stops {
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

// Flush returns the held text at the end of generation.
func (w *StopText) Flush() string {
	h := w.held
	w.held = ""
	return h
}
