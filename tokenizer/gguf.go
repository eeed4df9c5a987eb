package tokenizer

// This file converts between a Hugging Face tokenizer.json (+ tokenizer_config.json) and the
// tokenizer metadata llama.cpp keeps in a GGUF file (tokenizer.ggml.*). The GGUF side is
// described by ggufVocab, independent of the GGUF container; gguf.go maps it to and from
// gguf key/values.
//
// llama.cpp's view (src/llama-vocab.cpp, convert_hf_to_gguf.py) that shapes the mapping:
//   - tokenizer.ggml.model "gpt2" is byte-level BPE: tokens are in GPT-2's byte-to-unicode
//     alphabet, merges are "left right" strings ranked by position, and tokenizer.ggml.pre
//     names the pre-tokenizer (a fixed table of regexes inside llama.cpp, not the regex itself).
//   - added tokens are pre-normalized vocabulary entries whose token type is CONTROL (special)
//     or USER_DEFINED (not special); both are split out of the text before BPE.
//   - ids beyond the tokenizer but below the model's vocab_size become "[PAD<i>]" UNUSED
//     entries, so the token list is as long as the embedding matrix.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tokenwise/tokenwise/formats/gguf"
)

// llama.cpp token types (enum llama_token_type).
const (
	ggufTokNormal      = 1
	ggufTokUnknown     = 2
	ggufTokControl     = 3
	ggufTokUserDefined = 4
	ggufTokUnused      = 5
	ggufTokByte        = 6
)

// ggufVocab is the tokenizer metadata of a GGUF file.
type ggufVocab struct {
	Model  string // tokenizer.ggml.model: "gpt2" (byte-level BPE) or "llama" (SentencePiece)
	Pre    string // tokenizer.ggml.pre
	Tokens []string
	Types  []int32   // per token; nil when absent
	Scores []float32 // per token; nil when absent
	Merges []string  // "left right"

	// Special ids, -1 when unset.
	BOS, EOS, UNK, PAD, EOT, EOM, SEP int
	AddBOS, AddEOS                    *bool
	AddSpacePrefix                    *bool
	ChatTemplate                      string

	// HFNormalizer is tokenizer.json's normalizer when llama.cpp has no counterpart but the
	// text is usually unchanged by it (Qwen's NFC). It travels in a tokenwise key so that
	// GGUF -> HF restores it; a tokenizer built for the GGUF itself leaves it out, as llama.cpp does.
	HFNormalizer string
}

func newGGUFVocab() *ggufVocab {
	return &ggufVocab{BOS: -1, EOS: -1, UNK: -1, PAD: -1, EOT: -1, EOM: -1, SEP: -1}
}

// Pre-tokenizer regexes as they appear in Hugging Face tokenizer.json files.
const (
	ggufReLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	ggufReQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	ggufReGPT4o  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// ggufPreKind is a pre-tokenizer both sides agree on: its llama.cpp name and its tokenizer.json form.
type ggufPreKind struct {
	name         string // the tokenizer.ggml.pre value written on export
	splitRegex   string // Split(Isolated) regex before a ByteLevel(use_regex=false); "" for none
	digits       bool   // Digits(individual_digits=true) before ByteLevel(use_regex=true)
	ignoreMerges bool   // llama.cpp sets ignore_merges for this kind
}

var ggufPreKinds = []ggufPreKind{
	{name: "llama-bpe", splitRegex: ggufReLlama3, ignoreMerges: true},
	{name: "qwen2", splitRegex: ggufReQwen2},
	{name: "gpt-4o", splitRegex: ggufReGPT4o},
	{name: "smollm", digits: true},
	{name: "gpt-2"},
}

// ggufPreAliases maps the other tokenizer.ggml.pre names llama.cpp accepts onto the same
// regex tables (llama-vocab.cpp: one pre_type shared by several names).
var ggufPreAliases = map[string]string{
	"llama3": "llama-bpe", "llama-v3": "llama-bpe", "falcon3": "llama-bpe", "pixtral": "llama-bpe",
	"dbrx": "llama-bpe", "smaug-bpe": "llama-bpe",
	"deepseek-r1-qwen": "qwen2", "stablelm2": "qwen2", "megrez": "qwen2",
	"llama4":    "gpt-4o",
	"starcoder": "smollm", "refact": "smollm", "codeshell": "smollm", "exaone": "smollm", "minerva-7b": "smollm",
	"gpt2": "gpt-2", "mpt": "gpt-2", "olmo": "gpt-2", "phi-2": "gpt-2", "jina-es": "gpt-2", "jina-de": "gpt-2",
}

func ggufLookupPre(name string) (ggufPreKind, bool) {
	if a, ok := ggufPreAliases[name]; ok {
		name = a
	}
	for _, k := range ggufPreKinds {
		if k.name == name {
			return k, true
		}
	}
	return ggufPreKind{}, false
}

// ---- tokenizer.json (+ tokenizer_config.json) -> ggufVocab -------------------------------

type ggufHFAdded struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type ggufHFTokenizer struct {
	AddedTokens   []ggufHFAdded   `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         struct {
		Type         string          `json:"type"`
		Vocab        map[string]int  `json:"vocab"`
		Merges       json.RawMessage `json:"merges"`
		ByteFallback bool            `json:"byte_fallback"`
		IgnoreMerges bool            `json:"ignore_merges"`
	} `json:"model"`
}

type ggufHFPreTok struct {
	Type          string         `json:"type"`
	Pretokenizers []ggufHFPreTok `json:"pretokenizers"`
	Pattern       *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior         string `json:"behavior"`
	Invert           bool   `json:"invert"`
	UseRegex         *bool  `json:"use_regex"`
	AddPrefixSpace   bool   `json:"add_prefix_space"`
	IndividualDigits bool   `json:"individual_digits"`
}

// ggufDetectPre names the llama.cpp pre-tokenizer equal to a tokenizer.json pre_tokenizer.
func ggufDetectPre(raw json.RawMessage) (ggufPreKind, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return ggufPreKind{}, fmt.Errorf("pre_tokenizer is null: not a byte-level BPE tokenizer llama.cpp knows")
	}
	var p ggufHFPreTok
	if err := json.Unmarshal(raw, &p); err != nil {
		return ggufPreKind{}, fmt.Errorf("pre_tokenizer: %w", err)
	}
	steps := []ggufHFPreTok{p}
	if p.Type == "Sequence" {
		steps = p.Pretokenizers
	}
	isByteLevel := func(s ggufHFPreTok, useRegex bool) bool {
		ur := s.UseRegex == nil || *s.UseRegex // HF default: true
		return s.Type == "ByteLevel" && !s.AddPrefixSpace && ur == useRegex
	}
	switch {
	case len(steps) == 1 && isByteLevel(steps[0], true):
		k, _ := ggufLookupPre("gpt-2")
		return k, nil
	case len(steps) == 2 && steps[0].Type == "Digits" && steps[0].IndividualDigits && isByteLevel(steps[1], true):
		k, _ := ggufLookupPre("smollm")
		return k, nil
	case len(steps) == 2 && steps[0].Type == "Split" && isByteLevel(steps[1], false):
		s := steps[0]
		// Isolated keeps matches and the text between them; Removed+invert keeps only the
		// matches. The known regexes match every character (they end in \s+ and a
		// catch-all class), so there is no text between matches and both mean the same.
		if s.Pattern == nil || s.Pattern.Regex == nil ||
			!(s.Behavior == "Isolated" && !s.Invert || s.Behavior == "Removed" && s.Invert) {
			break
		}
		for _, k := range ggufPreKinds {
			if k.splitRegex != "" && k.splitRegex == *s.Pattern.Regex {
				return k, nil
			}
		}
		return ggufPreKind{}, fmt.Errorf("pre_tokenizer: Split regex %q matches none of llama.cpp's pre-tokenizers (llama-bpe, qwen2, gpt-4o)", *s.Pattern.Regex)
	}
	return ggufPreKind{}, fmt.Errorf("pre_tokenizer: %s matches none of llama.cpp's pre-tokenizers (llama-bpe, qwen2, gpt-4o, smollm, gpt-2)", ggufCompactJSON(raw, 200))
}

func ggufCompactJSON(raw []byte, max int) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	s := b.String()
	if len(s) > max {
		s = s[:max] + "..."
	}
	return s
}

// parseMerges accepts both merge formats: "a b" strings and ["a","b"] pairs (transformers >= 4.45).
func ggufParseMerges(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		return strs, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("model.merges: neither strings nor pairs: %w", err)
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("model.merges[%d]: %d parts, want 2", i, len(p))
		}
		if strings.Contains(p[0], " ") || strings.Contains(p[1], " ") {
			// llama.cpp splits merges at the first space after the first byte; a space inside a
			// part cannot be represented (byte-level vocabularies never have one).
			return nil, fmt.Errorf("model.merges[%d]: %q contains a space, not representable in GGUF", i, p)
		}
		out[i] = p[0] + " " + p[1]
	}
	return out, nil
}

// ggufHFConfig is the part of tokenizer_config.json that export carries into GGUF.
type ggufHFConfig struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOSToken     json.RawMessage `json:"bos_token"`
	EOSToken     json.RawMessage `json:"eos_token"`
	PADToken     json.RawMessage `json:"pad_token"`
	UNKToken     json.RawMessage `json:"unk_token"`
	AddBOSToken  *bool           `json:"add_bos_token"`
	AddEOSToken  *bool           `json:"add_eos_token"`
}

// tokenContent reads "bos_token": "<s>" or {"content": "<s>", ...}.
func ggufTokenContent(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Content string `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return o.Content
	}
	return ""
}

// chatTemplate reads "chat_template": "..." or [{"name": "default", "template": "..."}, ...].
func ggufChatTemplate(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if json.Unmarshal(raw, &list) == nil {
		for _, t := range list {
			if t.Name == "default" {
				return t.Template
			}
		}
		if len(list) > 0 {
			return list[0].Template
		}
	}
	return ""
}

// ggufTemplateBOS reports whether the post-processor puts a special token first, and which.
func ggufTemplateBOS(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", false
	}
	var p struct {
		Type       string            `json:"type"`
		Processors []json.RawMessage `json:"processors"`
		Single     []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
		} `json:"single"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return "", false
	}
	if p.Type == "Sequence" {
		for _, sub := range p.Processors {
			if tok, ok := ggufTemplateBOS(sub); ok {
				return tok, true
			}
		}
		return "", false
	}
	if p.Type == "TemplateProcessing" && len(p.Single) > 0 && p.Single[0].SpecialToken != nil {
		return p.Single[0].SpecialToken.ID, true
	}
	return "", false
}

// ggufVocabFromHF builds the GGUF tokenizer metadata of a byte-level BPE tokenizer.json. vocabSize
// is the model's vocab_size (embedding rows); ids the tokenizer lacks below it are padded as
// llama.cpp's converter does.
func ggufVocabFromHF(tokJSON, cfgJSON []byte, vocabSize int, ids GGUFSpecialIDs) (*ggufVocab, error) {
	var tj ggufHFTokenizer
	if err := json.Unmarshal(tokJSON, &tj); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: model.type %q: only BPE can be written to GGUF", tj.Model.Type)
	}
	if tj.Model.ByteFallback {
		return nil, fmt.Errorf("tokenizer.json: BPE with byte_fallback (SentencePiece-style) is not supported for GGUF export; only byte-level BPE")
	}
	hfNorm := ""
	if len(tj.Normalizer) > 0 && string(tj.Normalizer) != "null" {
		var n struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(tj.Normalizer, &n) != nil || n.Type != "NFC" {
			return nil, fmt.Errorf("tokenizer.json: normalizer %s: llama.cpp's byte-level BPE has none (only NFC is carried over)", ggufCompactJSON(tj.Normalizer, 120))
		}
		hfNorm = ggufCompactJSON(tj.Normalizer, len(tj.Normalizer))
	}
	pre, err := ggufDetectPre(tj.PreTokenizer)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if tj.Model.IgnoreMerges != pre.ignoreMerges {
		return nil, fmt.Errorf("tokenizer.json: model.ignore_merges=%v but llama.cpp's %q pre-tokenizer implies %v", tj.Model.IgnoreMerges, pre.name, pre.ignoreMerges)
	}
	merges, err := ggufParseMerges(tj.Model.Merges)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}

	n := 0
	for _, id := range tj.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	if vocabSize > 0 {
		if n > vocabSize {
			return nil, fmt.Errorf("tokenizer.json: token id %d is beyond the model's vocab_size %d", n-1, vocabSize)
		}
		n = vocabSize
	}
	v := newGGUFVocab()
	v.Model = "gpt2"
	v.Pre = pre.name
	v.Tokens = make([]string, n)
	v.Types = make([]int32, n)
	have := make([]bool, n)
	for tok, id := range tj.Model.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("tokenizer.json: model.vocab[%q]: negative id %d", tok, id)
		}
		if have[id] {
			return nil, fmt.Errorf("tokenizer.json: model.vocab: id %d used twice (%q and %q)", id, v.Tokens[id], tok)
		}
		v.Tokens[id], v.Types[id], have[id] = tok, ggufTokNormal, true
	}
	for i, a := range tj.AddedTokens {
		if a.ID < 0 {
			return nil, fmt.Errorf("tokenizer.json: added_tokens[%d]: negative id %d", i, a.ID)
		}
		if a.LStrip || a.RStrip || a.SingleWord {
			// llama.cpp only lstrips/rstrips by token attribute heuristics; refuse silently different behaviour.
			return nil, fmt.Errorf("tokenizer.json: added_tokens[%d] %q: lstrip/rstrip/single_word cannot be expressed in GGUF", i, a.Content)
		}
		v.Tokens[a.ID], have[a.ID] = a.Content, true
		// CONTROL exactly when HF marks the token special. (convert_hf_to_gguf.py also makes
		// special-looking tokens such as Qwen's "<|fim_prefix|>" CONTROL; keeping HF's flag
		// keeps decode(skip_special) and llama.cpp's parse_special=false matching HF.)
		if a.Special {
			v.Types[a.ID] = ggufTokControl
		} else {
			v.Types[a.ID] = ggufTokUserDefined
		}
	}
	for i := range v.Tokens {
		if !have[i] {
			v.Tokens[i], v.Types[i] = fmt.Sprintf("[PAD%d]", i), ggufTokUnused
		}
	}
	v.Merges = merges
	v.HFNormalizer = hfNorm

	var cfg ggufHFConfig
	if len(cfgJSON) > 0 {
		if err := json.Unmarshal(cfgJSON, &cfg); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
	}
	idOf := func(tok string) int {
		if tok == "" {
			return -1
		}
		for _, a := range tj.AddedTokens {
			if a.Content == tok {
				return a.ID
			}
		}
		if id, ok := tj.Model.Vocab[tok]; ok {
			return id
		}
		return -1
	}
	v.BOS, v.EOS = idOf(ggufTokenContent(cfg.BOSToken)), idOf(ggufTokenContent(cfg.EOSToken))
	v.PAD, v.UNK = idOf(ggufTokenContent(cfg.PADToken)), idOf(ggufTokenContent(cfg.UNKToken))
	addBOS := false
	if tok, ok := ggufTemplateBOS(tj.PostProcessor); ok {
		addBOS = true
		if v.BOS < 0 {
			v.BOS = idOf(tok)
		}
	}
	if cfg.AddBOSToken != nil {
		addBOS = *cfg.AddBOSToken
	}
	if ids.BOS >= 0 {
		v.BOS = ids.BOS
	}
	if ids.EOS >= 0 {
		v.EOS = ids.EOS
	}
	if ids.PAD >= 0 {
		v.PAD = ids.PAD
	}
	v.AddBOS = &addBOS
	addEOS := cfg.AddEOSToken != nil && *cfg.AddEOSToken
	v.AddEOS = &addEOS
	v.ChatTemplate = ggufChatTemplate(cfg.ChatTemplate)
	for _, id := range []int{v.BOS, v.EOS, v.PAD, v.UNK} {
		if id >= n {
			return nil, fmt.Errorf("special token id %d is beyond the vocabulary (%d tokens)", id, n)
		}
	}
	return v, nil
}

// ---- ggufVocab -> tokenizer.json + tokenizer_config.json ---------------------------------

// ggufToHF writes the tokenizer.json and tokenizer_config.json equal to GGUF tokenizer metadata.
func ggufToHF(v *ggufVocab) (tokJSON, cfgJSON []byte, err error) {
	switch v.Model {
	case "gpt2":
	case "llama":
		return ggufSPMToHF(v)
	case "":
		return nil, nil, fmt.Errorf("gguf: tokenizer.ggml.model missing")
	default:
		return nil, nil, fmt.Errorf("gguf: tokenizer.ggml.model %q not supported (\"gpt2\" byte-level BPE, \"llama\" SentencePiece)", v.Model)
	}
	if len(v.Types) != 0 && len(v.Types) < len(v.Tokens) {
		return nil, nil, fmt.Errorf("gguf: tokenizer.ggml.token_type has %d entries for %d tokens", len(v.Types), len(v.Tokens))
	}
	pre, ok := ggufLookupPre(v.Pre)
	if !ok {
		if v.Pre == "" {
			return nil, nil, fmt.Errorf("gguf: tokenizer.ggml.pre missing (llama.cpp would fall back to its degraded \"default\" pre-tokenizer)")
		}
		return nil, nil, fmt.Errorf("gguf: tokenizer.ggml.pre %q not supported (known: llama-bpe, qwen2, gpt-4o, smollm, gpt-2 and aliases)", v.Pre)
	}
	typ := func(i int) int32 {
		if len(v.Types) == 0 {
			return ggufTokNormal
		}
		return v.Types[i]
	}

	var b bytes.Buffer
	str := func(s string) { ggufJSONStr(&b, s) }
	ggufJSONHead(&b, v.Tokens, typ)
	b.WriteString("\n  ],\n  \"normalizer\": ")
	if v.HFNormalizer != "" && json.Valid([]byte(v.HFNormalizer)) {
		b.WriteString(v.HFNormalizer)
	} else {
		b.WriteString("null")
	}
	b.WriteString(",\n  \"pre_tokenizer\": ")
	byteLevel := func(useRegex bool) string {
		return fmt.Sprintf(`{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": %v}`, useRegex)
	}
	switch {
	case pre.splitRegex != "":
		b.WriteString(`{"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": `)
		str(pre.splitRegex)
		b.WriteString(`}, "behavior": "Isolated", "invert": false}, ` + byteLevel(false) + `]}`)
	case pre.digits:
		b.WriteString(`{"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true}, ` + byteLevel(true) + `]}`)
	default:
		b.WriteString(byteLevel(true))
	}
	b.WriteString(",\n  \"post_processor\": ")
	addBOS := v.AddBOS != nil && *v.AddBOS
	addEOS := v.AddEOS != nil && *v.AddEOS
	if (addBOS && v.BOS >= 0) || (addEOS && v.EOS >= 0) {
		ggufWriteTemplate(&b, v, addBOS && v.BOS >= 0, addEOS && v.EOS >= 0)
	} else {
		b.WriteString(`{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}`)
	}
	b.WriteString(",\n  \"decoder\": " + `{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}`)
	fmt.Fprintf(&b, ",\n  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, \"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": %v,\n    \"vocab\": {", pre.ignoreMerges)
	first := true
	// Added tokens go into the model vocabulary too: HF gives an added token missing from it
	// the next free id rather than the one written in added_tokens, which is wrong for
	// vocabularies with holes (o200k lacks id 199998).
	seen := make(map[string]bool, len(v.Tokens))
	for i, tok := range v.Tokens {
		if typ(i) == ggufTokUnused || seen[tok] {
			continue
		}
		seen[tok] = true
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString("\n      ")
		str(tok)
		fmt.Fprintf(&b, ": %d", i)
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for i, m := range v.Merges {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n      ")
		str(m)
	}
	b.WriteString("\n    ]\n  }\n}\n")

	cfg := map[string]any{
		"add_bos_token":                addBOS,
		"add_eos_token":                addEOS,
		"clean_up_tokenization_spaces": false,
		"model_max_length":             1 << 30,
		"tokenizer_class":              "PreTrainedTokenizerFast",
	}
	tokAt := func(id int) (string, bool) {
		if id < 0 || id >= len(v.Tokens) {
			return "", false
		}
		return v.Tokens[id], true
	}
	for key, id := range map[string]int{"bos_token": v.BOS, "eos_token": v.EOS, "pad_token": v.PAD, "unk_token": v.UNK} {
		if s, ok := tokAt(id); ok {
			cfg[key] = s
		} else {
			cfg[key] = nil
		}
	}
	if v.ChatTemplate != "" {
		cfg["chat_template"] = v.ChatTemplate
	}
	var cb bytes.Buffer
	e := json.NewEncoder(&cb)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(cfg); err != nil {
		return nil, nil, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	return b.Bytes(), cb.Bytes(), nil
}

// ggufWriteTemplate writes a TemplateProcessing post-processor that adds BOS and/or EOS.
func ggufWriteTemplate(b *bytes.Buffer, v *ggufVocab, bos, eos bool) {
	special := func(id int) string {
		var sb bytes.Buffer
		sb.WriteString(`{"SpecialToken": {"id": `)
		ggufJSONStr(&sb, v.Tokens[id])
		sb.WriteString(`, "type_id": 0}}`)
		return sb.String()
	}
	seq := func(id string) string { return fmt.Sprintf(`{"Sequence": {"id": %q, "type_id": 0}}`, id) }
	var single, pair []string
	var specials []int
	if bos {
		specials = append(specials, v.BOS)
		single = append(single, special(v.BOS))
		pair = append(pair, special(v.BOS))
	}
	single = append(single, seq("A"))
	pair = append(pair, seq("A"))
	if eos {
		if !slices.Contains(specials, v.EOS) {
			specials = append(specials, v.EOS)
		}
		single = append(single, special(v.EOS))
		pair = append(pair, special(v.EOS))
	}
	if bos {
		pair = append(pair, special(v.BOS))
	}
	pair = append(pair, seq("B"))
	if eos {
		pair = append(pair, special(v.EOS))
	}
	b.WriteString(`{"type": "TemplateProcessing", "single": [` + strings.Join(single, ", ") + `], "pair": [` + strings.Join(pair, ", ") + `], "special_tokens": {`)
	for i, id := range specials {
		if i > 0 {
			b.WriteString(", ")
		}
		ggufJSONStr(b, v.Tokens[id])
		b.WriteString(`: {"id": `)
		ggufJSONStr(b, v.Tokens[id])
		fmt.Fprintf(b, `, "ids": [%d], "tokens": [`, id)
		ggufJSONStr(b, v.Tokens[id])
		b.WriteString("]}")
	}
	b.WriteString("}}")
}

// ggufJSONStr appends s as a JSON string (no HTML escaping, so "<|im_start|>" stays readable).
// ggufJSONHead writes the start of a tokenizer.json up to and including the added_tokens
// entries (left open for the caller's "normalizer"): GGUF control, user-defined and unknown
// tokens become added tokens, user-defined ones normalized and not special, as HF has them.
func ggufJSONHead(b *bytes.Buffer, tokens []string, typ func(int) int32) {
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	first := true
	for i, tok := range tokens {
		t := typ(i)
		if t != ggufTokControl && t != ggufTokUserDefined && t != ggufTokUnknown {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(b, "\n    {\"id\": %d, \"content\": ", i)
		ggufJSONStr(b, tok)
		special := t != ggufTokUserDefined
		fmt.Fprintf(b, ", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": %v, \"special\": %v}", !special, special)
	}
}

func ggufJSONStr(b *bytes.Buffer, s string) {
	e := json.NewEncoder(b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s)         // a string always encodes
	b.Truncate(b.Len() - 1) // Encode's newline
}

// ---- GGUF key/values ---------------------------------------------------------------------

// GGUF tokenizer keys (llama.cpp's LLM_KV_TOKENIZER_*).
const (
	ggufKeyModel        = "tokenizer.ggml.model"
	ggufKeyPre          = "tokenizer.ggml.pre"
	ggufKeyTokens       = "tokenizer.ggml.tokens"
	ggufKeyTypes        = "tokenizer.ggml.token_type"
	ggufKeyScores       = "tokenizer.ggml.scores"
	ggufKeyMerges       = "tokenizer.ggml.merges"
	ggufKeyBOS          = "tokenizer.ggml.bos_token_id"
	ggufKeyEOS          = "tokenizer.ggml.eos_token_id"
	ggufKeyUNK          = "tokenizer.ggml.unknown_token_id"
	ggufKeyPAD          = "tokenizer.ggml.padding_token_id"
	ggufKeyEOT          = "tokenizer.ggml.eot_token_id"
	ggufKeyEOM          = "tokenizer.ggml.eom_token_id"
	ggufKeySEP          = "tokenizer.ggml.seperator_token_id" // sic, as llama.cpp spells it
	ggufKeyAddBOS       = "tokenizer.ggml.add_bos_token"
	ggufKeyAddEOS       = "tokenizer.ggml.add_eos_token"
	ggufKeyAddPrefix    = "tokenizer.ggml.add_space_prefix"
	ggufKeyChatTemplate = "tokenizer.chat_template"
	ggufKeyHFNormalizer = "tokenwise.hf.normalizer"
)

// GGUFSpecialIDs are token ids from config.json / generation_config.json that take precedence
// over tokenizer_config.json's token strings (-1: unset).
type GGUFSpecialIDs struct {
	BOS, EOS, PAD int
}

// GGUFMetadata returns the tokenizer.* metadata llama.cpp needs for a Hugging Face byte-level
// BPE tokenizer: vocabulary padded to the model's vocabSize (0: no padding), token types,
// merges, tokenizer.ggml.pre naming llama.cpp's matching pre-tokenizer, special ids, add_bos,
// and the chat template. tokenizerConfig (tokenizer_config.json) may be nil.
func GGUFMetadata(tokenizerJSON, tokenizerConfig []byte, vocabSize int, ids GGUFSpecialIDs) ([]gguf.KV, error) {
	v, err := ggufVocabFromHF(tokenizerJSON, tokenizerConfig, vocabSize, ids)
	if err != nil {
		return nil, err
	}
	return v.kvs(), nil
}

func (v *ggufVocab) kvs() []gguf.KV {
	out := []gguf.KV{
		{Key: ggufKeyModel, Value: gguf.String(v.Model)},
		{Key: ggufKeyPre, Value: gguf.String(v.Pre)},
		{Key: ggufKeyTokens, Value: gguf.Array(v.Tokens)},
		{Key: ggufKeyTypes, Value: gguf.Array(v.Types)},
	}
	if len(v.Scores) > 0 {
		out = append(out, gguf.KV{Key: ggufKeyScores, Value: gguf.Array(v.Scores)})
	}
	if len(v.Merges) > 0 || v.Model == "gpt2" {
		out = append(out, gguf.KV{Key: ggufKeyMerges, Value: gguf.Array(v.Merges)})
	}
	for _, s := range []struct {
		key string
		id  int
	}{{ggufKeyBOS, v.BOS}, {ggufKeyEOS, v.EOS}, {ggufKeyUNK, v.UNK}, {ggufKeyPAD, v.PAD}, {ggufKeyEOT, v.EOT}, {ggufKeyEOM, v.EOM}, {ggufKeySEP, v.SEP}} {
		if s.id >= 0 {
			out = append(out, gguf.KV{Key: s.key, Value: gguf.Uint32(uint32(s.id))})
		}
	}
	for _, b := range []struct {
		key string
		v   *bool
	}{{ggufKeyAddBOS, v.AddBOS}, {ggufKeyAddEOS, v.AddEOS}, {ggufKeyAddPrefix, v.AddSpacePrefix}} {
		if b.v != nil {
			out = append(out, gguf.KV{Key: b.key, Value: gguf.Bool(*b.v)})
		}
	}
	if v.ChatTemplate != "" {
		out = append(out, gguf.KV{Key: ggufKeyChatTemplate, Value: gguf.String(v.ChatTemplate)})
	}
	if v.HFNormalizer != "" {
		out = append(out, gguf.KV{Key: ggufKeyHFNormalizer, Value: gguf.String(v.HFNormalizer)})
	}
	return out
}

// ggufVocabFromFile reads tokenizer.* metadata, checking every type so that a malformed file
// gives an error naming the key.
func ggufVocabFromFile(f *gguf.File) (*ggufVocab, error) {
	v := newGGUFVocab()
	str := func(key string, dst *string, required bool) error {
		val, ok := f.Get(key)
		if !ok {
			if required {
				return fmt.Errorf("gguf: %s missing", key)
			}
			return nil
		}
		s, ok := val.Data.(string)
		if !ok || val.Type != gguf.TypeString {
			return fmt.Errorf("gguf: %s is %s, want string", key, val.TypeName())
		}
		*dst = s
		return nil
	}
	if err := str(ggufKeyModel, &v.Model, true); err != nil {
		return nil, err
	}
	if err := str(ggufKeyPre, &v.Pre, false); err != nil {
		return nil, err
	}
	if err := str(ggufKeyChatTemplate, &v.ChatTemplate, false); err != nil {
		return nil, err
	}
	if err := str(ggufKeyHFNormalizer, &v.HFNormalizer, false); err != nil {
		return nil, err
	}
	val, ok := f.Get(ggufKeyTokens)
	if !ok {
		return nil, fmt.Errorf("gguf: %s missing", ggufKeyTokens)
	}
	if v.Tokens, ok = val.Data.([]string); !ok {
		return nil, fmt.Errorf("gguf: %s is %s, want array[string]", ggufKeyTokens, val.TypeName())
	}
	if val, ok := f.Get(ggufKeyTypes); ok {
		if v.Types, ok = val.Data.([]int32); !ok {
			return nil, fmt.Errorf("gguf: %s is %s, want array[int32]", ggufKeyTypes, val.TypeName())
		}
		if len(v.Types) != len(v.Tokens) {
			return nil, fmt.Errorf("gguf: %s has %d entries for %d tokens", ggufKeyTypes, len(v.Types), len(v.Tokens))
		}
	}
	if val, ok := f.Get(ggufKeyScores); ok {
		if v.Scores, ok = val.Data.([]float32); !ok {
			return nil, fmt.Errorf("gguf: %s is %s, want array[float32]", ggufKeyScores, val.TypeName())
		}
	}
	if val, ok := f.Get(ggufKeyMerges); ok {
		if v.Merges, ok = val.Data.([]string); !ok {
			return nil, fmt.Errorf("gguf: %s is %s, want array[string]", ggufKeyMerges, val.TypeName())
		}
	}
	for _, s := range []struct {
		key string
		dst *int
	}{{ggufKeyBOS, &v.BOS}, {ggufKeyEOS, &v.EOS}, {ggufKeyUNK, &v.UNK}, {ggufKeyPAD, &v.PAD}, {ggufKeyEOT, &v.EOT}, {ggufKeyEOM, &v.EOM}, {ggufKeySEP, &v.SEP}} {
		val, ok := f.Get(s.key)
		if !ok {
			continue
		}
		id, ok := ggufInt(val)
		if !ok {
			return nil, fmt.Errorf("gguf: %s is %s, want an integer", s.key, val.TypeName())
		}
		if id < 0 || id >= int64(len(v.Tokens)) {
			// llama.cpp ignores out-of-range special ids with a warning; so do we.
			continue
		}
		*s.dst = int(id)
	}
	for _, b := range []struct {
		key string
		dst **bool
	}{{ggufKeyAddBOS, &v.AddBOS}, {ggufKeyAddEOS, &v.AddEOS}, {ggufKeyAddPrefix, &v.AddSpacePrefix}} {
		val, ok := f.Get(b.key)
		if !ok {
			continue
		}
		x, ok := val.Data.(bool)
		if !ok {
			return nil, fmt.Errorf("gguf: %s is %s, want bool", b.key, val.TypeName())
		}
		*b.dst = &x
	}
	return v, nil
}

// ggufInt reads any integer-typed scalar.
func ggufInt(v gguf.Value) (int64, bool) {
	switch x := v.Data.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		if x > 1<<62 {
			return 0, false
		}
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// GGUFToHF returns the tokenizer.json and tokenizer_config.json equal to a GGUF file's
// tokenizer metadata, and its BOS and EOS ids (-1 when unset), for exporting an HF folder.
func GGUFToHF(f *gguf.File) (tokenizerJSON, tokenizerConfig []byte, bos, eos int, err error) {
	v, err := ggufVocabFromFile(f)
	if err != nil {
		return nil, nil, -1, -1, err
	}
	tj, cj, err := ggufToHF(v)
	if err != nil {
		return nil, nil, -1, -1, err
	}
	return tj, cj, v.BOS, v.EOS, nil
}

// FromGGUF builds the tokenizer a GGUF file carries, tokenizing as llama.cpp does with
// parse_special=true (added tokens in the text are matched, like Hugging Face's encode).
// Its Config holds the chat template, BOS/EOS and add_bos_token from the metadata.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	v, err := ggufVocabFromFile(f)
	if err != nil {
		return nil, err
	}
	v.HFNormalizer = "" // llama.cpp applies no normalizer; the GGUF's own behaviour wins
	tj, cj, err := ggufToHF(v)
	if err != nil {
		return nil, err
	}
	t, err := FromJSON(tj)
	if err != nil {
		return nil, fmt.Errorf("gguf: tokenizer built from metadata: %w", err)
	}
	cfg, err := parseConfig(cj)
	if err != nil {
		return nil, fmt.Errorf("gguf: tokenizer config built from metadata: %w", err)
	}
	t.cfg = cfg
	return t, nil
}

// ggufSPMToHF writes the tokenizer.json of a SentencePiece vocabulary (tokenizer.ggml.model
// "llama": Llama 2, Mistral v0.1-v0.3, ...) the way transformers' LlamaConverter does:
// a BPE model with byte fallback whose merges come from the scores, a normalizer that
// prepends "▁" to every text segment and turns spaces into "▁", and the matching decoder.
//
// llama.cpp's SPM tokenizer repeatedly merges the adjacent pair whose concatenation is a
// vocabulary token with the highest score (leftmost on ties), and falls back to <0xXX> byte
// tokens. Listing every such pair as a merge, ranked by the merged token's score, makes
// Hugging Face's BPE take the same steps; add_space_prefix (default true) is the "▁"
// prepended to each raw-text fragment.
func ggufSPMToHF(v *ggufVocab) (tokJSON, cfgJSON []byte, err error) {
	if len(v.Scores) < len(v.Tokens) {
		return nil, nil, fmt.Errorf("gguf: SentencePiece vocabulary needs %s for its %d tokens (has %d)", ggufKeyScores, len(v.Tokens), len(v.Scores))
	}
	typ := func(i int) int32 {
		if len(v.Types) == 0 {
			return ggufTokNormal
		}
		return v.Types[i]
	}
	ids := make(map[string]int, len(v.Tokens))
	for i, tok := range v.Tokens {
		if typ(i) == ggufTokUnused {
			continue
		}
		if _, dup := ids[tok]; !dup {
			ids[tok] = i
		}
	}
	// Merges: every split of a normal token into two vocabulary pieces.
	type merge struct {
		l, r   string
		merged int
	}
	var merges []merge
	for i, tok := range v.Tokens {
		if typ(i) != ggufTokNormal {
			continue
		}
		for k := 1; k < len(tok); k++ {
			if !utf8.RuneStart(tok[k]) {
				continue
			}
			l, r := tok[:k], tok[k:]
			li, okL := ids[l]
			ri, okR := ids[r]
			if okL && okR && typ(li) == ggufTokNormal && typ(ri) == ggufTokNormal {
				merges = append(merges, merge{l, r, i})
			}
		}
	}
	slices.SortStableFunc(merges, func(a, b merge) int {
		sa, sb := v.Scores[a.merged], v.Scores[b.merged]
		switch {
		case sa > sb:
			return -1
		case sa < sb:
			return 1
		}
		return a.merged - b.merged
	})
	unk := "<unk>"
	if v.UNK >= 0 && v.UNK < len(v.Tokens) {
		unk = v.Tokens[v.UNK]
	}
	addPrefix := v.AddSpacePrefix == nil || *v.AddSpacePrefix

	var b bytes.Buffer
	str := func(s string) { ggufJSONStr(&b, s) }
	ggufJSONHead(&b, v.Tokens, typ)
	b.WriteString("\n  ],\n  \"normalizer\": ")
	if addPrefix {
		b.WriteString(`{"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}`)
	} else {
		b.WriteString(`{"type": "Replace", "pattern": {"String": " "}, "content": "▁"}`)
	}
	b.WriteString(",\n  \"pre_tokenizer\": null,\n  \"post_processor\": ")
	addBOS := v.AddBOS == nil || *v.AddBOS // llama.cpp's default for SentencePiece
	addEOS := v.AddEOS != nil && *v.AddEOS
	if (addBOS && v.BOS >= 0) || (addEOS && v.EOS >= 0) {
		ggufWriteTemplate(&b, v, addBOS && v.BOS >= 0, addEOS && v.EOS >= 0)
	} else {
		b.WriteString("null")
	}
	b.WriteString(",\n  \"decoder\": ")
	strip := ""
	if addPrefix {
		strip = `, {"type": "Strip", "content": " ", "start": 1, "stop": 0}`
	}
	b.WriteString(`{"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}` + strip + `]}`)
	b.WriteString(",\n  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": ")
	str(unk)
	b.WriteString(", \"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": true, \"byte_fallback\": true, \"ignore_merges\": false,\n    \"vocab\": {")
	first := true
	seen := make(map[string]bool, len(v.Tokens))
	for i, tok := range v.Tokens {
		if typ(i) == ggufTokUnused || seen[tok] {
			continue
		}
		seen[tok] = true
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteString("\n      ")
		str(tok)
		fmt.Fprintf(&b, ": %d", i)
	}
	b.WriteString("\n    },\n    \"merges\": [")
	for i, m := range merges {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n      [")
		str(m.l)
		b.WriteString(", ")
		str(m.r)
		b.WriteString("]")
	}
	b.WriteString("\n    ]\n  }\n}\n")

	cfg := map[string]any{
		"add_bos_token": addBOS, "add_eos_token": addEOS, "clean_up_tokenization_spaces": false,
		"legacy": true, "model_max_length": 1 << 30, "tokenizer_class": "LlamaTokenizerFast",
	}
	for key, id := range map[string]int{"bos_token": v.BOS, "eos_token": v.EOS, "pad_token": v.PAD, "unk_token": v.UNK} {
		if id >= 0 && id < len(v.Tokens) {
			cfg[key] = v.Tokens[id]
		} else {
			cfg[key] = nil
		}
	}
	if v.ChatTemplate != "" {
		cfg["chat_template"] = v.ChatTemplate
	}
	var cb bytes.Buffer
	e := json.NewEncoder(&cb)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(cfg); err != nil {
		return nil, nil, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	return b.Bytes(), cb.Bytes(), nil
}
