package tokenizer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonScanner reads the two big parts of tokenizer.json (model.vocab and model.merges) by hand.
// Going through encoding/json's reflection for Gemma-3's 262k-entry vocab and 515k merges
// would allocate an interface or map entry per element and take most of the load time; this
// scanner walks the bytes once and only allocates the final strings.
type jsonScanner struct {
	b   []byte
	pos int
}

func (s *jsonScanner) skipSpace() {
	for s.pos < len(s.b) {
		switch s.b[s.pos] {
		case ' ':
			// Pretty-printed files (Gemma-3's) indent every merge; skip spaces eight at a time.
			s.pos++
			for s.pos+8 <= len(s.b) && binary.LittleEndian.Uint64(s.b[s.pos:]) == 0x2020202020202020 {
				s.pos += 8
			}
		case '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *jsonScanner) errf(format string, args ...any) error {
	return fmt.Errorf("offset %d: %s", s.pos, fmt.Sprintf(format, args...))
}

// expect consumes byte c after optional whitespace.
func (s *jsonScanner) expect(c byte) error {
	s.skipSpace()
	if s.pos >= len(s.b) {
		return s.errf("unexpected end, want %q", c)
	}
	if s.b[s.pos] != c {
		return s.errf("got %q, want %q", s.b[s.pos], c)
	}
	s.pos++
	return nil
}

// peek returns the next non-space byte without consuming it (0 at the end).
func (s *jsonScanner) peek() byte {
	s.skipSpace()
	if s.pos >= len(s.b) {
		return 0
	}
	return s.b[s.pos]
}

// str reads a JSON string. Strings without escapes (nearly all tokens) are converted with a
// single allocation.
func (s *jsonScanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.pos
	for s.pos < len(s.b) {
		c := s.b[s.pos]
		if c == '"' {
			v := string(s.b[start:s.pos])
			s.pos++
			return v, nil
		}
		if c == '\\' {
			return s.strSlow(start)
		}
		if c < 0x20 {
			return "", s.errf("control character in string")
		}
		s.pos++
	}
	return "", s.errf("unterminated string")
}

func (s *jsonScanner) strSlow(start int) (string, error) {
	buf := append([]byte(nil), s.b[start:s.pos]...)
	for s.pos < len(s.b) {
		c := s.b[s.pos]
		switch {
		case c == '"':
			s.pos++
			if !utf8.Valid(buf) {
				return string([]rune(string(buf))), nil // invalid bytes become U+FFFD, as serde does
			}
			return string(buf), nil
		case c < 0x20:
			return "", s.errf("control character in string")
		case c != '\\':
			buf = append(buf, c)
			s.pos++
			continue
		}
		s.pos++
		if s.pos >= len(s.b) {
			break
		}
		e := s.b[s.pos]
		s.pos++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, err := s.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				// A high surrogate must be followed by \uDC00-\uDFFF.
				if s.pos+1 < len(s.b) && s.b[s.pos] == '\\' && s.b[s.pos+1] == 'u' {
					s.pos += 2
					r2, err := s.hex4()
					if err != nil {
						return "", err
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						r = d
					} else {
						return "", s.errf("invalid surrogate pair")
					}
				} else {
					return "", s.errf("lone surrogate")
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", s.errf("invalid escape \\%c", e)
		}
	}
	return "", s.errf("unterminated string")
}

func (s *jsonScanner) hex4() (rune, error) {
	if s.pos+4 > len(s.b) {
		return 0, s.errf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(s.b[s.pos:s.pos+4]), 16, 32)
	if err != nil {
		return 0, s.errf("bad \\u escape")
	}
	s.pos += 4
	return rune(v), nil
}

// uint reads a non-negative integer that fits in int32 (token ids).
func (s *jsonScanner) uint() (int, error) {
	s.skipSpace()
	start := s.pos
	v := 0
	for s.pos < len(s.b) && s.b[s.pos] >= '0' && s.b[s.pos] <= '9' {
		v = v*10 + int(s.b[s.pos]-'0')
		if v > 1<<31-1 {
			return 0, s.errf("id too large")
		}
		s.pos++
	}
	if s.pos == start {
		return 0, s.errf("want a non-negative integer")
	}
	if s.pos < len(s.b) && (s.b[s.pos] == '.' || s.b[s.pos] == 'e' || s.b[s.pos] == 'E') {
		return 0, s.errf("want an integer")
	}
	return v, nil
}

func (s *jsonScanner) end() error {
	s.skipSpace()
	if s.pos != len(s.b) {
		return s.errf("trailing data")
	}
	return nil
}

var errNotObject = errors.New("want a JSON object")

// parseVocab reads {"token": id, ...}. Duplicate keys keep the last id, as serde's map does.
func parseVocab(raw []byte) (map[string]int, error) {
	s := &jsonScanner{b: raw}
	m, err := s.vocab()
	if err != nil {
		return nil, err
	}
	return m, s.end()
}

func (s *jsonScanner) vocab() (map[string]int, error) {
	if s.peek() != '{' {
		return nil, errNotObject
	}
	s.pos++
	// Pre-size from a cheap estimate (one entry per ~12 bytes) to avoid rehashing.
	m := make(map[string]int, 1024)
	if s.peek() == '}' {
		s.pos++
		return m, nil
	}
	for {
		k, err := s.str()
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", len(m), err)
		}
		if err := s.expect(':'); err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
		v, err := s.uint()
		if err != nil {
			return nil, fmt.Errorf("%q: %w", k, err)
		}
		m[k] = v
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return m, nil
		default:
			return nil, fmt.Errorf("after %q: %w", k, s.errf("want ',' or '}'"))
		}
	}
}

// parseMerges reads merges as ["a b", ...] (legacy) or [["a","b"], ...]. The legacy form
// splits on single spaces and must give exactly two parts, like HF; "#version" lines are skipped.
func parseMerges(raw []byte) ([][2]string, error) {
	s := &jsonScanner{b: raw}
	out, err := s.merges()
	if err != nil {
		return nil, err
	}
	return out, s.end()
}

func (s *jsonScanner) merges() ([][2]string, error) {
	if err := s.expect('['); err != nil {
		return nil, err
	}
	out := make([][2]string, 0, 1024)
	if s.peek() == ']' {
		s.pos++
		return out, nil
	}
	legacy := s.peek() == '"'
	for i := 0; ; i++ {
		var pair [2]string
		if legacy {
			line, err := s.str()
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			if strings.HasPrefix(line, "#version") {
				goto next
			}
			sp := strings.IndexByte(line, ' ')
			if sp < 0 || strings.IndexByte(line[sp+1:], ' ') >= 0 {
				return nil, fmt.Errorf("[%d]: %q is not two tokens separated by one space", i, line)
			}
			pair = [2]string{line[:sp], line[sp+1:]}
		} else {
			if err := s.expect('['); err != nil {
				return nil, fmt.Errorf("[%d]: want a [\"a\",\"b\"] pair: %w", i, err)
			}
			a, err := s.str()
			if err != nil {
				return nil, fmt.Errorf("[%d][0]: %w", i, err)
			}
			if err := s.expect(','); err != nil {
				return nil, fmt.Errorf("[%d]: want two strings: %w", i, err)
			}
			b, err := s.str()
			if err != nil {
				return nil, fmt.Errorf("[%d][1]: %w", i, err)
			}
			if err := s.expect(']'); err != nil {
				return nil, fmt.Errorf("[%d]: want exactly two strings: %w", i, err)
			}
			pair = [2]string{a, b}
		}
		out = append(out, pair)
	next:
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return out, nil
		default:
			return nil, fmt.Errorf("[%d]: %w", i, s.errf("want ',' or ']'"))
		}
	}
}

// skipValue steps over one JSON value. It checks structure (brackets, strings, literals)
// without building anything, which is all the loader needs for the parts it hands on.
func (s *jsonScanner) skipValue() error {
	var stack []byte // open containers: '{' or '['
	for {
		// One value.
		c := s.peek()
		switch {
		case c == '"':
			if err := s.skipString(); err != nil {
				return err
			}
		case c == '{' || c == '[':
			s.pos++
			n := s.peek()
			if (c == '{' && n == '}') || (c == '[' && n == ']') {
				s.pos++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if err := s.skipKey(); err != nil {
					return err
				}
			}
			continue
		case c == '-' || (c >= '0' && c <= '9'):
			start := s.pos
			for s.pos < len(s.b) && strings.IndexByte("+-.eE0123456789", s.b[s.pos]) >= 0 {
				s.pos++
			}
			if _, err := strconv.ParseFloat(string(s.b[start:s.pos]), 64); err != nil {
				return s.errf("bad number")
			}
		case c == 't' || c == 'f' || c == 'n':
			ok := false
			for _, lit := range []string{"true", "false", "null"} {
				if bytes.HasPrefix(s.b[s.pos:], []byte(lit)) {
					s.pos += len(lit)
					ok = true
					break
				}
			}
			if !ok {
				return s.errf("invalid literal")
			}
		case c == 0:
			return s.errf("unexpected end")
		default:
			return s.errf("unexpected %q", c)
		}
		// After a value: close containers, or step to the next element.
		for {
			if len(stack) == 0 {
				return nil
			}
			top := stack[len(stack)-1]
			n := s.peek()
			if n == ',' {
				s.pos++
				if top == '{' {
					if err := s.skipKey(); err != nil {
						return err
					}
				}
				break
			}
			if (top == '{' && n == '}') || (top == '[' && n == ']') {
				s.pos++
				stack = stack[:len(stack)-1]
				continue
			}
			return s.errf("want ',' or a closing bracket")
		}
	}
}

func (s *jsonScanner) skipString() error {
	if err := s.expect('"'); err != nil {
		return err
	}
	for {
		k := bytes.IndexAny(s.b[s.pos:], "\"\\")
		if k < 0 {
			return s.errf("unterminated string")
		}
		s.pos += k
		if s.b[s.pos] == '\\' {
			s.pos += 2
			continue
		}
		s.pos++
		return nil
	}
}

func (s *jsonScanner) skipKey() error {
	if err := s.skipString(); err != nil {
		return err
	}
	return s.expect(':')
}

// objectFields splits a JSON object into its top-level fields without decoding the values.
// A key given twice keeps the last value, as serde does.
func objectFields(raw []byte) (map[string][]byte, error) {
	s := &jsonScanner{b: raw}
	out, err := s.fields(nil)
	if err != nil {
		return nil, err
	}
	return out, s.end()
}

// fields is objectFields on the scanner's current value; a key with a handler is consumed by
// it in place (so the big parts are read once, not skipped and then parsed).
func (s *jsonScanner) fields(handlers map[string]func(*jsonScanner) error) (map[string][]byte, error) {
	raw := s.b
	if err := s.expect('{'); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	if s.peek() == '}' {
		s.pos++
		return out, nil
	}
	for {
		k, err := s.str()
		if err != nil {
			return nil, err
		}
		if err := s.expect(':'); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		s.skipSpace()
		start := s.pos
		if h := handlers[k]; h != nil && s.peek() != 'n' {
			if err := h(s); err != nil {
				return nil, atPath(k, err)
			}
		} else if err := s.skipValue(); err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		out[k] = raw[start:s.pos]
		switch s.peek() {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return out, nil
		default:
			return nil, s.errf("want ',' or '}' after %q", k)
		}
	}
}

// pathError is an error inside a nested field; paths join as model.merges[3].
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// atPath puts key in front of err's path. Errors from the vocab and merges readers start
// with "[i]: " when they concern one element.
func atPath(key string, err error) error {
	var pe *pathError
	if errors.As(err, &pe) {
		sep := "."
		if strings.HasPrefix(pe.path, "[") {
			sep = ""
		}
		return &pathError{key + sep + pe.path, pe.err}
	}
	msg := err.Error()
	if strings.HasPrefix(msg, "[") {
		if i := strings.Index(msg, "]: "); i > 0 {
			return &pathError{key + msg[:i+1], errors.New(msg[i+3:])}
		}
	}
	return &pathError{key, err}
}
