package specialize

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// matcher splits text around added-token strings leftmost-longest, as HF's AddedVocabulary
// does with its Aho-Corasick automaton (MatchKind::LeftmostLongest).
type matcher struct {
	byFirst map[byte][]string // longest first
}

func newMatcher(strs []string) *matcher {
	m := &matcher{byFirst: map[byte][]string{}}
	for _, s := range strs {
		m.byFirst[s[0]] = append(m.byFirst[s[0]], s)
	}
	for _, l := range m.byFirst {
		sort.Slice(l, func(i, j int) bool { return len(l[i]) > len(l[j]) })
	}
	return m
}

// segment is a [a,b) range of a text; added marks an added-token match.
type segment struct {
	a, b  int
	added bool
}

func (m *matcher) split(text string) []segment {
	var out []segment
	last := 0
	for i := 0; i < len(text); {
		hit := ""
		for _, s := range m.byFirst[text[i]] {
			if strings.HasPrefix(text[i:], s) {
				hit = s
				break
			}
		}
		if hit == "" {
			i++
			continue
		}
		if last < i {
			out = append(out, segment{last, i, false})
		}
		out = append(out, segment{i, i + len(hit), true})
		i += len(hit)
		last = i
	}
	if last < len(text) {
		out = append(out, segment{last, len(text), false})
	}
	return out
}

// unit is one piece of a text as the current tokenizer sees it: a pre-token (n tokens), a
// chosen added token (n = 1), or an old added token (n = -1: a barrier no new token crosses).
type unit struct {
	a, b  int
	n     int
	added bool // a chosen added token
}

// units splits text into units, or returns nil when the pre-tokens do not spell the text
// (a normalizer changed it), in which case the text cannot propose added tokens.
func (st *state) units(text string, m *matcher) []unit {
	var us []unit
	for _, sg := range m.split(text) {
		if sg.added {
			us = append(us, unit{sg.a, sg.b, 1, true})
			continue
		}
		pos := sg.a
		for _, pc := range st.base.Pieces(text[sg.a:sg.b]) {
			if !strings.HasPrefix(text[pos:sg.b], pc.Text) {
				return nil
			}
			n := len(pc.IDs)
			if pc.Added {
				n = -1
			}
			us = append(us, unit{pos, pos + len(pc.Text), n, false})
			pos += len(pc.Text)
		}
		if pos != sg.b {
			return nil
		}
	}
	return us
}

func (st *state) weight(s Side) float64 {
	if s == Input {
		return st.opts.InputWeight
	}
	return 1
}

// decodeSafe reports whether HF's ByteLevel decoder gives s back for an added token whose
// content is s: it maps a token through its byte table only when every character is in the
// table, which for non-ASCII characters would turn them into single bytes.
func decodeSafe(s string) bool {
	ascii := true
	for _, r := range s {
		if _, ok := byteOfChar[r]; !ok {
			return true // decoded from its own UTF-8 bytes
		}
		if r >= utf8.RuneSelf {
			ascii = false
		}
	}
	return ascii
}

// chooseAdded picks up to budget added tokens that span pre-token boundaries, greedily by
// weighted savings (AdaptiVocab's n-gram selection): every round re-splits the corpus with the
// tokens chosen so far, so savings already taken by a chosen token are not counted again.
func (st *state) chooseAdded(budget int) error {
	K := st.opts.MaxNgram
	batch := max(8, budget/8)
	existing := map[string]bool{}
	for _, a := range st.added {
		existing[a.Content] = true
	}
	var oldAdded []string
	for _, a := range st.added {
		oldAdded = append(oldAdded, a.Content)
	}
	unsupported := map[string]bool{}
	groups := recordGroups(st.docs)
	sup := newSupport(st.opts.Validation)
	for round := 0; len(st.newAdded) < budget; round++ {
		m := newMatcher(st.newAdded)
		stats := map[string]*candStat{}
		for di, d := range st.docs {
			w := st.weight(d.Side)
			us := st.units(d.Text, m)
			for i := range us {
				if us[i].n < 0 || !st.allowed(d.Text[us[i].a:us[i].b]) {
					continue
				}
				tot := us[i].n
				for j := i + 1; j < len(us) && j-i < K; j++ {
					if us[j].n < 0 || !st.allowed(d.Text[us[j].a:us[j].b]) {
						break
					}
					tot += us[j].n
					if tot > K || us[j].b-us[i].a > st.opts.MaxTokenBytes {
						break
					}
					s := d.Text[us[i].a:us[j].b]
					c := stats[s]
					if c == nil {
						c = &candStat{last: -1}
						stats[s] = c
					}
					c.v += w * float64(tot-1)
					if g := groups[di]; c.last != g {
						c.last, c.docs = g, c.docs+1
					}
				}
			}
		}
		type cand struct {
			s string
			v float64
		}
		var cs []cand
		for s, c := range stats {
			if c.v < st.opts.MinCount || c.docs < st.opts.MinDocs || !utf8.ValidString(s) || !decodeSafe(s) || existing[s] {
				continue
			}
			if _, ok := st.tf.vocab[s]; ok {
				continue
			}
			cs = append(cs, cand{s, c.v})
		}
		sort.Slice(cs, func(i, j int) bool {
			if cs[i].v != cs[j].v {
				return cs[i].v > cs[j].v
			}
			return cs[i].s < cs[j].s
		})
		var picked []string
		for _, c := range cs {
			if len(picked) >= batch || len(st.newAdded)+len(picked) >= budget {
				break
			}
			clash := false
			for _, q := range picked {
				if strings.Contains(q, c.s) || strings.Contains(c.s, q) {
					clash = true
					break
				}
			}
			// No added token may overlap another (a proper suffix of one the prefix of the
			// other): then HF's leftmost-longest matching and llama.cpp's longest-token-first
			// partition split every text the same way, and the savings counted for a token are
			// not taken away by a neighbour it overlaps. (Measured on the domain corpus, 200
			// train / 100 held-out examples, --add 256: held-out output tokens 1455 with
			// overlapping tokens allowed, 1014 without.)
			if !clash {
				clash = overlapsAny(c.s, picked) || overlapsAny(c.s, st.newAdded) || overlapsAny(c.s, oldAdded)
			}
			if !clash && sup.fraction(c.s) < st.opts.MinSupport {
				unsupported[c.s] = true
				continue
			}
			if !clash {
				picked = append(picked, c.s)
			}
		}
		if len(picked) == 0 {
			break
		}
		for _, s := range picked {
			existing[s] = true
		}
		st.newAdded = append(st.newAdded, picked...)
		st.opts.Log("added tokens: round %d, %d chosen (best %q saves %.0f)", round, len(st.newAdded), picked[0], stats[picked[0]].v)
	}
	st.p.Unsupported = len(unsupported)
	return nil
}

// candStat is an added-token candidate's weighted savings and the records it recurs in.
type candStat struct {
	v    float64
	docs int // distinct records
	last int // the record that counted last
}

// allowed reports whether an added token may hold the text piece s: within the byte cap and,
// with Options.Portable, printable ASCII with no space (see portable).
func (st *state) allowed(s string) bool {
	return len(s) <= st.opts.MaxTokenBytes && (!st.opts.Portable || portable(s))
}

// portable reports whether every byte of s is printable ASCII other than space: the
// characters that transformers' GGUF tokenizer converter keeps in a user-defined token of a
// byte-level vocabulary. It spells the vocabulary in GPT-2's byte alphabet and adds a
// user-defined token only when its text is a key of that vocabulary, which holds for a text
// whose characters all stand for themselves there: '!' to '~'. A space is 'Ġ' in the
// alphabet, so " name" is stored under "Ġname" and the token " name" is dropped (measured:
// transformers 5.24.0, integrations/gguf/gguf_tokenizer_mapping.py; TestTransformersGGUF).
func portable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}

// recordGroups gives each doc its record: Doc.Group, or a record of its own for Group 0.
func recordGroups(docs []Doc) []int {
	g := make([]int, len(docs))
	for i, d := range docs {
		if d.Group != 0 {
			g[i] = d.Group
		} else {
			g[i] = -(i + 1)
		}
	}
	return g
}

// support measures the fraction of validation records a text occurs in.
type support struct {
	recs  []string // each record's texts, joined by a NUL no token holds
	cache map[string]float64
}

func newSupport(docs []Doc) *support {
	sp := &support{cache: map[string]float64{}}
	groups := recordGroups(docs)
	for i, d := range docs {
		if i > 0 && groups[i] == groups[i-1] {
			sp.recs[len(sp.recs)-1] += "\x00" + d.Text
		} else {
			sp.recs = append(sp.recs, d.Text)
		}
	}
	return sp
}

// fraction is 1 when there are no validation records: nothing to hold a token against.
func (sp *support) fraction(s string) float64 {
	if len(sp.recs) == 0 {
		return 1
	}
	if f, ok := sp.cache[s]; ok {
		return f
	}
	n := 0
	for _, r := range sp.recs {
		if strings.Contains(r, s) {
			n++
		}
	}
	f := float64(n) / float64(len(sp.recs))
	sp.cache[s] = f
	return f
}

// chooseMerges appends up to budget merges inside pre-tokens: BPE training continued on the
// corpus as the specialized tokenizer splits it. Appended after every original merge, a new
// merge only joins tokens the original merges have finished, so no text can get longer
// (the length-preserving construction of arXiv 2509.26124).
func (st *state) chooseMerges(budget int) error {
	if budget <= 0 {
		return nil
	}
	m := newMatcher(st.newAdded)
	weights := map[string]float64{}
	for _, d := range st.docs {
		w := st.weight(d.Side)
		us := st.units(d.Text, m)
		for _, u := range us {
			if u.n > 1 || (u.n == 1 && !u.added) {
				weights[d.Text[u.a:u.b]] += w
			}
		}
	}
	rk := newRanks(st.merges)
	next := len(st.merges)
	have := map[string]bool{}
	for _, o := range st.kept {
		have[st.oldTok[o]] = true
	}
	type word struct {
		syms []string
		toks []string
		w    float64
	}
	var words []*word
	for raw, w := range weights {
		bl := byteLevelString(raw)
		wd := &word{syms: chars(bl), w: w}
		wd.toks = st.tokenize(rk, have, bl, wd.syms)
		if len(wd.toks) > 1 {
			words = append(words, wd)
		}
	}
	sort.Slice(words, func(i, j int) bool { return strings.Join(words[i].syms, "") < strings.Join(words[j].syms, "") })
	for len(st.newMerges) < budget {
		counts := map[[2]string]float64{}
		for _, wd := range words {
			for i := 0; i+1 < len(wd.toks); i++ {
				counts[[2]string{wd.toks[i], wd.toks[i+1]}] += wd.w
			}
		}
		var best [2]string
		bestV := 0.0
		for pr, v := range counts {
			if utf8.RuneCountInString(pr[0])+utf8.RuneCountInString(pr[1]) > st.opts.MaxTokenBytes {
				continue // one ByteLevel character per byte
			}
			if v > bestV || (v == bestV && (pr[0]+"\x00"+pr[1]) < (best[0]+"\x00"+best[1])) {
				best, bestV = pr, v
			}
		}
		if bestV < st.opts.MinCount {
			break
		}
		rk[best] = next
		next++
		st.newMerges = append(st.newMerges, best)
		have[best[0]+best[1]] = true
		for _, wd := range words {
			for i := 0; i+1 < len(wd.toks); i++ {
				if wd.toks[i] == best[0] && wd.toks[i+1] == best[1] {
					wd.toks = st.tokenize(rk, have, strings.Join(wd.syms, ""), wd.syms)
					break
				}
			}
		}
	}
	if len(st.newMerges) > 0 {
		st.opts.Log("merges: %d appended", len(st.newMerges))
	}
	return nil
}

// tokenize is the BPE model on one pre-token (its ByteLevel string s and characters syms).
func (st *state) tokenize(rk ranks, have map[string]bool, s string, syms []string) []string {
	if st.tf.ignoreMrg && have[s] {
		return []string{s}
	}
	return rk.replay(syms, nil)
}

// overlaps reports whether a proper suffix of x is a proper prefix of y: two occurrences in a
// text could then overlap, and matchers that order matches differently would disagree.
func overlaps(x, y string) bool {
	for k := 1; k < len(x) && k < len(y); k++ {
		if x[len(x)-k:] == y[:k] {
			return true
		}
	}
	return false
}

func overlapsAny(s string, others []string) bool {
	if overlaps(s, s) {
		return true
	}
	for _, o := range others {
		if overlaps(s, o) || overlaps(o, s) {
			return true
		}
	}
	return false
}

// UnportableAdded counts the added tokens of a tokenizer.json that are not special and not
// portable: the user-defined tokens a GGUF of it would carry that transformers' GGUF
// tokenizer converter drops. total is the number of non-special added tokens.
func UnportableAdded(tokJSON []byte) (n, total int, err error) {
	var tf struct {
		Added []struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(tokJSON, &tf); err != nil {
		return 0, 0, fmt.Errorf("tokenizer.json: %w", err)
	}
	for _, a := range tf.Added {
		if a.Special {
			continue
		}
		total++
		if !portable(a.Content) {
			n++
		}
	}
	return n, total, nil
}
