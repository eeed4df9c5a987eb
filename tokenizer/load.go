package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/tokenwise/tokenwise/tokenizer/internal/pattern"
)

// obj is one JSON object of tokenizer.json with its path, for error messages that say where.
type obj struct {
	path string
	m    map[string]json.RawMessage
}

func decodeObj(path string, raw json.RawMessage) (obj, error) {
	o := obj{path: path}
	if err := json.Unmarshal(raw, &o.m); err != nil {
		return o, fmt.Errorf("%s: want an object: %w", path, jsonErr(err))
	}
	return o, nil
}

// jsonErr drops encoding/json's Go type names, which mean nothing to a user.
func jsonErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("got JSON %s", te.Value)
	}
	return err
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null"))
}

// get decodes field key into v; absent or null leaves v unchanged.
func (o obj) get(key string, v any) error {
	raw, ok := o.m[key]
	if !ok || isNull(raw) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s.%s: %w", o.path, key, jsonErr(err))
	}
	return nil
}

func (o obj) need(key string, v any) error {
	raw, ok := o.m[key]
	if !ok || isNull(raw) {
		return fmt.Errorf("%s.%s: missing", o.path, key)
	}
	return o.get(key, v)
}

func (o obj) typ() (string, error) {
	var t string
	if err := o.need("type", &t); err != nil {
		return "", err
	}
	return t, nil
}

func (o obj) list(key string) ([]json.RawMessage, error) {
	var l []json.RawMessage
	if err := o.need(key, &l); err != nil {
		return nil, err
	}
	return l, nil
}

// seq parses the list under key as a Sequence of components with parse, dropping the nil
// (no-op) ones; errors name each element as path.key[i]. Normalizers, decoders and
// post-processors all nest this way.
func seq[T comparable](o obj, path, key string, parse func(string, json.RawMessage) (T, error)) ([]T, error) {
	l, err := o.list(key)
	if err != nil {
		return nil, err
	}
	var zero T
	var q []T
	for i, r := range l {
		c, err := parse(fmt.Sprintf("%s.%s[%d]", path, key, i), r)
		if err != nil {
			return nil, err
		}
		if c != zero {
			q = append(q, c)
		}
	}
	return q, nil
}

func (o obj) char(key string, def rune) (rune, error) {
	s := string(def)
	if err := o.get(key, &s); err != nil {
		return 0, err
	}
	if utf8.RuneCountInString(s) != 1 {
		return 0, fmt.Errorf("%s.%s: %q is not one character", o.path, key, s)
	}
	r, _ := utf8.DecodeRuneInString(s)
	return r, nil
}

// patternOf reads {"String": "..."} or {"Regex": "..."}; re is nil for a literal.
func (o obj) patternOf(key string) (lit string, re pattern.Matcher, err error) {
	var p struct {
		String *string
		Regex  *string
	}
	if err := o.need(key, &p); err != nil {
		return "", nil, err
	}
	switch {
	case p.String != nil:
		return *p.String, nil, nil
	case p.Regex != nil:
		m, err := pattern.Compile(*p.Regex)
		if err != nil {
			return "", nil, fmt.Errorf("%s.%s.Regex: %w", o.path, key, err)
		}
		return "", m, nil
	}
	return "", nil, fmt.Errorf("%s.%s: want {\"String\": ...} or {\"Regex\": ...}", o.path, key)
}

type fileJSON struct {
	Version                                                              *string
	AddedTokens, Normalizer, PreTokenizer, Model, PostProcessor, Decoder []byte
	Truncation, Padding                                                  []byte

	vocab  map[string]int // model.vocab and model.merges, parsed in place
	merges [][2]string
}

// readTopLevel splits tokenizer.json into its parts with the hand-written scanner: running
// encoding/json over the whole file, even into json.RawMessage, validates and copies all
// 33 MB of Gemma-3's vocabulary twice and took most of the load time.
func readTopLevel(data []byte) (fileJSON, error) {
	var f fileJSON
	s := &jsonScanner{b: data}
	modelHandlers := map[string]func(*jsonScanner) error{
		"vocab": func(s *jsonScanner) (err error) {
			f.vocab, err = s.vocab()
			return err
		},
		"merges": func(s *jsonScanner) (err error) {
			f.merges, err = s.merges()
			return err
		},
	}
	fields, err := s.fields(map[string]func(*jsonScanner) error{
		"model": func(s *jsonScanner) error {
			if s.peek() != '{' {
				return s.skipValue() // reported by parseModel
			}
			_, err := s.fields(modelHandlers)
			return err
		},
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return f, err
	}
	if v, ok := fields["version"]; ok && !isNull(v) {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return f, fmt.Errorf("version: %w", jsonErr(err))
		}
		f.Version = &s
	}
	f.AddedTokens = fields["added_tokens"]
	f.Normalizer = fields["normalizer"]
	f.PreTokenizer = fields["pre_tokenizer"]
	f.Model = fields["model"]
	f.PostProcessor = fields["post_processor"]
	f.Decoder = fields["decoder"]
	f.Truncation = fields["truncation"]
	f.Padding = fields["padding"]
	return f, nil
}

func parseTokenizerJSON(data []byte) (*Tokenizer, error) {
	f, err := readTopLevel(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if f.Version != nil && *f.Version != "1.0" {
		return nil, fmt.Errorf("tokenizer.json: version: unknown tokenizer version %q", *f.Version)
	}
	t := &Tokenizer{}
	if t.normalizer, err = parseNormalizer("normalizer", f.Normalizer); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	var pres []preTokenizer
	if !isNull(f.PreTokenizer) {
		if pres, err = parsePreTokenizer("pre_tokenizer", f.PreTokenizer, pres); err != nil {
			return nil, fmt.Errorf("tokenizer.json: %w", err)
		}
	}
	if isNull(f.Model) {
		return nil, errors.New("tokenizer.json: model: missing")
	}
	if t.model, err = parseModel(f.Model, f.vocab, f.merges); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	// A trailing ByteLevel pre-tokenizer hands raw bytes to the model (see bpeModel.byteInput).
	if n := len(pres); n > 0 {
		if bl, ok := pres[n-1].(*byteLevelPre); ok {
			bl.deferMap = true
			t.model.byteInput = true
			switch {
			case !bl.addPrefixSpace && !bl.useRegex:
				pres = pres[:n-1] // nothing left for it to do
			case !bl.addPrefixSpace:
				// Only the GPT-2 regex split is left (GPT-2, RoBERTa files): as a plain
				// Isolated Split it takes encode's direct regex-to-model path.
				pres[n-1] = &splitPre{re: bl.re, behavior: behIsolated}
			}
		}
	}
	t.pre = pres
	if t.post, err = parsePost("post_processor", f.PostProcessor); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if t.decoder, err = parseDecoder("decoder", f.Decoder); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if err := t.setAdded(f.AddedTokens); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	t.prepareDecode()
	if t.trunc, err = parseTruncation(f.Truncation); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if t.pad, err = parsePadding(f.Padding); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	return t, nil
}

func parseModel(raw json.RawMessage, vocab map[string]int, merges [][2]string) (*bpeModel, error) {
	var mj struct {
		Type                                               *string
		UnkToken, ContinuingSubwordPrefix, EndOfWordSuffix *string
		FuseUnk, ByteFallback, IgnoreMerges                *bool
		Vocab, Merges                                      []byte
	}
	fields, err := objectFields(raw)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	for key, dst := range map[string]any{"type": &mj.Type, "unk_token": &mj.UnkToken,
		"continuing_subword_prefix": &mj.ContinuingSubwordPrefix, "end_of_word_suffix": &mj.EndOfWordSuffix,
		"fuse_unk": &mj.FuseUnk, "byte_fallback": &mj.ByteFallback, "ignore_merges": &mj.IgnoreMerges} {
		if v, ok := fields[key]; ok {
			if err := json.Unmarshal(v, dst); err != nil {
				return nil, fmt.Errorf("model.%s: %w", key, jsonErr(err))
			}
		}
	}
	mj.Vocab, mj.Merges = fields["vocab"], fields["merges"]
	if mj.Type != nil && *mj.Type != "BPE" {
		return nil, fmt.Errorf("model.type: %q is not supported (only BPE)", *mj.Type)
	}
	if isNull(mj.Vocab) {
		return nil, errors.New("model.vocab: missing")
	}
	if isNull(mj.Merges) {
		if mj.Type == nil {
			return nil, errors.New("model.type: missing, and no merges (only BPE is supported)")
		}
		return nil, errors.New("model.merges: missing")
	}
	if vocab == nil { // not read in place
		if vocab, err = parseVocab(mj.Vocab); err != nil {
			return nil, fmt.Errorf("model.vocab: %w", err)
		}
	}
	if merges == nil {
		if merges, err = parseMerges(mj.Merges); err != nil {
			return nil, fmt.Errorf("model.merges%w", prefixErr(err))
		}
	}
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	flag := func(p *bool) bool { return p != nil && *p }
	m, err := newBPE(vocab, merges, mj.UnkToken, deref(mj.ContinuingSubwordPrefix),
		deref(mj.EndOfWordSuffix), flag(mj.FuseUnk), flag(mj.ByteFallback), flag(mj.IgnoreMerges))
	if err != nil {
		return nil, err
	}
	return m, nil
}

// prefixErr formats "[i]: ..." errors to follow a path directly and others after ": ".
func prefixErr(err error) error {
	if s := err.Error(); len(s) > 0 && s[0] == '[' {
		return err
	}
	return fmt.Errorf(": %w", err)
}

func parseNormalizer(path string, raw json.RawMessage) (normalizer, error) {
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
	case "NFC":
		return unicodeNorm{norm.NFC}, nil
	case "NFD":
		return unicodeNorm{norm.NFD}, nil
	case "NFKC":
		return unicodeNorm{norm.NFKC}, nil
	case "NFKD":
		return unicodeNorm{norm.NFKD}, nil
	case "Lowercase":
		return lowercase{}, nil
	case "StripAccents":
		return stripAccents{}, nil
	case "ByteLevel":
		return byteLevelNorm{}, nil
	case "Strip":
		st := strip{left: true, right: true}
		if err := o.get("strip_left", &st.left); err != nil {
			return nil, err
		}
		if err := o.get("strip_right", &st.right); err != nil {
			return nil, err
		}
		return st, nil
	case "Prepend":
		var p prepend
		if err := o.need("prepend", &p.s); err != nil {
			return nil, err
		}
		return p, nil
	case "Replace":
		r := &replace{}
		if r.lit, r.re, err = o.patternOf("pattern"); err != nil {
			return nil, err
		}
		if err := o.need("content", &r.content); err != nil {
			return nil, err
		}
		return r, nil
	case "BertNormalizer":
		bn := bertNorm{cleanText: true, chineseChars: true, lowercase: true}
		var sa *bool
		for k, p := range map[string]*bool{"clean_text": &bn.cleanText,
			"handle_chinese_chars": &bn.chineseChars, "lowercase": &bn.lowercase} {
			if err := o.get(k, p); err != nil {
				return nil, err
			}
		}
		if err := o.get("strip_accents", &sa); err != nil {
			return nil, err
		}
		bn.stripAccents = bn.lowercase // HF: strip_accents null follows lowercase
		if sa != nil {
			bn.stripAccents = *sa
		}
		return bn, nil
	case "Sequence":
		q, err := seq(o, path, "normalizers", parseNormalizer)
		return normSequence(q), err
	case "Precompiled":
		return nil, fmt.Errorf("%s.type: Precompiled (SentencePiece charsmap) normalizer is not supported", path)
	}
	return nil, fmt.Errorf("%s.type: unsupported normalizer %q", path, typ)
}

func parseBehavior(o obj, def int) (int, error) {
	s := ""
	if err := o.get("behavior", &s); err != nil {
		return 0, err
	}
	switch s {
	case "":
		return def, nil
	case "Removed":
		return behRemoved, nil
	case "Isolated":
		return behIsolated, nil
	case "MergedWithPrevious":
		return behMergedWithPrevious, nil
	case "MergedWithNext":
		return behMergedWithNext, nil
	case "Contiguous":
		return behContiguous, nil
	}
	return 0, fmt.Errorf("%s.behavior: unknown %q", o.path, s)
}

// gpt2Pattern is the regex ByteLevel uses when use_regex is true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// parsePreTokenizer appends the pre-tokenizer(s) at raw to dst; Sequences are flattened,
// which runs the same steps in the same order.
func parsePreTokenizer(path string, raw json.RawMessage, dst []preTokenizer) ([]preTokenizer, error) {
	if isNull(raw) {
		return dst, nil
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
	case "Sequence":
		l, err := o.list("pretokenizers")
		if err != nil {
			return nil, err
		}
		for i, r := range l {
			if dst, err = parsePreTokenizer(fmt.Sprintf("%s.pretokenizers[%d]", path, i), r, dst); err != nil {
				return nil, err
			}
		}
		return dst, nil
	case "Split":
		p := &splitPre{}
		if p.lit, p.re, err = o.patternOf("pattern"); err != nil {
			return nil, err
		}
		if p.behavior, err = parseBehavior(o, -1); err != nil {
			return nil, err
		}
		if p.behavior < 0 {
			return nil, fmt.Errorf("%s.behavior: missing", path)
		}
		if err := o.get("invert", &p.invert); err != nil {
			return nil, err
		}
		return append(dst, p), nil
	case "ByteLevel":
		p := &byteLevelPre{addPrefixSpace: true, useRegex: true}
		if err := o.get("add_prefix_space", &p.addPrefixSpace); err != nil {
			return nil, err
		}
		if err := o.get("use_regex", &p.useRegex); err != nil {
			return nil, err
		}
		if p.useRegex {
			if p.re, err = pattern.Compile(gpt2Pattern); err != nil {
				return nil, fmt.Errorf("%s: GPT-2 pattern: %w", path, err)
			}
		}
		return append(dst, p), nil
	case "Metaspace":
		p := &metaspacePre{splitOn: true}
		if p.repl, err = o.char("replacement", '▁'); err != nil {
			return nil, err
		}
		p.replStr = string(p.repl)
		if p.scheme, err = parsePrependScheme(o); err != nil {
			return nil, err
		}
		if err := o.get("split", &p.splitOn); err != nil {
			return nil, err
		}
		return append(dst, p), nil
	case "Whitespace":
		return append(dst, whitespacePre{}), nil
	case "WhitespaceSplit":
		return append(dst, &charSplit{pred: isWhitespace, behavior: behRemoved}), nil
	case "BertPreTokenizer":
		return append(dst, bertPre{}), nil
	case "Digits":
		var individual bool
		if err := o.get("individual_digits", &individual); err != nil {
			return nil, err
		}
		beh := behContiguous
		if individual {
			beh = behIsolated
		}
		return append(dst, &charSplit{pred: unicodeIsNumeric, behavior: beh}), nil
	case "Punctuation":
		beh, err := parseBehavior(o, behIsolated)
		if err != nil {
			return nil, err
		}
		return append(dst, &charSplit{pred: isPunc, behavior: beh}), nil
	}
	return nil, fmt.Errorf("%s.type: unsupported pre-tokenizer %q", path, typ)
}

func parsePrependScheme(o obj) (int, error) {
	scheme := "always"
	if err := o.get("prepend_scheme", &scheme); err != nil {
		return 0, err
	}
	if _, ok := o.m["prepend_scheme"]; !ok {
		// Legacy files say add_prefix_space instead.
		add := true
		if err := o.get("add_prefix_space", &add); err != nil {
			return 0, err
		}
		if !add {
			scheme = "never"
		}
	}
	switch scheme {
	case "always":
		return prependAlways, nil
	case "first":
		return prependFirst, nil
	case "never":
		return prependNever, nil
	}
	return 0, fmt.Errorf("%s.prepend_scheme: unknown %q", o.path, scheme)
}

// setAdded registers added_tokens the way HF's add_tokens does: a token already in the vocabulary
// keeps that id, a new one gets the next id after the model vocabulary (the file's "id" field
// is not what decides, in HF either).
func (t *Tokenizer) setAdded(raw json.RawMessage) error {
	av := &addedVocab{byContent: map[string]int{}, byID: map[int]*addedToken{}}
	t.added = av
	var list []struct {
		ID         *int    `json:"id"`
		Content    *string `json:"content"`
		SingleWord bool    `json:"single_word"`
		Lstrip     bool    `json:"lstrip"`
		Rstrip     bool    `json:"rstrip"`
		Normalized *bool   `json:"normalized"`
		Special    bool    `json:"special"`
	}
	if !isNull(raw) {
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("added_tokens: %w", jsonErr(err))
		}
	}
	nextID := len(t.model.vocab)
	for i, a := range list {
		if a.Content == nil {
			return fmt.Errorf("added_tokens[%d].content: missing", i)
		}
		if *a.Content == "" {
			continue
		}
		tok := addedToken{content: *a.Content, singleWord: a.SingleWord, lstrip: a.Lstrip,
			rstrip: a.Rstrip, special: a.Special, normd: !a.Special}
		if a.Normalized != nil {
			tok.normd = *a.Normalized
		}
		if id, ok := av.byContent[tok.content]; ok {
			tok.id = id
		} else if id, ok := t.model.vocab[tok.content]; ok {
			tok.id = id
		} else {
			tok.id = nextID
			nextID++
		}
		av.byContent[tok.content] = tok.id
		av.tokens = append(av.tokens, tok)
	}
	// Later entries for the same id replace earlier ones (HF's id->token map).
	for i := range av.tokens {
		av.byID[av.tokens[i].id] = &av.tokens[i]
	}
	maxID := len(t.model.idToTok) - 1
	for id := range av.byID {
		maxID = max(maxID, id)
	}
	t.vocabSize = maxID + 1
	t.idToToken = make([]string, t.vocabSize)
	copy(t.idToToken, t.model.idToTok)
	t.known = make([]bool, t.vocabSize)
	for _, id := range t.model.vocab {
		t.known[id] = true
	}
	t.special = make([]bool, t.vocabSize)
	for i, tok := range av.tokens {
		if av.byID[tok.id] != &av.tokens[i] {
			continue
		}
		content := tok.content
		trieIdx := i
		if tok.normd {
			if t.normalizer != nil {
				// Normalized tokens are matched (and decoded) in their normalized form.
				content = t.normalizer.normalize(span{s: content, id: -1, first: true}).s
			}
			if av.norm == nil {
				av.norm = newTrie()
			}
			av.norm.insert(content, trieIdx)
		} else {
			if av.raw == nil {
				av.raw = newTrie()
			}
			av.raw.insert(content, trieIdx)
		}
		t.idToToken[tok.id] = content
		t.known[tok.id] = true
	}
	// HF decides "special" by token text: an id is special when its text is a special token's.
	specials := map[string]bool{}
	for _, tok := range av.tokens {
		if tok.special {
			specials[tok.content] = true
		}
	}
	for id, s := range t.idToToken {
		t.special[id] = t.known[id] && specials[s]
	}
	return nil
}

// truncation is tokenizer.json's "truncation" for a single sequence: keep max_length tokens
// (minus what the post-processor adds), from the left or the right. The overflowing parts HF
// keeps on the side (with stride) are not part of the ids, so they are dropped.
type truncation struct {
	maxLen int
	left   bool
}

// padding is tokenizer.json's "padding": pad to a fixed length, or to the longest in a batch,
// rounded up to a multiple.
type padding struct {
	fixed    int // 0: batch longest
	multiple int
	padID    int
	left     bool
}

func parseDirection(o obj) (bool, error) {
	d := "Right"
	if err := o.get("direction", &d); err != nil {
		return false, err
	}
	switch d {
	case "Right":
		return false, nil
	case "Left":
		return true, nil
	}
	return false, fmt.Errorf("%s.direction: unknown %q", o.path, d)
}

func parseTruncation(raw json.RawMessage) (*truncation, error) {
	if isNull(raw) {
		return nil, nil
	}
	o, err := decodeObj("truncation", raw)
	if err != nil {
		return nil, err
	}
	tr := &truncation{}
	if err := o.need("max_length", &tr.maxLen); err != nil {
		return nil, err
	}
	if tr.maxLen < 0 {
		return nil, fmt.Errorf("truncation.max_length: %d is negative", tr.maxLen)
	}
	if tr.left, err = parseDirection(o); err != nil {
		return nil, err
	}
	return tr, nil
}

func parsePadding(raw json.RawMessage) (*padding, error) {
	if isNull(raw) {
		return nil, nil
	}
	o, err := decodeObj("padding", raw)
	if err != nil {
		return nil, err
	}
	p := &padding{}
	var strategy json.RawMessage
	if err := o.get("strategy", &strategy); err != nil {
		return nil, err
	}
	var name string
	var fixed struct {
		Fixed *int
	}
	switch {
	case isNull(strategy):
	case json.Unmarshal(strategy, &name) == nil:
		if name != "BatchLongest" {
			return nil, fmt.Errorf("padding.strategy: unknown %q", name)
		}
	case json.Unmarshal(strategy, &fixed) == nil && fixed.Fixed != nil && *fixed.Fixed > 0:
		p.fixed = *fixed.Fixed
	default:
		return nil, fmt.Errorf("padding.strategy: want \"BatchLongest\" or {\"Fixed\": n}")
	}
	var multiple *int
	if err := o.get("pad_to_multiple_of", &multiple); err != nil {
		return nil, err
	}
	if multiple != nil {
		p.multiple = max(0, *multiple)
	}
	if err := o.get("pad_id", &p.padID); err != nil {
		return nil, err
	}
	if p.left, err = parseDirection(o); err != nil {
		return nil, err
	}
	return p, nil
}
