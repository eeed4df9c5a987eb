package specialize

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"strings"
	"unicode/utf8"

	"github.com/tokenwise/tokenwise/tokenizer"
)

// Options control how a vocabulary is specialized.
type Options struct {
	Prune bool // drop tokens the corpus does not need
	// Add is the budget of new tokens: merges inside pre-tokens plus added tokens that span
	// pre-token boundaries (JSON punctuation with a key, recurring phrases).
	Add int
	// MaxNgram caps how many of the current tokens one new token may replace (default 8).
	MaxNgram int
	// InputWeight weighs a saved input token against a saved output token when choosing new
	// tokens (default 1/7: PRODUCT.md's ~7x cost of an output token).
	InputWeight float64
	// MinCount is the least weighted saving a new token must bring on the corpus (default 2).
	MinCount float64
	// MinDocs is how many distinct records (Doc.Group) an added token must recur in
	// (default 3). Savings alone reward a long string seen once — a whole training record,
	// memorized rather than the domain's structure.
	MinDocs int
	// Validation, when set, are texts not used for counting savings; an added token must occur
	// in at least MinSupport of their records (default 0.01), or it is not chosen: the check
	// that it generalizes beyond the records it was counted on.
	Validation []Doc
	MinSupport float64
	// MaxTokenBytes caps a new token's text (default 32: llama-cpp-python reads every piece
	// through a 32-byte buffer, LlamaModel.detokenize, and loses the text of a longer one).
	MaxTokenBytes int
	// Portable keeps added tokens to printable ASCII without spaces (see portable), the only
	// user-defined tokens transformers' GGUF tokenizer converter keeps
	// (AutoTokenizer.from_pretrained(dir, gguf_file=...), which vLLM and SGLang use for a bare
	// GGUF); it drops the others, so the GGUF tokenizes to more ids there. HF tokenizers and
	// llama.cpp match every added token, and most of a JSON domain's savings hold a space
	// (measured, TestPortableCost: the Qwen3 essay domain's held-out output tokens -65.7%
	// without it, -23.5% with it), so it is off by default.
	Portable bool
	// KeepIDs are old ids to keep besides those the corpus uses — e.g. the ids a model
	// generated, whose decoded text may re-encode differently.
	KeepIDs []int
	// Log, when set, receives progress lines.
	Log func(format string, args ...any)
}

// DefaultMaxTokenBytes is Options.MaxTokenBytes' default: the piece buffer of
// llama-cpp-python's LlamaModel.token_to_piece and detokenize (llama_cpp/_internals.py).
const DefaultMaxTokenBytes = 32

func (o *Options) defaults() {
	if o.MaxNgram <= 0 {
		o.MaxNgram = 8
	}
	if o.InputWeight <= 0 {
		o.InputWeight = 1.0 / 7
	}
	if o.MinCount <= 0 {
		o.MinCount = 2
	}
	if o.MinDocs <= 0 {
		o.MinDocs = 3
	}
	if o.MinSupport <= 0 {
		o.MinSupport = 0.01
	}
	if o.MaxTokenBytes <= 0 {
		o.MaxTokenBytes = DefaultMaxTokenBytes
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
}

// NewToken is a token the specialized vocabulary adds.
type NewToken struct {
	ID      int    `json:"id"`
	Content string `json:"content"` // vocabulary string (ByteLevel characters) or added-token text
	Text    string `json:"text"`    // the text it stands for
	Added   bool   `json:"added"`   // an added token (spans pre-tokens); else a BPE merge
	// OldID is the token's id in the old vocabulary when the string was already a token there
	// (pruned, now restored by a merge); -1 otherwise.
	OldID int `json:"old_id"`
	// Parts are the new ids it is built from: the two sides of its merge, or the tokens its
	// text had before (added tokens).
	Parts []int `json:"parts"`
	// OldParts are the old tokenizer's ids for Text (what FVT and AdaptiVocab average).
	OldParts []int `json:"old_parts"`
}

// Counts are corpus token totals per side.
type Counts struct {
	Input  int `json:"input"`
	Output int `json:"output"`
	Text   int `json:"text"`
	Longer int `json:"texts_longer"` // texts with more tokens than before (must be 0)
}

func (c *Counts) add(s Side, n int) {
	switch s {
	case Input:
		c.Input += n
	case Output:
		c.Output += n
	default:
		c.Text += n
	}
}

// Plan is a specialized tokenizer and how it relates to the old one.
type Plan struct {
	JSON      []byte               // the new tokenizer.json
	Tokenizer *tokenizer.Tokenizer // JSON, loaded
	Old       *tokenizer.Tokenizer
	// NewToOld maps each new id to its old id, -1 for a new token.
	NewToOld []int
	// OldToNew maps each old id to its new id, -1 for a pruned one.
	OldToNew  []int
	NewTokens []NewToken
	Kept      int // old tokens kept
	Merges    int // merges in the new file (kept + appended)
	Before    Counts
	After     Counts
	Dropped   []string // added-token candidates dropped because they lengthened a corpus text
	// Unsupported counts the added-token candidates passed over because they occur in fewer
	// than Options.MinSupport of the validation records.
	Unsupported int
}

// VocabBefore and VocabAfter are the tokenizers' vocabulary sizes (largest id + 1).
func (p *Plan) VocabBefore() int { return p.Old.VocabSize() }
func (p *Plan) VocabAfter() int  { return p.Tokenizer.VocabSize() }

// Build specializes the tokenizer.json bytes tokJSON to docs.
func Build(tokJSON []byte, docs []Doc, opts Options) (*Plan, error) {
	opts.defaults()
	old, err := tokenizer.FromJSON(tokJSON)
	if err != nil {
		return nil, err
	}
	tf, err := parseTokFile(tokJSON)
	if err != nil {
		return nil, err
	}
	V := old.VocabSize()
	p := &Plan{Old: old}

	// 1. What the corpus uses.
	used := make([]bool, V)
	oldIDs := make([][]int, len(docs))
	for i, d := range docs {
		oldIDs[i] = old.Encode(d.Text, false)
		for _, id := range oldIDs[i] {
			used[id] = true
		}
		p.Before.add(d.Side, len(oldIDs[i]))
	}
	opts.Log("corpus: %d texts, %d tokens", len(docs), p.Before.Input+p.Before.Output+p.Before.Text)

	// 2. The kept set: used ids, added tokens, the byte alphabet, and the route closure.
	keep := make([]bool, V)
	if !opts.Prune {
		for i := range keep {
			keep[i] = true
		}
	} else {
		copy(keep, used)
		for _, id := range opts.KeepIDs {
			if id < 0 || id >= V {
				return nil, fmt.Errorf("keep id %d: outside the vocabulary (%d)", id, V)
			}
			keep[id] = true
		}
		for _, a := range tf.added {
			if a.ID >= 0 && a.ID < V {
				keep[a.ID] = true
			}
		}
		mark := func(s string) {
			if id, ok := tf.vocab[s]; ok && id < V {
				keep[id] = true
			}
		}
		for b := 0; b < 256; b++ {
			if tf.byteLevel {
				mark(tokenizer.ByteLevelChar(byte(b)))
			}
			if tf.byteFallbk {
				mark(fmt.Sprintf("<0x%02X>", b))
			}
		}
		var unk string
		_ = jsonString(tf.model["unk_token"], &unk)
		if unk != "" {
			mark(unk)
		}
		rk := newRanks(tf.merges)
		var seeds []string
		for s, id := range tf.vocab {
			if id < V && keep[id] {
				seeds = append(seeds, s)
			}
		}
		for _, s := range seeds {
			// Every piece BPE builds on the way to s, and the characters it starts from.
			cs := chars(s)
			for _, c := range cs {
				mark(c)
			}
			rk.replay(cs, mark)
		}
	}
	// Old token strings by id: the model vocabulary's, and added tokens' contents.
	oldTok := make([]string, V)
	for s, id := range tf.vocab {
		if id < V {
			oldTok[id] = s
		}
	}
	for _, a := range tf.added {
		if a.ID >= 0 && a.ID < V && oldTok[a.ID] == "" {
			oldTok[a.ID] = a.Content
		}
	}
	st := &state{tf: tf, p: p, opts: &opts, docs: docs, oldTok: oldTok}
	for id := range V {
		if keep[id] && oldTok[id] != "" {
			st.kept = append(st.kept, id)
		}
	}
	inVocab := func(s string) bool { id, ok := tf.vocab[s]; return ok && keep[id] }
	for _, m := range tf.merges {
		if inVocab(m[0]) && inVocab(m[1]) && inVocab(m[0]+m[1]) {
			st.merges = append(st.merges, m)
		}
	}
	st.added = slices.Clone(tf.added)
	sort.SliceStable(st.added, func(i, j int) bool { return st.added[i].ID < st.added[j].ID })
	p.Kept = len(st.kept)
	opts.Log("kept %d of %d tokens, %d of %d merges", p.Kept, V, len(st.merges), len(tf.merges))

	if err := st.load(); err != nil {
		return nil, fmt.Errorf("pruned tokenizer: %w", err)
	}
	if opts.Add > 0 {
		if !tf.byteLevel {
			return nil, fmt.Errorf("--add needs a byte-level BPE tokenizer (GPT-2/Llama-3/Qwen style)")
		}
		nAdded := opts.Add - opts.Add/4 // a quarter is reserved for merges inside pre-tokens
		if err := st.chooseAdded(nAdded); err != nil {
			return nil, err
		}
		if err := st.chooseMerges(opts.Add - len(st.newAdded)); err != nil {
			return nil, err
		}
	}
	if err := st.finish(oldIDs); err != nil {
		return nil, err
	}
	return p, nil
}

func jsonString(raw []byte, dst *string) error {
	if isNull(raw) {
		return nil
	}
	return json.Unmarshal(raw, dst)
}

// state is the tokenizer under construction.
type state struct {
	tf     *tokFile
	p      *Plan
	opts   *Options
	docs   []Doc
	oldTok []string    // old token strings by old id (model vocabulary or added content)
	kept   []int       // kept old ids, ascending
	merges [][2]string // kept old merges
	added  []addedTok  // the old added tokens (old ids), by id

	base      *tokenizer.Tokenizer // the pruned tokenizer, nothing added
	newMerges [][2]string          // appended merges, in rank order
	newAdded  []string             // chosen added-token texts
	cur       *tokenizer.Tokenizer // the tokenizer of the current choice
	firstAdd  int                  // id of the first new added token in cur
}

// load builds the pruned tokenizer (no additions yet).
func (st *state) load() error {
	if err := st.assemble(); err != nil {
		return err
	}
	st.base = st.cur
	return nil
}

// assemble writes the tokenizer.json of the current choice, loads it, and fills the plan's
// NewTokens and the id maps. New ids: the kept old tokens in their old order, then the tokens
// the appended merges build, then the new added tokens. Every added token is also written
// into model.vocab under its id (as GPT-2-style files do): HF's loader gives an added token
// the model-vocabulary id of its content, so ids stay exactly where we put them, and without
// pruning every old id keeps its number.
func (st *state) assemble() error {
	p := st.p
	V := len(st.oldTok)
	p.NewToOld = p.NewToOld[:0]
	p.OldToNew = make([]int, V)
	for i := range p.OldToNew {
		p.OldToNew[i] = -1
	}
	vocab := make([]string, 0, len(st.kept))
	ids := make(map[string]int, len(st.kept))
	for _, o := range st.kept {
		p.OldToNew[o] = len(vocab)
		if _, dup := ids[st.oldTok[o]]; !dup {
			ids[st.oldTok[o]] = len(vocab)
		}
		p.NewToOld = append(p.NewToOld, o)
		vocab = append(vocab, st.oldTok[o])
	}
	merges := slices.Clone(st.merges)
	p.NewTokens = nil
	for _, m := range st.newMerges {
		a, okA := ids[m[0]]
		b, okB := ids[m[1]]
		if !okA || !okB {
			return fmt.Errorf("appended merge %q %q: a side is not in the vocabulary", m[0], m[1])
		}
		merges = append(merges, m)
		s := m[0] + m[1]
		if _, ok := ids[s]; ok {
			continue // a second route to a token the vocabulary has
		}
		id := len(vocab)
		vocab = append(vocab, s)
		ids[s] = id
		text := byteLevelText(s)
		nt := NewToken{ID: id, Content: s, Text: text, OldID: -1, Parts: []int{a, b}, OldParts: p.Old.Encode(text, false)}
		if o, ok := st.tf.vocab[s]; ok && o < V {
			nt.OldID = o
			p.OldToNew[o] = id
		}
		p.NewTokens = append(p.NewTokens, nt)
		p.NewToOld = append(p.NewToOld, nt.OldID)
	}
	var added []addedTok
	for _, a := range st.added {
		if a.ID < 0 || a.ID >= V || p.OldToNew[a.ID] < 0 {
			return fmt.Errorf("added token %q (id %d) was not kept", a.Content, a.ID)
		}
		a.ID = p.OldToNew[a.ID]
		added = append(added, a)
	}
	// An added token whose text a new merge happens to spell as well would be one string
	// under two ids; the merge wins.
	st.newAdded = slices.DeleteFunc(st.newAdded, func(text string) bool { _, dup := ids[text]; return dup })
	st.firstAdd = len(vocab)
	for _, text := range st.newAdded {
		id := len(vocab)
		vocab = append(vocab, text)
		added = append(added, addedTok{ID: id, Content: text})
		var parts []int
		if st.base != nil {
			parts = st.base.Encode(text, false)
		}
		p.NewTokens = append(p.NewTokens, NewToken{ID: id, Content: text, Text: text, Added: true, OldID: -1,
			Parts: parts, OldParts: p.Old.Encode(text, false)})
		p.NewToOld = append(p.NewToOld, -1)
	}
	addedIDs := make(map[string]int, len(added))
	for _, a := range added {
		addedIDs[a.Content] = a.ID
	}
	idOf := func(s string) (int, bool) {
		if id, ok := addedIDs[s]; ok {
			return id, true
		}
		id, ok := ids[s]
		return id, ok
	}
	data, err := st.tf.marshal(vocab, merges, added, idOf)
	if err != nil {
		return err
	}
	t, err := tokenizer.FromJSON(data)
	if err != nil {
		return fmt.Errorf("the specialized tokenizer.json does not load: %w", err)
	}
	st.cur, p.JSON, p.Tokenizer, p.Merges = t, data, t, len(merges)
	return nil
}

// finish checks the guarantees on the corpus, dropping added tokens that lengthen a text,
// and records the token counts.
func (st *state) finish(oldIDs [][]int) error {
	p := st.p
	for round := 0; ; round++ {
		if err := st.assemble(); err != nil {
			return err
		}
		p.After = Counts{}
		drop := map[string]bool{}
		for i, d := range st.docs {
			ids := st.cur.Encode(d.Text, false)
			p.After.add(d.Side, len(ids))
			bad := len(ids) > len(oldIDs[i])
			if !bad && st.cur.Decode(ids, false) != d.Text {
				bad = true
			}
			if !bad {
				continue
			}
			n := 0
			for _, id := range ids {
				if id >= st.firstAdd {
					drop[st.newAdded[id-st.firstAdd]] = true
					n++
				}
			}
			if n == 0 {
				return fmt.Errorf("corpus text %d (%s) encodes to %d tokens (was %d) or does not round-trip, with no added token to blame",
					i, d.Side, len(ids), len(oldIDs[i]))
			}
		}
		if len(drop) == 0 {
			break
		}
		if round >= 20 {
			return fmt.Errorf("added tokens still lengthen corpus texts after %d rounds of dropping", round)
		}
		var keep []string
		for _, s := range st.newAdded {
			if drop[s] {
				p.Dropped = append(p.Dropped, s)
			} else {
				keep = append(keep, s)
			}
		}
		st.opts.Log("dropping %d added tokens that lengthen corpus texts", len(drop))
		st.newAdded = keep
	}
	if len(st.newMerges) == 0 && len(st.newAdded) == 0 {
		// Pruning only: the same ids under the map, text by text.
		for i, d := range st.docs {
			ids := st.cur.Encode(d.Text, false)
			if len(ids) != len(oldIDs[i]) {
				return fmt.Errorf("pruning changed corpus text %d: %d tokens, was %d", i, len(ids), len(oldIDs[i]))
			}
			for k, id := range ids {
				if p.NewToOld[id] != oldIDs[i][k] {
					return fmt.Errorf("pruning changed corpus text %d at token %d: new id %d is old %d, was %d",
						i, k, id, p.NewToOld[id], oldIDs[i][k])
				}
			}
		}
	}
	return nil
}

var byteOfChar = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	for b := 0; b < 256; b++ {
		r, _ := utf8.DecodeRuneInString(tokenizer.ByteLevelChar(byte(b)))
		m[r] = byte(b)
	}
	return m
}()

// byteLevelText turns a ByteLevel vocabulary string back into the bytes it stands for.
func byteLevelText(s string) string {
	var b strings.Builder
	for _, r := range s {
		if c, ok := byteOfChar[r]; ok {
			b.WriteByte(c)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// byteLevelString is the ByteLevel vocabulary string of raw bytes.
func byteLevelString(raw string) string {
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		b.WriteString(tokenizer.ByteLevelChar(raw[i]))
	}
	return b.String()
}

// Evaluation compares the old and new tokenizers on texts the plan was not built from.
type Evaluation struct {
	Before    Counts `json:"before"`
	After     Counts `json:"after"`
	RoundTrip int    `json:"round_trip_failures"`
}

// Evaluate encodes docs with both tokenizers.
func (p *Plan) Evaluate(docs []Doc) Evaluation {
	var ev Evaluation
	for _, d := range docs {
		a := p.Old.Encode(d.Text, false)
		b := p.Tokenizer.Encode(d.Text, false)
		ev.Before.add(d.Side, len(a))
		ev.After.add(d.Side, len(b))
		if len(b) > len(a) {
			ev.After.Longer++
		}
		if p.Tokenizer.Decode(b, false) != d.Text {
			ev.RoundTrip++
		}
	}
	return ev
}
