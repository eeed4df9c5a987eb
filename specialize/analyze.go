package specialize

import (
	"fmt"
	"html"
	"io"
	"regexp"
	"sort"
	"strings"

	"github.com/tokenwise/tokenwise/tokenizer"
)

// SideStats are the totals of one side of the corpus.
type SideStats struct {
	Texts         int     `json:"texts"`
	Tokens        int     `json:"tokens"`
	Bytes         int     `json:"bytes"`
	Words         int     `json:"words"`
	TokensPerByte float64 `json:"tokens_per_byte"`
	TokensPerWord float64 `json:"tokens_per_word"`
}

// Fragment is a piece of text and how many tokens it costs.
type Fragment struct {
	Text   string   `json:"text"`
	Count  int      `json:"count"`  // occurrences
	Tokens int      `json:"tokens"` // tokens per occurrence
	Pieces []string `json:"pieces"`
}

// Analysis is how a corpus fragments under a tokenizer and what specialization would save.
type Analysis struct {
	Sides     map[string]*SideStats `json:"sides"`
	VocabSize int                   `json:"vocab_size"`
	UsedIDs   int                   `json:"used_ids"`
	Coverage  float64               `json:"coverage"` // used ids / vocabulary
	// IDsFor are how many of the most frequent ids cover 50%, 90%, 99% of all tokens.
	IDsFor50, IDsFor90, IDsFor99 int
	TopTokens                    []Fragment `json:"top_tokens"`
	Fragmented                   []Fragment `json:"most_fragmented_words"` // by tokens spent beyond one per word; empty when every word is one token
	// DistinctWords is how many different words (pre-tokens, added tokens aside) the corpus has.
	DistinctWords int        `json:"distinct_words"`
	JSONKeys      []Fragment `json:"json_keys"`
	Projection    *Report    `json:"projection"`
	// LM-head rows and bytes of one decode step, before and after (bytes need the hidden size).
	HeadRowsBefore  int   `json:"lm_head_rows_before"`
	HeadRowsAfter   int   `json:"lm_head_rows_after"`
	HeadBytesBefore int64 `json:"lm_head_bytes_before,omitempty"`
	HeadBytesAfter  int64 `json:"lm_head_bytes_after,omitempty"`

	samples []sample
}

type sample struct {
	text     string
	old, new []string
}

var jsonKey = regexp.MustCompile(`"([^"\\\n]{1,48})":`)

// Analyze measures docs under the tokenizer.json tokJSON and projects specialization with
// opts (the same Build that `specialize` runs). hidden and bytesPerElem, when > 0, turn
// LM-head rows into bytes per decode step; progress, when set, is called as texts finish.
func Analyze(tokJSON []byte, docs []Doc, opts Options, hidden, bytesPerElem int, progress func(done, total int)) (*Analysis, error) {
	tok, err := tokenizer.FromJSON(tokJSON)
	if err != nil {
		return nil, err
	}
	a := &Analysis{Sides: map[string]*SideStats{}, VocabSize: tok.VocabSize()}
	idCount := map[int]int{}
	type pieceStat struct {
		count  int
		tokens []int
	}
	pieces := map[string]*pieceStat{}
	keys := map[string]int{}
	total := 0
	for i, d := range docs {
		ss := a.Sides[d.Side.String()]
		if ss == nil {
			ss = &SideStats{}
			a.Sides[d.Side.String()] = ss
		}
		ps := tok.Pieces(d.Text)
		n := 0
		for _, pc := range ps {
			n += len(pc.IDs)
			for _, id := range pc.IDs {
				idCount[id]++
			}
			if pc.Added {
				continue
			}
			st := pieces[pc.Text]
			if st == nil {
				st = &pieceStat{tokens: pc.IDs}
				pieces[pc.Text] = st
			}
			st.count++
		}
		ss.Texts++
		ss.Tokens += n
		ss.Bytes += len(d.Text)
		ss.Words += len(strings.Fields(d.Text))
		total += n
		for _, m := range jsonKey.FindAllStringSubmatch(d.Text, -1) {
			keys[m[0]]++
		}
		if progress != nil {
			progress(i+1, len(docs))
		}
	}
	for _, ss := range a.Sides {
		if ss.Bytes > 0 {
			ss.TokensPerByte = float64(ss.Tokens) / float64(ss.Bytes)
		}
		if ss.Words > 0 {
			ss.TokensPerWord = float64(ss.Tokens) / float64(ss.Words)
		}
	}
	a.UsedIDs = len(idCount)
	if a.VocabSize > 0 {
		a.Coverage = float64(a.UsedIDs) / float64(a.VocabSize)
	}
	type idc struct{ id, n int }
	var ids []idc
	for id, n := range idCount {
		ids = append(ids, idc{id, n})
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].n > ids[j].n || (ids[i].n == ids[j].n && ids[i].id < ids[j].id) })
	cum := 0
	for i, x := range ids {
		cum += x.n
		if a.IDsFor50 == 0 && 2*cum >= total {
			a.IDsFor50 = i + 1
		}
		if a.IDsFor90 == 0 && 10*cum >= 9*total {
			a.IDsFor90 = i + 1
		}
		if a.IDsFor99 == 0 && 100*cum >= 99*total {
			a.IDsFor99 = i + 1
		}
		if i < 20 {
			a.TopTokens = append(a.TopTokens, Fragment{Text: tok.Decode([]int{x.id}, false), Count: x.n, Tokens: 1})
		}
	}
	pieceStrs := func(idl []int) []string {
		var out []string
		for _, id := range idl {
			out = append(out, tok.Decode([]int{id}, false))
		}
		return out
	}
	a.DistinctWords = len(pieces)
	a.Fragmented = []Fragment{}
	for s, st := range pieces {
		if len(st.tokens) > 1 {
			a.Fragmented = append(a.Fragmented, Fragment{Text: s, Count: st.count, Tokens: len(st.tokens), Pieces: pieceStrs(st.tokens)})
		}
	}
	sort.Slice(a.Fragmented, func(i, j int) bool {
		x, y := a.Fragmented[i], a.Fragmented[j]
		if cx, cy := x.Count*(x.Tokens-1), y.Count*(y.Tokens-1); cx != cy {
			return cx > cy
		}
		return x.Text < y.Text
	})
	a.Fragmented = a.Fragmented[:min(len(a.Fragmented), 25)]
	for k, n := range keys {
		idl := tok.Encode(k, false)
		a.JSONKeys = append(a.JSONKeys, Fragment{Text: k, Count: n, Tokens: len(idl), Pieces: pieceStrs(idl)})
	}
	sort.Slice(a.JSONKeys, func(i, j int) bool {
		x, y := a.JSONKeys[i], a.JSONKeys[j]
		if x.Count*x.Tokens != y.Count*y.Tokens {
			return x.Count*x.Tokens > y.Count*y.Tokens
		}
		return x.Text < y.Text
	})
	a.JSONKeys = a.JSONKeys[:min(len(a.JSONKeys), 25)]

	p, err := Build(tokJSON, docs, opts)
	if err != nil {
		return nil, fmt.Errorf("projection: %w", err)
	}
	a.Projection = NewReport(p, nil)
	a.HeadRowsBefore = a.VocabSize
	a.HeadRowsAfter = (p.VocabAfter() + 63) / 64 * 64
	if hidden > 0 && bytesPerElem > 0 {
		a.HeadBytesBefore = int64(a.HeadRowsBefore) * int64(hidden) * int64(bytesPerElem)
		a.HeadBytesAfter = int64(a.HeadRowsAfter) * int64(hidden) * int64(bytesPerElem)
	}
	for _, d := range docs {
		if len(a.samples) >= 6 {
			break
		}
		if d.Side == Input && len(docs) > 1 {
			continue
		}
		a.samples = append(a.samples, sample{d.Text, pieceStrs(tok.Encode(d.Text, false)), splitIDs(p.Tokenizer, d.Text)})
	}
	return a, nil
}

func splitIDs(t *tokenizer.Tokenizer, s string) []string {
	var out []string
	for _, id := range t.Encode(s, false) {
		out = append(out, t.Decode([]int{id}, false))
	}
	return out
}

// Text writes the analysis for people.
func (a *Analysis) Text(w io.Writer) {
	for _, k := range []string{"input", "output", "text"} {
		if s := a.Sides[k]; s != nil {
			fmt.Fprintf(w, "%-6s %6d texts %9d tokens %10d bytes  %.3f tokens/byte  %.2f tokens/word\n",
				k, s.Texts, s.Tokens, s.Bytes, s.TokensPerByte, s.TokensPerWord)
		}
	}
	fmt.Fprintf(w, "vocabulary coverage: %d of %d ids used (%.2f%%); %d / %d / %d ids cover 50%% / 90%% / 99%% of tokens\n",
		a.UsedIDs, a.VocabSize, 100*a.Coverage, a.IDsFor50, a.IDsFor90, a.IDsFor99)
	if len(a.Fragmented) == 0 {
		fmt.Fprintf(w, "\nmost fragmented words: none; each of the corpus's %d distinct words is one token\n", a.DistinctWords)
	} else {
		fmt.Fprintf(w, "\nmost fragmented words (occurrences x tokens):\n")
		for _, f := range a.Fragmented[:min(len(a.Fragmented), 12)] {
			fmt.Fprintf(w, "  %6d x %d  %q  %q\n", f.Count, f.Tokens, f.Text, f.Pieces)
		}
	}
	if len(a.JSONKeys) > 0 {
		fmt.Fprintf(w, "\nJSON keys:\n")
		for _, f := range a.JSONKeys[:min(len(a.JSONKeys), 12)] {
			fmt.Fprintf(w, "  %6d x %d  %s  %q\n", f.Count, f.Tokens, f.Text, f.Pieces)
		}
	}
	fmt.Fprintf(w, "\nprojected specialization:\n%s", a.Projection.Text())
	fmt.Fprintf(w, "LM-head rows per decode step: %d -> %d", a.HeadRowsBefore, a.HeadRowsAfter)
	if a.HeadBytesBefore > 0 {
		fmt.Fprintf(w, " (%d -> %d bytes)", a.HeadBytesBefore, a.HeadBytesAfter)
	}
	fmt.Fprintln(w)
}

// HTML writes a self-contained page: the numbers, the fragmented words, and sample texts
// with their token boundaries before and after specialization.
func (a *Analysis) HTML(w io.Writer) error {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><meta charset="utf-8"><title>tokenwise analyze</title><style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}
.t span{white-space:pre-wrap;font-family:monospace}.t span:nth-child(odd){background:#dbeafe}.t span:nth-child(even){background:#fde68a}
</style></head><body><h1>Corpus fragmentation</h1><pre>`)
	var txt strings.Builder
	a.Text(&txt)
	b.WriteString(html.EscapeString(txt.String()))
	b.WriteString("</pre><h2>Samples: tokens before and after</h2>")
	for _, s := range a.samples {
		fmt.Fprintf(&b, "<p>%d tokens before:</p><div class=t>", len(s.old))
		for _, p := range s.old {
			fmt.Fprintf(&b, "<span>%s</span>", html.EscapeString(p))
		}
		fmt.Fprintf(&b, "</div><p>%d tokens after:</p><div class=t>", len(s.new))
		for _, p := range s.new {
			fmt.Fprintf(&b, "<span>%s</span>", html.EscapeString(p))
		}
		b.WriteString("</div><hr>")
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
