// Package tokenizer loads Hugging Face tokenizer.json files and encodes and decodes text
// exactly as the Rust `tokenizers` library (v0.23) does: added tokens, normalizer,
// pre-tokenizer, BPE model, post-processor, truncation/padding and decoder.
//
// Supported: the BPE model (merges as "a b" or ["a","b"], ignore_merges, byte_fallback,
// unk_token/fuse_unk, continuing_subword_prefix, end_of_word_suffix; dropout is ignored);
// normalizers NFC/NFD/NFKC/NFKD, Lowercase, Replace, Prepend, Strip, StripAccents, ByteLevel,
// BertNormalizer, Sequence; pre-tokenizers Split, ByteLevel, Metaspace, Whitespace,
// WhitespaceSplit, Digits, Punctuation, BertPreTokenizer, Sequence; post-processors
// TemplateProcessing (single), ByteLevel, BertProcessing, RobertaProcessing, Sequence;
// decoders ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, WordPiece, BPEDecoder,
// Sequence. Anything else (other models, Precompiled, CTC, ...) fails at load, naming it.
//
// Differences from HF, all at the edges:
//   - Offsets are byte offsets into the Go string where HF gives char offsets. Like HF, a
//     token holding part of a character (byte-level BPE) reports the whole character.
//   - Input is taken as bytes: invalid UTF-8 is not an error; a byte-level model encodes the
//     raw bytes, other models treat each bad byte as an unknown character.
//   - A model whose unk_token is not in its vocabulary is refused at load (HF fails later,
//     when the first unknown character appears).
package tokenizer

import (
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// Tokenizer is a loaded tokenizer. It is safe for concurrent use.
type Tokenizer struct {
	normalizer normalizer     // nil: none
	pre        []preTokenizer // applied in order
	model      *bpeModel
	post       postProcessor // nil: none
	trunc      *truncation   // nil: none
	pad        *padding      // nil: none
	decoder    decoder       // nil: none
	decBytes   []string      // id -> bytes, when the decoder is ByteLevel alone
	decText    []string      // id -> text after the decoder's per-token steps
	decRest    decoder       // the decoder steps left to run on decText/idToToken
	added      *addedVocab

	idToToken []string // id -> token string, model vocab and added tokens
	known     []bool   // id -> has a token
	special   []bool   // id -> text of a special added token
	vocabSize int
	cfg       *Config
	pool      sync.Pool // *scratch: per-call buffers plus a lock-free piece cache
}

// Config holds the fields of tokenizer_config.json that callers need.
// Token strings are empty when the file does not set them.
type Config struct {
	ChatTemplate  string            // the default template
	ChatTemplates map[string]string // named templates when the file gives a list
	BOS, EOS      string
	PAD, UNK      string
	AddBOS        bool
	AddEOS        bool
	HasAddBOS     bool // add_bos_token present in the file
	HasAddEOS     bool // add_eos_token present in the file
}

// Load reads a tokenizer.json file, or a folder holding tokenizer.json and optionally
// tokenizer_config.json.
func Load(path string) (*Tokenizer, error) {
	dir := filepath.Dir(path)
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		dir = path
		path = filepath.Join(path, "tokenizer.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	if cdata, err := os.ReadFile(cfgPath); err == nil {
		cfg, err := parseConfig(cdata)
		if err != nil {
			return nil, err
		}
		t.cfg = cfg
	}
	return t, nil
}

// FromJSON builds a tokenizer from the bytes of a tokenizer.json file.
func FromJSON(data []byte) (*Tokenizer, error) {
	return parseTokenizerJSON(data)
}

// Encode returns the token ids of text. addSpecial applies the post-processor (BOS/EOS as the
// file's template says); added tokens in the text are matched either way, as in HF.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int {
	ids, _ := t.encode(text, addSpecial, false)
	return ids
}

// EncodeOffsets is Encode plus, for each token, its [start,end) byte range in text.
// Tokens added by the post-processor have the empty range [0,0).
func (t *Tokenizer) EncodeOffsets(text string, addSpecial bool) (ids []int, offsets [][2]int) {
	return t.encode(text, addSpecial, true)
}

// EncodeBatch encodes texts on `threads` goroutines (all cores when threads <= 0).
// The result is in input order.
func (t *Tokenizer) EncodeBatch(texts []string, addSpecial bool, threads int) [][]int {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	out := make([][]int, len(texts))
	if threads > len(texts) {
		threads = len(texts)
	}
	defer t.padBatch(out)
	if threads <= 1 {
		for i, s := range texts {
			out[i] = t.Encode(s, addSpecial)
		}
		return out
	}
	// Workers take small chunks from a shared counter, so one long text does not leave
	// the other cores idle at the end.
	const chunk = 16
	var next int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < threads; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				start := int(next)
				next += chunk
				mu.Unlock()
				if start >= len(texts) {
					return
				}
				end := min(start+chunk, len(texts))
				for i := start; i < end; i++ {
					out[i] = t.Encode(texts[i], addSpecial)
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// Decode turns ids back into text like HF's decode(ids, skip_special_tokens).
// Unknown ids are skipped.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	return t.decode(ids, skipSpecial)
}

// VocabSize is the largest id over the model vocabulary and the added tokens, plus one.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// TokenID returns the id of a token string (added tokens first, then the model vocabulary).
func (t *Tokenizer) TokenID(tok string) (int, bool) {
	if id, ok := t.added.byContent[tok]; ok {
		return id, true
	}
	id, ok := t.model.vocab[tok]
	return id, ok
}

// Token returns the token string of an id.
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.idToToken) {
		return "", false
	}
	return t.idToToken[id], t.known[id]
}

// IsSpecial reports whether id is an added token marked special.
func (t *Tokenizer) IsSpecial(id int) bool {
	return id >= 0 && id < len(t.special) && t.special[id]
}

// Config returns tokenizer_config.json's fields, or an empty Config when there was none.
func (t *Tokenizer) Config() *Config {
	if t.cfg == nil {
		return &Config{}
	}
	return t.cfg
}
