package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// jval is a JSON value that keeps the order of object keys: a schema's properties are
// generated in the order the schema writes them.
type jval struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' bool, 'z' null
	obj  []member
	arr  []*jval
	str  string
	num  json.Number
	b    bool
}

type member struct {
	key string
	val *jval
}

func (v *jval) get(key string) *jval {
	if v == nil || v.kind != 'o' {
		return nil
	}
	for _, m := range v.obj {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

// parseJSON reads one JSON value, keeping key order; errors give the byte offset.
func parseJSON(data []byte) (*jval, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValue(dec)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON at offset %d: %w", dec.InputOffset(), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("invalid JSON at offset %d: data after the value", dec.InputOffset())
	}
	return v, nil
}

func readValue(dec *json.Decoder) (*jval, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	return readFrom(dec, tok)
}

func readFrom(dec *json.Decoder, tok json.Token) (*jval, error) {
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			v := &jval{kind: 'o'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				val, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				v.obj = append(v.obj, member{key, val})
			}
			_, err := dec.Token()
			return v, err
		case '[':
			v := &jval{kind: 'a'}
			for dec.More() {
				el, err := readValue(dec)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, el)
			}
			_, err := dec.Token()
			return v, err
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &jval{kind: 's', str: t}, nil
	case json.Number:
		return &jval{kind: 'n', num: t}, nil
	case bool:
		return &jval{kind: 'b', b: t}, nil
	case nil:
		return &jval{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// encode writes v as compact JSON (keys in their order): the text an enum or const value
// must appear as.
func (v *jval) encode(sb *strings.Builder) {
	switch v.kind {
	case 'o':
		sb.WriteByte('{')
		for i, m := range v.obj {
			if i > 0 {
				sb.WriteByte(',')
			}
			writeJSONString(sb, m.key)
			sb.WriteByte(':')
			m.val.encode(sb)
		}
		sb.WriteByte('}')
	case 'a':
		sb.WriteByte('[')
		for i, el := range v.arr {
			if i > 0 {
				sb.WriteByte(',')
			}
			el.encode(sb)
		}
		sb.WriteByte(']')
	case 's':
		writeJSONString(sb, v.str)
	case 'n':
		sb.WriteString(v.num.String())
	case 'b':
		if v.b {
			sb.WriteString("true")
		} else {
			sb.WriteString("false")
		}
	case 'z':
		sb.WriteString("null")
	}
}

// writeJSONString writes s as a JSON string, escaping as jsonEscape does (the one spelling
// the string grammar generates for each character).
func writeJSONString(sb *strings.Builder, s string) {
	sb.WriteByte('"')
	for _, r := range s {
		sb.WriteString(jsonEscape(r))
	}
	sb.WriteByte('"')
}

// jsonEscape is how a character is written inside a JSON string: `"` and `\` escaped, the
// control characters as \b \f \n \r \t or \u00XX, everything else as itself (UTF-8).
func jsonEscape(r rune) string {
	switch r {
	case '"':
		return `\"`
	case '\\':
		return `\\`
	case '\b':
		return `\b`
	case '\f':
		return `\f`
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if r < 0x20 {
		return fmt.Sprintf(`\u%04x`, r)
	}
	return string(r)
}
