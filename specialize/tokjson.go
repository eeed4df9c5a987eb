package specialize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// tokFile is a tokenizer.json held as raw JSON except for the parts specialization rewrites:
// the BPE vocabulary and merges, the added tokens, and ids inside the post-processor.
type tokFile struct {
	top        map[string]json.RawMessage
	model      map[string]json.RawMessage
	vocab      map[string]int
	merges     [][2]string
	pairMerges bool // merges written as ["a","b"] pairs (newer files) rather than "a b"
	added      []addedTok
	byteLevel  bool // vocabulary strings are ByteLevel characters
	byteFallbk bool
	ignoreMrg  bool
}

type addedTok struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

func parseTokFile(data []byte) (*tokFile, error) {
	tf := &tokFile{}
	if err := json.Unmarshal(data, &tf.top); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if err := json.Unmarshal(tf.top["model"], &tf.model); err != nil {
		return nil, fmt.Errorf("tokenizer.json: model: %w", err)
	}
	var typ string
	_ = json.Unmarshal(tf.model["type"], &typ)
	if typ != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: model.type %q: only BPE vocabularies can be specialized", typ)
	}
	if err := json.Unmarshal(tf.model["vocab"], &tf.vocab); err != nil {
		return nil, fmt.Errorf("tokenizer.json: model.vocab: %w", err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(tf.model["merges"], &raw); err != nil {
		return nil, fmt.Errorf("tokenizer.json: model.merges: %w", err)
	}
	for i, m := range raw {
		var s string
		var pair []string
		if json.Unmarshal(m, &s) == nil {
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return nil, fmt.Errorf("tokenizer.json: model.merges[%d]: %q is not \"a b\"", i, s)
			}
			tf.merges = append(tf.merges, [2]string{a, b})
		} else if json.Unmarshal(m, &pair) == nil && len(pair) == 2 {
			tf.pairMerges = true
			tf.merges = append(tf.merges, [2]string{pair[0], pair[1]})
		} else {
			return nil, fmt.Errorf("tokenizer.json: model.merges[%d]: want \"a b\" or [\"a\",\"b\"]", i)
		}
	}
	var prefix, suffix string
	_ = json.Unmarshal(tf.model["continuing_subword_prefix"], &prefix)
	_ = json.Unmarshal(tf.model["end_of_word_suffix"], &suffix)
	if prefix != "" || suffix != "" {
		return nil, fmt.Errorf("tokenizer.json: model: continuing_subword_prefix/end_of_word_suffix are not supported by specialize")
	}
	_ = json.Unmarshal(tf.model["byte_fallback"], &tf.byteFallbk)
	_ = json.Unmarshal(tf.model["ignore_merges"], &tf.ignoreMrg)
	if a, ok := tf.top["added_tokens"]; ok && !isNull(a) {
		if err := json.Unmarshal(a, &tf.added); err != nil {
			return nil, fmt.Errorf("tokenizer.json: added_tokens: %w", err)
		}
	}
	tf.byteLevel = bytes.Contains(tf.top["pre_tokenizer"], []byte(`"ByteLevel"`)) ||
		bytes.Contains(tf.top["decoder"], []byte(`"ByteLevel"`))
	return tf, nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// marshal writes the tokenizer.json with a new vocabulary (model.vocab strings by id, "" for
// ids that are only added tokens), merges and added tokens; idOf gives
// the new id of a token string (used for the post-processor's special token ids).
func (tf *tokFile) marshal(vocab []string, merges [][2]string, added []addedTok, idOf func(string) (int, bool)) ([]byte, error) {
	var b bytes.Buffer
	enc := func(v any) []byte {
		var buf bytes.Buffer
		e := json.NewEncoder(&buf)
		e.SetEscapeHTML(false)
		_ = e.Encode(v) // strings, ints and bools always encode
		return bytes.TrimRight(buf.Bytes(), "\n")
	}
	// Model: the original fields in HF's order, vocab in id order, merges as the file had them.
	var mb bytes.Buffer
	mb.WriteString("{")
	keys := []string{"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges"}
	for k := range tf.model {
		if !slices.Contains(keys, k) && k != "vocab" && k != "merges" {
			keys = append(keys, k)
		}
	}
	first := true
	for _, k := range keys {
		v, ok := tf.model[k]
		if !ok {
			continue
		}
		if !first {
			mb.WriteString(",")
		}
		first = false
		mb.Write(enc(k))
		mb.WriteString(":")
		mb.Write(v)
	}
	mb.WriteString(`,"vocab":{`)
	n := 0
	for id, tok := range vocab {
		if tok == "" { // an id that only an added token has
			continue
		}
		if n > 0 {
			mb.WriteString(",")
		}
		n++
		mb.Write(enc(tok))
		fmt.Fprintf(&mb, ":%d", id)
	}
	mb.WriteString(`},"merges":[`)
	for i, m := range merges {
		if i > 0 {
			mb.WriteString(",")
		}
		if tf.pairMerges {
			mb.Write(enc([]string{m[0], m[1]}))
		} else {
			mb.Write(enc(m[0] + " " + m[1]))
		}
	}
	mb.WriteString("]}")

	post := tf.top["post_processor"]
	if !isNull(post) {
		var v any
		if err := json.Unmarshal(post, &v); err != nil {
			return nil, fmt.Errorf("tokenizer.json: post_processor: %w", err)
		}
		if err := remapPost(v, idOf); err != nil {
			return nil, fmt.Errorf("tokenizer.json: post_processor: %w", err)
		}
		post = enc(v)
	}
	order := []string{"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder", "model"}
	for k := range tf.top {
		if !slices.Contains(order, k) {
			order = append(order, k)
		}
	}
	b.WriteString("{")
	first = true
	for _, k := range order {
		var v []byte
		switch k {
		case "added_tokens":
			v = enc(added)
		case "model":
			v = mb.Bytes()
		case "post_processor":
			v = post
		default:
			raw, ok := tf.top[k]
			if !ok {
				continue
			}
			v = raw
		}
		if v == nil {
			v = []byte("null")
		}
		if !first {
			b.WriteString(",\n")
		}
		first = false
		b.Write(enc(k))
		b.WriteString(":")
		b.Write(v)
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// remapPost rewrites the token ids a post-processor names (TemplateProcessing's special_tokens,
// RobertaProcessing/BertProcessing's sep and cls) from their token strings.
func remapPost(v any, idOf func(string) (int, bool)) error {
	switch x := v.(type) {
	case map[string]any:
		if toks, ok := x["tokens"].([]any); ok {
			if _, ok := x["ids"].([]any); ok {
				ids := make([]any, len(toks))
				for i, t := range toks {
					s, _ := t.(string)
					id, ok := idOf(s)
					if !ok {
						return fmt.Errorf("special token %q is not in the new vocabulary", s)
					}
					ids[i] = id
				}
				x["ids"] = ids
			}
		}
		for _, k := range []string{"sep", "cls"} {
			if pair, ok := x[k].([]any); ok && len(pair) == 2 {
				s, _ := pair[0].(string)
				id, ok := idOf(s)
				if !ok {
					return fmt.Errorf("%s token %q is not in the new vocabulary", k, s)
				}
				pair[1] = id
			}
		}
		for _, c := range x {
			if err := remapPost(c, idOf); err != nil {
				return err
			}
		}
	case []any:
		for _, c := range x {
			if err := remapPost(c, idOf); err != nil {
				return err
			}
		}
	}
	return nil
}
