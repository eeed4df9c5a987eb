package convert

import (
	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/tensor"
)

// writeGGUF writes the architecture metadata, then the tokenizer's, then the tensors.
func writeGGUF(path string, meta []kv, tokMeta []gguf.KV, tensors []tensor.Info) error {
	kvs, err := ggufKVs(meta, tokMeta)
	if err != nil {
		return err
	}
	return gguf.Write(path, kvs, tensors, 32)
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
