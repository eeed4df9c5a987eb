package safetensors

import (
	"encoding/binary"
	"fmt"
	"github.com/tokenwise/tokenwise/formats/internal/atomicfile"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tokenwise/tokenwise/tensor"
)

// writeRank orders dtypes as the Rust writer does (descending position in its Dtype enum,
// roughly widest first), so every tensor's data starts aligned to its element size.
var writeRank = map[tensor.DType]int{
	tensor.I64: 8, tensor.F64: 7, tensor.F32: 6, tensor.I32: 5,
	tensor.BF16: 4, tensor.F16: 3, tensor.I16: 2, tensor.I8: 1,
}

// Write stores tensors in a new .safetensors file at path (written to a temporary file, then
// renamed). The layout is the one the Hugging Face writer produces: tensors ordered by dtype
// width then name, contiguous data offsets, __metadata__ first with sorted keys, and the
// header padded with spaces to a multiple of 8 bytes. With at most one metadata key the
// bytes are identical to Python's safetensors.save_file.
func Write(path string, tensors []tensor.Info, metadata map[string]string) error {
	return WriteStream(path, tensors, metadata, nil)
}

// WriteStream is Write for data produced one tensor at a time (a dtype conversion, say), so a
// whole converted model is never held in memory: the tensors' Data may be nil, their sizes come
// from Shape and DType, and data(i) is called once per tensor, in file order (not index
// order), for the bytes of tensors[i]; they may be reused after the call returns. A nil data
// uses tensors[i].Data.
func WriteStream(path string, tensors []tensor.Info, metadata map[string]string, data func(i int) ([]byte, error)) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		return encode(w, tensors, metadata, data)
	})
}

// Encode writes a safetensors file to w; see Write for the layout.
func Encode(w io.Writer, tensors []tensor.Info, metadata map[string]string) error {
	return encode(w, tensors, metadata, nil)
}

func encode(w io.Writer, tensors []tensor.Info, metadata map[string]string, data func(i int) ([]byte, error)) error {
	order := make([]int, len(tensors))
	sizes := make([]int, len(tensors))
	seen := map[string]bool{}
	for i, t := range tensors {
		order[i] = i
		if t.Name == "" || t.Name == "__metadata__" || !utf8.ValidString(t.Name) {
			return fmt.Errorf("tensor %d: invalid name %q", i, t.Name)
		}
		if seen[t.Name] {
			return fmt.Errorf("duplicate tensor name %q", t.Name)
		}
		seen[t.Name] = true
		if t.DType.SafetensorsName() == "" {
			return fmt.Errorf("tensor %q: dtype %s cannot be stored in safetensors", t.Name, t.DType)
		}
		n := t.NumElements()
		if n < 0 {
			return fmt.Errorf("tensor %q: invalid shape %v", t.Name, t.Shape)
		}
		size, err := t.DType.BytesFor(n)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		sizes[i] = size
		if data == nil {
			if err := t.Check(); err != nil {
				return err
			}
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		ra, rb := writeRank[tensors[a].DType], writeRank[tensors[b].DType]
		if ra != rb {
			return rb - ra
		}
		return strings.Compare(tensors[a].Name, tensors[b].Name)
	})

	var h []byte
	h = append(h, '{')
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k, v := range metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return fmt.Errorf("metadata %q: not valid UTF-8", k)
			}
			keys = append(keys, k)
		}
		sort.Strings(keys)
		h = append(h, `"__metadata__":{`...)
		for i, k := range keys {
			if i > 0 {
				h = append(h, ',')
			}
			h = appendJSONString(h, k)
			h = append(h, ':')
			h = appendJSONString(h, metadata[k])
		}
		h = append(h, '}')
	}
	var off uint64
	for i, idx := range order {
		t := tensors[idx]
		if i > 0 || len(metadata) > 0 {
			h = append(h, ',')
		}
		h = appendJSONString(h, t.Name)
		h = append(h, `:{"dtype":`...)
		h = appendJSONString(h, t.DType.SafetensorsName())
		h = append(h, `,"shape":[`...)
		for j, s := range t.Shape {
			if j > 0 {
				h = append(h, ',')
			}
			h = strconv.AppendInt(h, int64(s), 10)
		}
		h = append(h, `],"data_offsets":[`...)
		h = strconv.AppendUint(h, off, 10)
		h = append(h, ',')
		off += uint64(sizes[idx])
		h = strconv.AppendUint(h, off, 10)
		h = append(h, "]}"...)
	}
	h = append(h, '}')
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(h)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	for _, idx := range order {
		b := tensors[idx].Data
		if data != nil {
			var err error
			if b, err = data(idx); err != nil {
				return fmt.Errorf("tensor %q: %w", tensors[idx].Name, err)
			}
			if len(b) != sizes[idx] {
				return fmt.Errorf("tensor %q: %s%v needs %d bytes, got %d", tensors[idx].Name, tensors[idx].DType, tensors[idx].Shape, sizes[idx], len(b))
			}
		}
		if _, err := w.Write(b); err != nil {
			return fmt.Errorf("tensor %q: %w", tensors[idx].Name, err)
		}
	}
	return nil
}

// appendJSONString escapes like serde_json (what the Rust writer uses): only '"', '\\' and
// control characters; other characters, non-ASCII included, are written as they are.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
