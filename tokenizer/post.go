package tokenizer

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// postProcessor adds the special tokens of the template (only when addSpecial) and adjusts
// offsets (offs is nil when offsets are not wanted). Added tokens get the range [0,0).
type postProcessor interface {
	process(t *Tokenizer, ids []int, offs [][2]int, vals []string, addSpecial bool) ([]int, [][2]int)
	// added is how many tokens process adds to a single sequence (truncation leaves room).
	added() int
}

func (p *templatePost) added() int  { return len(p.before) + len(p.after) }
func (p *byteLevelPost) added() int { return 0 }
func (p *robertaPost) added() int   { return 2 }
func (q postSequence) added() int {
	n := 0
	for _, p := range q {
		n += p.added()
	}
	return n
}

// templatePost is TemplateProcessing's "single" template: the sequence with special tokens
// around it.
type templatePost struct {
	before, after []int
}

func (p *templatePost) process(_ *Tokenizer, ids []int, offs [][2]int, _ []string, addSpecial bool) ([]int, [][2]int) {
	if !addSpecial || (len(p.before) == 0 && len(p.after) == 0) {
		return ids, offs
	}
	out := make([]int, 0, len(ids)+len(p.before)+len(p.after))
	out = append(append(append(out, p.before...), ids...), p.after...)
	if offs != nil {
		o := make([][2]int, 0, len(out))
		o = append(o, make([][2]int, len(p.before))...)
		o = append(append(o, offs...), make([][2]int, len(p.after))...)
		offs = o
	}
	return out, offs
}

// byteLevelPost trims the spaces that ByteLevel tokens carry out of their offsets.
type byteLevelPost struct {
	trimOffsets, addPrefixSpace bool
}

func (p *byteLevelPost) process(t *Tokenizer, ids []int, offs [][2]int, vals []string, _ bool) ([]int, [][2]int) {
	if p.trimOffsets && offs != nil {
		trimOffsets(ids, offs, vals, p.addPrefixSpace)
	}
	return ids, offs
}

// trimOffsets is HF's byte_level process_offsets, counting bytes where HF counts characters:
// a leading or trailing 'Ġ' (an encoded space) is one byte of input, other whitespace its
// UTF-8 length.
func trimOffsets(ids []int, offs [][2]int, vals []string, addPrefixSpace bool) {
	for i := range ids {
		tok := vals[i]
		lead, leadN := 0, 0
		for k := 0; k < len(tok); {
			r, size := utf8.DecodeRuneInString(tok[k:])
			if r == 'Ġ' {
				lead++
			} else if isWhitespace(r) {
				lead += size
			} else {
				break
			}
			leadN++
			k += size
		}
		trail := 0
		for k := len(tok); k > 0; {
			r, size := utf8.DecodeLastRuneInString(tok[:k])
			if r == 'Ġ' {
				trail++
			} else if isWhitespace(r) {
				trail += size
			} else {
				break
			}
			k -= size
		}
		o := &offs[i]
		if lead > 0 {
			isFirst := i == 0 || o[0] == 0
			if !(isFirst && addPrefixSpace && leadN == 1) {
				o[0] = min(o[0]+lead, o[1])
			}
		}
		if trail > 0 && o[1] >= trail {
			o[1] = max(o[1]-trail, o[0])
		}
	}
}

// robertaPost is RobertaProcessing: <s> A </s>, with ByteLevel-style offset trimming.
type robertaPost struct {
	cls, sep                    int
	trimOffsets, addPrefixSpace bool
}

func (p *robertaPost) process(t *Tokenizer, ids []int, offs [][2]int, vals []string, addSpecial bool) ([]int, [][2]int) {
	if p.trimOffsets && offs != nil {
		trimOffsets(ids, offs, vals, p.addPrefixSpace)
	}
	return (&templatePost{before: []int{p.cls}, after: []int{p.sep}}).process(t, ids, offs, vals, addSpecial)
}

type postSequence []postProcessor

func (q postSequence) process(t *Tokenizer, ids []int, offs [][2]int, vals []string, addSpecial bool) ([]int, [][2]int) {
	for _, p := range q {
		n := len(ids)
		ids, offs = p.process(t, ids, offs, vals, addSpecial)
		if offs != nil && len(ids) != n {
			vals = t.tokenTexts(ids) // a template added tokens; they have no matched text
		}
	}
	return ids, offs
}

func parsePost(path string, raw json.RawMessage) (postProcessor, error) {
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
	case "TemplateProcessing":
		return parseTemplate(o)
	case "ByteLevel":
		p := &byteLevelPost{trimOffsets: true, addPrefixSpace: true}
		if err := o.get("trim_offsets", &p.trimOffsets); err != nil {
			return nil, err
		}
		if err := o.get("add_prefix_space", &p.addPrefixSpace); err != nil {
			return nil, err
		}
		return p, nil
	case "BertProcessing", "RobertaProcessing":
		p := &robertaPost{trimOffsets: true, addPrefixSpace: true}
		cls, sep := []any{"[CLS]", 101.0}, []any{"[SEP]", 102.0}
		if typ == "RobertaProcessing" {
			cls, sep = []any{"<s>", 0.0}, []any{"</s>", 2.0}
			if err := o.get("trim_offsets", &p.trimOffsets); err != nil {
				return nil, err
			}
			if err := o.get("add_prefix_space", &p.addPrefixSpace); err != nil {
				return nil, err
			}
		} else {
			p.trimOffsets = false
		}
		if err := o.get("cls", &cls); err != nil {
			return nil, err
		}
		if err := o.get("sep", &sep); err != nil {
			return nil, err
		}
		var ok1, ok2 bool
		p.cls, ok1 = pairID(cls)
		p.sep, ok2 = pairID(sep)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%s: cls/sep: want [\"token\", id]", path)
		}
		return p, nil
	case "Sequence":
		q, err := seq(o, path, "processors", parsePost)
		return postSequence(q), err
	}
	return nil, fmt.Errorf("%s.type: unsupported post-processor %q", path, typ)
}

func pairID(v []any) (int, bool) {
	if len(v) != 2 {
		return 0, false
	}
	if _, ok := v[0].(string); !ok {
		return 0, false
	}
	f, ok := v[1].(float64)
	if !ok || f < 0 || f != float64(int(f)) {
		return 0, false
	}
	return int(f), true
}

func parseTemplate(o obj) (postProcessor, error) {
	var single []map[string]struct {
		ID string `json:"id"`
	}
	if err := o.need("single", &single); err != nil {
		return nil, err
	}
	var specials map[string]struct {
		IDs []int `json:"ids"`
	}
	if err := o.get("special_tokens", &specials); err != nil {
		return nil, err
	}
	p := &templatePost{}
	seen := false
	for i, item := range single {
		if len(item) != 1 {
			return nil, fmt.Errorf("%s.single[%d]: want {\"SpecialToken\": ...} or {\"Sequence\": ...}", o.path, i)
		}
		for kind, v := range item {
			switch kind {
			case "Sequence":
				if seen {
					return nil, fmt.Errorf("%s.single[%d]: the single template has two sequences", o.path, i)
				}
				seen = true
			case "SpecialToken":
				st, ok := specials[v.ID]
				if !ok {
					return nil, fmt.Errorf("%s.single[%d]: special token %q is not in special_tokens", o.path, i, v.ID)
				}
				if seen {
					p.after = append(p.after, st.IDs...)
				} else {
					p.before = append(p.before, st.IDs...)
				}
			default:
				return nil, fmt.Errorf("%s.single[%d]: unknown piece %q", o.path, i, kind)
			}
		}
	}
	if !seen {
		return nil, fmt.Errorf("%s.single: no Sequence in the template", o.path)
	}
	return p, nil
}

// tokenTexts is the vocabulary text of each id, for offsets after special tokens were added.
func (t *Tokenizer) tokenTexts(ids []int) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i], _ = t.Token(id)
	}
	return out
}
