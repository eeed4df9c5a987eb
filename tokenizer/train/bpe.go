// Package train learns a byte-level BPE vocabulary from a corpus and writes it as a Hugging
// Face tokenizer.json (the Qwen2 layout: the Qwen2 pre-tokenizer regex, ByteLevel mapping,
// BPE model with ordered merges, special tokens as added tokens), which both package
// tokenizer and HF tokenizers load and encode identically.
//
// Training is the classic algorithm: split the corpus into pre-tokens with the same regex
// the tokenizer uses, count each distinct pre-token once with its frequency, start from the
// 256 byte symbols, and repeatedly merge the most frequent adjacent pair (ties broken by the
// pair's text, so a corpus always gives the same vocabulary), updating pair counts only in
// the words that contain the merged pair.
package train

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tokenwise/tokenwise/tokenizer/internal/pattern"
)

// Qwen2Pattern is the pre-tokenizer regex of Qwen2/Qwen3 (cl100k-like, one digit per pre-token).
const Qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// DefaultSpecials are the special tokens appended after the learned vocabulary.
var DefaultSpecials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// Options configure training.
type Options struct {
	VocabSize int      // total ids: 256 bytes + learned tokens + specials
	Specials  []string // nil: DefaultSpecials
	MinFreq   int      // stop when the best pair occurs fewer times (2)
	// Progress, when set, is called every few hundred merges with the merges done so far.
	Progress func(done, total int)
}

// Result is a learned vocabulary.
type Result struct {
	Vocab    []string    // id -> token (GPT-2 byte-to-unicode form)
	Merges   [][2]string // in rank order
	Specials []string    // ids len(Vocab)...
}

// byteToUnicode is GPT-2's reversible map of bytes to printable characters: printable
// Latin-1 bytes map to themselves, the rest to U+0100 onwards.
func byteToUnicode() [256]string {
	var t [256]string
	n := 0
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			t[b] = string(rune(b))
		} else {
			t[b] = string(rune(256 + n))
			n++
		}
	}
	return t
}

type pair struct{ a, b int32 }

type word struct {
	syms []int32
	freq int
}

// Train learns merges from texts.
func Train(texts []string, opt Options) (*Result, error) {
	specials := opt.Specials
	if specials == nil {
		specials = DefaultSpecials
	}
	if opt.MinFreq <= 0 {
		opt.MinFreq = 2
	}
	nMerges := opt.VocabSize - 256 - len(specials)
	if nMerges < 0 {
		return nil, fmt.Errorf("vocab size %d: below the 256 byte tokens + %d special tokens", opt.VocabSize, len(specials))
	}
	re, err := pattern.Compile(Qwen2Pattern)
	if err != nil {
		return nil, fmt.Errorf("pre-tokenizer: %w", err)
	}
	// Special tokens are matched before pre-tokenization by the tokenizer, so their text is
	// never part of a word: cut it out of the corpus the same way.
	counts := map[string]int{}
	var spans [][2]int
	for _, text := range texts {
		for _, part := range splitSpecials(text, specials) {
			spans = re.FindAll(part, spans[:0])
			for _, s := range spans {
				counts[part[s[0]:s[1]]]++
			}
		}
	}
	b2u := byteToUnicode()
	res := &Result{Specials: specials}
	for b := range 256 {
		res.Vocab = append(res.Vocab, b2u[b])
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys) // a deterministic word order
	words := make([]word, len(keys))
	pairs := map[pair]int{}
	where := map[pair][]int32{} // words that contained the pair when it was counted (may be stale)
	for i, k := range keys {
		w := word{freq: counts[k], syms: make([]int32, len(k))}
		for j := 0; j < len(k); j++ {
			w.syms[j] = int32(k[j])
		}
		words[i] = w
		for j := 0; j+1 < len(w.syms); j++ {
			p := pair{w.syms[j], w.syms[j+1]}
			pairs[p] += w.freq
			where[p] = append(where[p], int32(i))
		}
	}
	ids := map[string]int32{}
	for i, t := range res.Vocab {
		ids[t] = int32(i)
	}
	for done := 0; len(res.Vocab) < 256+nMerges; done++ {
		best, bestN := pair{}, 0
		for p, n := range pairs {
			if n > bestN || (n == bestN && n > 0 && res.less(p, best)) {
				best, bestN = p, n
			}
		}
		if bestN < opt.MinFreq {
			break
		}
		// Two merges can spell the same token ("ab"+"c", "a"+"bc"): it keeps its first id.
		tok := res.Vocab[best.a] + res.Vocab[best.b]
		id, dup := ids[tok]
		if !dup {
			id = int32(len(res.Vocab))
			ids[tok] = id
			res.Vocab = append(res.Vocab, tok)
		}
		res.Merges = append(res.Merges, [2]string{res.Vocab[best.a], res.Vocab[best.b]})
		seen := map[int32]bool{}
		for _, wi := range where[best] {
			if seen[wi] {
				continue
			}
			seen[wi] = true
			w := &words[wi]
			s := w.syms
			if !hasPair(s, best) {
				continue
			}
			// Take the word's pairs out, merge, put the new pairs in: simple and exact.
			for j := 0; j+1 < len(s); j++ {
				pairs[pair{s[j], s[j+1]}] -= w.freq
			}
			out := s[:0]
			for j := 0; j < len(s); j++ {
				if j+1 < len(s) && s[j] == best.a && s[j+1] == best.b {
					out = append(out, id)
					j++
					continue
				}
				out = append(out, s[j])
			}
			w.syms = out
			for j := 0; j+1 < len(out); j++ {
				p := pair{out[j], out[j+1]}
				pairs[p] += w.freq
				if out[j] == id || out[j+1] == id {
					where[p] = append(where[p], wi)
				}
			}
		}
		delete(pairs, best)
		delete(where, best)
		if opt.Progress != nil && (done%200 == 0 || len(res.Vocab) == 256+nMerges) {
			opt.Progress(len(res.Vocab)-256, nMerges)
		}
	}
	return res, nil
}

func hasPair(s []int32, p pair) bool {
	for j := 0; j+1 < len(s); j++ {
		if s[j] == p.a && s[j+1] == p.b {
			return true
		}
	}
	return false
}

// less orders pairs with equal counts by their text, for a deterministic vocabulary.
func (r *Result) less(p, q pair) bool {
	if a, b := r.Vocab[p.a], r.Vocab[q.a]; a != b {
		return a < b
	}
	return r.Vocab[p.b] < r.Vocab[q.b]
}

// splitSpecials cuts text at every occurrence of a special token, dropping the tokens.
func splitSpecials(text string, specials []string) []string {
	parts := []string{text}
	for _, sp := range specials {
		if sp == "" {
			continue
		}
		var next []string
		for _, p := range parts {
			next = append(next, strings.Split(p, sp)...)
		}
		parts = next
	}
	return parts
}

// TokenizerJSON renders the vocabulary as a Hugging Face tokenizer.json.
func (r *Result) TokenizerJSON() ([]byte, error) {
	if len(r.Vocab) < 256 {
		return nil, errors.New("tokenizer.json: vocabulary lacks the byte alphabet")
	}
	vocab := make(map[string]int, len(r.Vocab))
	for i, t := range r.Vocab {
		if _, dup := vocab[t]; dup {
			return nil, fmt.Errorf("tokenizer.json: token %q learned twice", t)
		}
		vocab[t] = i
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var adds []added
	for i, s := range r.Specials {
		adds = append(adds, added{ID: len(r.Vocab) + i, Content: s, Special: true})
	}
	merges := make([]string, len(r.Merges))
	for i, m := range r.Merges {
		merges[i] = m[0] + " " + m[1]
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	doc := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": adds,
		"normalizer":   nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]string{"Regex": Qwen2Pattern}, "behavior": "Isolated", "invert": false},
			byteLevel,
		}},
		"post_processor": byteLevel,
		"decoder":        byteLevel,
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges,
		},
	}
	return marshal(doc, " ")
}

// TokenizerConfigJSON renders a tokenizer_config.json naming the end-of-text token and a
// ChatML chat template (the special tokens <|im_start|> and <|im_end|>).
func (r *Result) TokenizerConfigJSON() ([]byte, error) {
	// Chat turns end with <|im_end|>: that is the token generation stops at.
	eos := ""
	if len(r.Specials) > 0 {
		eos = r.Specials[0]
	}
	if slices.Contains(r.Specials, "<|im_end|>") {
		eos = "<|im_end|>"
	}
	pad := ""
	if len(r.Specials) > 0 {
		pad = r.Specials[0]
	}
	cfg := map[string]any{
		"tokenizer_class":  "PreTrainedTokenizerFast",
		"bos_token":        nil,
		"eos_token":        eos,
		"pad_token":        pad,
		"add_bos_token":    false,
		"model_max_length": 2048,
		"chat_template":    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
	}
	return marshal(cfg, "  ")
}

// marshal writes v as indented JSON without escaping <, > and & (special tokens stay readable).
func marshal(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
