package convert

import (
	"fmt"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/tensor"
)

// writeGGUF writes the architecture metadata, then the tokenizer's, then the tensors.
func writeGGUF(path string, meta []kv, tokMeta []gguf.KV, tensors []tensor.Info) error {
	out := make([]gguf.KV, 0, len(meta)+len(tokMeta)+1)
	for _, m := range meta {
		var v gguf.Value
		switch x := m.val.(type) {
		case string:
			v = gguf.String(x)
		case bool:
			v = gguf.Bool(x)
		case uint32:
			v = gguf.Uint32(x)
		case int32:
			v = gguf.Int32(x)
		case float32:
			v = gguf.Float32(x)
		default:
			return fmt.Errorf("gguf metadata %s: unsupported value type %T", m.key, m.val)
		}
		out = append(out, gguf.KV{Key: m.key, Value: v})
	}
	out = append(out, tokMeta...)
	out = append(out, gguf.KV{Key: "general.alignment", Value: gguf.Uint32(32)})
	return gguf.Write(path, out, tensors, 32)
}

// meta reads metadata values of any integer or float width.
type meta struct{ f *gguf.File }

func (m meta) str(key string) (string, bool) {
	v, ok := m.f.Get(key)
	if !ok {
		return "", false
	}
	s, ok := v.Data.(string)
	return s, ok
}

func (m meta) uint(key string) (uint64, bool) {
	v, ok := m.f.Get(key)
	if !ok {
		return 0, false
	}
	switch x := v.Data.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}

func (m meta) float(key string) (float64, bool) {
	v, ok := m.f.Get(key)
	if !ok {
		return 0, false
	}
	switch x := v.Data.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}
