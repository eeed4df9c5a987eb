package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"github.com/tokenwise/tokenwise/formats/internal/atomicfile"
	"io"
	"math"

	"github.com/tokenwise/tokenwise/tensor"
)

// maxNameLen mirrors GGML_MAX_NAME: llama.cpp rejects tensor names of 64 bytes or more.
const maxNameLen = 63

// Write stores a GGUF v3 file at path (written to a temporary file, then renamed).
//
// Metadata is written in the given order. alignment 0 means general.alignment from meta if
// present, else 32; a non-default alignment not in meta is appended as general.alignment.
// Tensors are written in the given order, each padded to the alignment, so the layout is the
// one llama.cpp expects (each offset equals the padded sizes before it).
func Write(path string, meta []KV, tensors []tensor.Info, alignment int) error {
	return WriteStream(path, meta, tensors, alignment, nil)
}

// WriteStream is Write for data produced one tensor at a time (a dtype conversion, say), so a
// whole converted model is never held in memory: the tensors' Data may be nil, their sizes come
// from Shape and DType, and data(i) is called once per tensor, in order, for the bytes of
// tensors[i]; they may be reused after the call returns. A nil data uses tensors[i].Data.
func WriteStream(path string, meta []KV, tensors []tensor.Info, alignment int, data func(i int) ([]byte, error)) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		return encode(w, meta, tensors, alignment, data)
	})
}

// Encode writes a GGUF v3 file to w; see Write.
func Encode(w io.Writer, meta []KV, tensors []tensor.Info, alignment int) error {
	return encode(w, meta, tensors, alignment, nil)
}

func encode(w io.Writer, meta []KV, tensors []tensor.Info, alignment int, data func(i int) ([]byte, error)) error {
	align, meta, err := resolveAlignment(meta, alignment)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, kv := range meta {
		if seen[kv.Key] {
			return fmt.Errorf("duplicate metadata key %q", kv.Key)
		}
		seen[kv.Key] = true
		if err := kv.Value.check(0); err != nil {
			return fmt.Errorf("metadata %q: %w", kv.Key, err)
		}
	}
	names := map[string]bool{}
	sizes := make([]uint64, len(tensors))
	for i, t := range tensors {
		if t.Name == "" || len(t.Name) > maxNameLen {
			return fmt.Errorf("tensor %q: name must be 1 to %d bytes for llama.cpp", t.Name, maxNameLen)
		}
		if names[t.Name] {
			return fmt.Errorf("duplicate tensor name %q", t.Name)
		}
		names[t.Name] = true
		if len(t.Shape) > maxDims {
			return fmt.Errorf("tensor %q: %d dimensions, GGUF allows at most %d", t.Name, len(t.Shape), maxDims)
		}
		if len(t.Shape) > 0 && t.Shape[len(t.Shape)-1]%t.DType.BlockSize() != 0 {
			return fmt.Errorf("tensor %q: row length %d is not a multiple of the %s block size %d", t.Name, t.Shape[len(t.Shape)-1], t.DType, t.DType.BlockSize())
		}
		n := t.NumElements()
		if n < 0 {
			return fmt.Errorf("tensor %q: invalid shape %v", t.Name, t.Shape)
		}
		size, err := t.DType.BytesFor(n)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		sizes[i] = uint64(size)
		if data == nil {
			if err := t.Check(); err != nil {
				return err
			}
		}
	}

	e := &encoder{w: bufio.NewWriterSize(w, 64<<10)}
	e.u32(magic)
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(meta)))
	for _, kv := range meta {
		e.str(kv.Key)
		e.u32(uint32(kv.Value.Type))
		e.value(kv.Value)
	}
	var off uint64
	for i, t := range tensors {
		e.str(t.Name)
		e.u32(uint32(len(t.Shape)))
		for j := len(t.Shape) - 1; j >= 0; j-- { // GGUF wants ne[0] = innermost first
			e.u64(uint64(t.Shape[j]))
		}
		e.u32(t.DType.GGML())
		e.u64(off)
		off += pad(sizes[i], align)
	}
	e.zeros(pad(e.n, align) - e.n)
	for i, t := range tensors {
		b := t.Data
		if data != nil {
			if b, err = data(i); err != nil {
				return fmt.Errorf("tensor %q: %w", t.Name, err)
			}
			if uint64(len(b)) != sizes[i] {
				return fmt.Errorf("tensor %q: %s%v needs %d bytes, got %d", t.Name, t.DType, t.Shape, sizes[i], len(b))
			}
		}
		e.write(b)
		e.zeros(pad(sizes[i], align) - sizes[i])
	}
	if e.err != nil {
		return e.err
	}
	return e.w.Flush()
}

func resolveAlignment(meta []KV, alignment int) (uint64, []KV, error) {
	for _, kv := range meta {
		if kv.Key != "general.alignment" {
			continue
		}
		a, ok := kv.Value.Data.(uint32)
		if !ok || kv.Value.Type != TypeUint32 {
			return 0, nil, fmt.Errorf("general.alignment must be a uint32")
		}
		if alignment != 0 && uint32(alignment) != a {
			return 0, nil, fmt.Errorf("alignment %d disagrees with general.alignment %d", alignment, a)
		}
		alignment = int(a)
		if alignment <= 0 || alignment&(alignment-1) != 0 {
			return 0, nil, fmt.Errorf("general.alignment %d is not a power of two", alignment)
		}
		return uint64(alignment), meta, nil
	}
	if alignment == 0 {
		return defaultAlignment, meta, nil
	}
	if alignment < 0 || alignment&(alignment-1) != 0 || alignment > 1<<30 {
		return 0, nil, fmt.Errorf("alignment %d is not a power of two", alignment)
	}
	if alignment != defaultAlignment {
		meta = append(meta[:len(meta):len(meta)], KV{Key: "general.alignment", Value: Uint32(uint32(alignment))})
	}
	return uint64(alignment), meta, nil
}

func pad(n, align uint64) uint64 { return (n + align - 1) / align * align }

// encoder writes little-endian values and remembers the first error.
type encoder struct {
	w   *bufio.Writer
	n   uint64
	err error
	buf [8]byte
}

func (e *encoder) write(b []byte) {
	if e.err != nil {
		return
	}
	var n int
	n, e.err = e.w.Write(b)
	e.n += uint64(n)
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.write(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:], v)
	e.write(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.write(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.write(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		var n int
		n, e.err = e.w.WriteString(s)
		e.n += uint64(n)
	}
}

var zeroPage [4096]byte

func (e *encoder) zeros(n uint64) {
	for n > 0 {
		k := min(n, uint64(len(zeroPage)))
		e.write(zeroPage[:k])
		n -= k
	}
}

func (e *encoder) scalar(d any) {
	switch x := d.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	}
}

// value writes v's payload (its type tag is written by the caller). v was checked.
func (e *encoder) value(v Value) {
	if v.Type != TypeArray {
		e.scalar(v.Data)
		return
	}
	e.u32(uint32(v.Elem))
	e.u64(uint64(v.Len()))
	switch s := v.Data.(type) {
	case []uint8:
		e.write(s)
	case []int8:
		e.write(tensor.Bytes(s))
	case []uint16:
		e.write(tensor.Bytes(s))
	case []int16:
		e.write(tensor.Bytes(s))
	case []uint32:
		e.write(tensor.Bytes(s))
	case []int32:
		e.write(tensor.Bytes(s))
	case []float32:
		e.write(tensor.Bytes(s))
	case []uint64:
		for _, x := range s {
			e.u64(x)
		}
	case []int64:
		e.write(tensor.Bytes(s))
	case []float64:
		e.write(tensor.Bytes(s))
	case []bool:
		for _, x := range s {
			e.scalar(x)
		}
	case []string:
		for _, x := range s {
			e.str(x)
		}
	case []Value:
		for _, x := range s {
			e.value(x)
		}
	}
}
