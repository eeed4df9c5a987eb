package specialize

import "unicode/utf8"

// ranks is a BPE merge table: the rank of each pair of token strings.
type ranks map[[2]string]int

func newRanks(merges [][2]string) ranks {
	r := make(ranks, len(merges))
	for i, m := range merges {
		r[m] = i // a pair listed twice keeps the later rank, as HF does
	}
	return r
}

// replay runs BPE on a word given as its initial symbols (one per character of its vocabulary
// string) the way HF's merge_word does — always the lowest-ranked adjacent pair, leftmost on a
// tie — and returns the final tokens. visit, when not nil, sees every piece a merge builds.
// Words are short (a pre-token), so a linear scan per merge beats a heap here.
func (r ranks) replay(syms []string, visit func(string)) []string {
	syms = append([]string(nil), syms...)
	for len(syms) > 1 {
		best, at := -1, -1
		for i := 0; i+1 < len(syms); i++ {
			if rk, ok := r[[2]string{syms[i], syms[i+1]}]; ok && (best < 0 || rk < best) {
				best, at = rk, i
			}
		}
		if at < 0 {
			break
		}
		merged := syms[at] + syms[at+1]
		if visit != nil {
			visit(merged)
		}
		syms[at] = merged
		syms = append(syms[:at+1], syms[at+2:]...)
	}
	return syms
}

// chars splits a vocabulary string into its characters, BPE's initial symbols.
func chars(s string) []string {
	out := make([]string, 0, len(s))
	for len(s) > 0 {
		_, n := utf8.DecodeRuneInString(s)
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}
