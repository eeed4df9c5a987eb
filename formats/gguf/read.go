package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/tokenwise/tokenwise/formats/internal/mmapfile"
	"math"
	"slices"
	"unsafe"

	"github.com/tokenwise/tokenwise/tensor"
)

const (
	magic            = 0x46554747 // "GGUF" read as a little-endian u32
	defaultAlignment = 32
	maxDims          = 4 // GGML_MAX_DIMS
	maxDepth         = 8 // nesting of arrays of arrays

	// Limits far above any real model (vocabularies have ~10^5 entries, chat templates ~10^4
	// bytes) so a forged count can never make us allocate gigabytes, even in a large file.
	maxKV      = 1 << 20
	maxTensors = 1 << 24
	maxArray   = 1 << 24
	maxString  = 1 << 28
)

// File is an opened GGUF file. Tensor data aliases the memory mapping and stays valid until
// Close.
type File struct {
	Path       string
	Version    uint32
	Alignment  int   // general.alignment, or 32
	DataOffset int64 // where the tensor data section starts in the file
	Meta       []KV  // in file order

	meta    map[string]int
	tensors []tensor.Info // in file order
	byName  map[string]int
	mapping []byte
}

// Open memory-maps and validates a GGUF file.
func Open(path string) (*File, error) { return open(path, mmapfile.Map) }

// OpenResident is Open with the file read into memory that may be backed by huge pages
// (faster to stream through, at the cost of a copy: see mmapfile.Read), for a model's weights.
func OpenResident(path string) (*File, error) { return open(path, mmapfile.Read) }

func open(path string, load func(string, int64, string) ([]byte, error)) (*File, error) {
	m, err := load(path, 24, "GGUF")
	if err != nil {
		return nil, err
	}
	f, err := Parse(path, m)
	if err != nil {
		mmapfile.Unmap(path, m)
		return nil, err
	}
	f.mapping = m
	return f, nil
}

// Close unmaps the file; tensor data obtained from f becomes invalid.
func (f *File) Close() error {
	if f.mapping == nil {
		return nil
	}
	m := f.mapping
	f.mapping, f.tensors, f.byName = nil, nil, nil
	return mmapfile.Unmap(f.Path, m)
}

// DropMetadata releases the parsed metadata: Meta becomes empty and Get finds nothing, while
// tensors stay valid until Close. A caller that keeps the file open for its tensor data once
// it has read the metadata it needs calls it: a 150k-token vocabulary takes ~8 MB of heap
// parsed, and its ~6 MB of header pages would stay resident beside the weights (they are
// handed back to the page cache; nothing reads them again).
func (f *File) DropMetadata() {
	f.Meta, f.meta = nil, nil
	if f.mapping != nil {
		_ = mmapfile.Release(f.mapping, int(f.DataOffset)) // advice only: a failure costs memory, not correctness
	}
}

// Tensors returns the tensors in file order; Shape is PyTorch order (GGUF dims reversed).
// The slice is shared: do not modify it.
func (f *File) Tensors() []tensor.Info { return f.tensors }

// Tensor looks a tensor up by name.
func (f *File) Tensor(name string) (tensor.Info, bool) {
	i, ok := f.byName[name]
	if !ok {
		return tensor.Info{}, false
	}
	return f.tensors[i], true
}

// Get looks a metadata value up by key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.meta[key]
	if !ok {
		return Value{}, false
	}
	return f.Meta[i].Value, true
}

// errTruncated is wrapped with the position where the data ran out.
var errTruncated = errors.New("unexpected end of file")

type reader struct {
	b   []byte
	pos int
}

func (r *reader) need(n uint64) error {
	if n > uint64(len(r.b)-r.pos) {
		return fmt.Errorf("at byte %d: %w (need %d more bytes, %d left)", r.pos, errTruncated, n, len(r.b)-r.pos)
	}
	return nil
}

func (r *reader) bytes(n uint64) ([]byte, error) {
	if err := r.need(n); err != nil {
		return nil, err
	}
	b := r.b[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b, nil
}

func (r *reader) u32() (uint32, error) {
	b, err := r.bytes(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64() (uint64, error) {
	b, err := r.bytes(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (r *reader) str() (string, error) {
	n, err := r.u64()
	if err != nil {
		return "", err
	}
	if n > maxString {
		return "", fmt.Errorf("at byte %d: string length %d exceeds the %d-byte limit", r.pos-8, n, maxString)
	}
	b, err := r.bytes(n)
	if err != nil {
		return "", fmt.Errorf("string of %d bytes: %w", n, err)
	}
	return string(b), nil
}

// count reads an element count and rejects one that cannot fit in the rest of the file
// given the minimum size of an element, so a forged header never triggers a huge allocation.
func (r *reader) count(what string, minSize, limit uint64) (int, error) {
	n, err := r.u64()
	if err != nil {
		return 0, err
	}
	if n > limit {
		return 0, fmt.Errorf("at byte %d: %s count %d exceeds the limit %d", r.pos-8, what, n, limit)
	}
	if left := uint64(len(r.b) - r.pos); n > left/minSize {
		return 0, fmt.Errorf("at byte %d: %s count %d cannot fit in the %d bytes left", r.pos-8, what, n, left)
	}
	return int(n), nil
}

// strings reads n length-prefixed strings into one shared allocation (a vocabulary is ~10^5
// strings: one allocation instead of one each). The bytes are validated in a first pass, so
// a forged count fails before anything is allocated for it.
func (r *reader) strings(n int) ([]string, error) {
	start, total := r.pos, uint64(0)
	for i := range n {
		l, err := r.u64()
		if err == nil && l > maxString {
			err = fmt.Errorf("string length %d exceeds the %d-byte limit", l, maxString)
		}
		if err == nil {
			_, err = r.bytes(l)
		}
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		total += l
	}
	buf := make([]byte, 0, total)
	out := make([]string, n)
	r.pos = start
	for i := range out {
		l, _ := r.u64()
		b, _ := r.bytes(l)
		off := len(buf)
		buf = append(buf, b...)
		out[i] = unsafe.String(unsafe.SliceData(buf[off:]), len(b))
	}
	return out, nil
}

func (r *reader) value(t Type, depth int) (Value, error) {
	if !t.valid() {
		return Value{}, fmt.Errorf("unknown value type %d", uint32(t))
	}
	if t == TypeArray {
		if depth >= maxDepth {
			return Value{}, fmt.Errorf("arrays nested deeper than %d", maxDepth)
		}
		et, err := r.u32()
		if err != nil {
			return Value{}, err
		}
		return r.array(Type(et), depth+1)
	}
	if t == TypeString {
		s, err := r.str()
		return Value{Type: t, Data: s}, err
	}
	b, err := r.bytes(uint64(t.size()))
	if err != nil {
		return Value{}, err
	}
	le := binary.LittleEndian
	var d any
	switch t {
	case TypeUint8:
		d = b[0]
	case TypeInt8:
		d = int8(b[0])
	case TypeUint16:
		d = le.Uint16(b)
	case TypeInt16:
		d = int16(le.Uint16(b))
	case TypeUint32:
		d = le.Uint32(b)
	case TypeInt32:
		d = int32(le.Uint32(b))
	case TypeFloat32:
		d = math.Float32frombits(le.Uint32(b))
	case TypeBool:
		if b[0] > 1 {
			return Value{}, fmt.Errorf("bool value %d is neither 0 nor 1", b[0])
		}
		d = b[0] == 1
	case TypeUint64:
		d = le.Uint64(b)
	case TypeInt64:
		d = int64(le.Uint64(b))
	case TypeFloat64:
		d = math.Float64frombits(le.Uint64(b))
	}
	return Value{Type: t, Data: d}, nil
}

func (r *reader) array(et Type, depth int) (Value, error) {
	if !et.valid() {
		return Value{}, fmt.Errorf("array of unknown value type %d", uint32(et))
	}
	minSize := uint64(et.size())
	if et == TypeString || et == TypeArray {
		minSize = 8 // a length or an element type + count
		if et == TypeArray {
			minSize = 12
		}
	}
	n, err := r.count("array element", minSize, maxArray)
	if err != nil {
		return Value{}, err
	}
	v := Value{Type: TypeArray, Elem: et}
	switch et {
	case TypeString:
		s, err := r.strings(n)
		if err != nil {
			return Value{}, err
		}
		v.Data = s
		return v, nil
	case TypeArray:
		s := make([]Value, 0, min(n, 1<<10))
		for i := range n {
			e, err := r.value(TypeArray, depth)
			if err != nil {
				return Value{}, fmt.Errorf("element %d: %w", i, err)
			}
			s = append(s, e)
		}
		v.Data = s
		return v, nil
	case TypeBool:
		b, _ := r.bytes(uint64(n))
		s := make([]bool, n)
		for i, c := range b {
			if c > 1 {
				return Value{}, fmt.Errorf("element %d: bool value %d is neither 0 nor 1", i, c)
			}
			s[i] = c == 1
		}
		v.Data = s
		return v, nil
	}
	b, _ := r.bytes(uint64(n) * minSize) // count() guaranteed these bytes exist
	v.Data = decodeNumbers(et, b, n)
	return v, nil
}

func decodeNumbers(et Type, b []byte, n int) any {
	le := binary.LittleEndian
	switch et {
	case TypeUint8:
		return slices.Clone(b)
	case TypeInt8:
		s := make([]int8, n)
		for i := range s {
			s[i] = int8(b[i])
		}
		return s
	case TypeUint16:
		s := make([]uint16, n)
		for i := range s {
			s[i] = le.Uint16(b[2*i:])
		}
		return s
	case TypeInt16:
		s := make([]int16, n)
		for i := range s {
			s[i] = int16(le.Uint16(b[2*i:]))
		}
		return s
	case TypeUint32:
		s := make([]uint32, n)
		for i := range s {
			s[i] = le.Uint32(b[4*i:])
		}
		return s
	case TypeInt32:
		s := make([]int32, n)
		for i := range s {
			s[i] = int32(le.Uint32(b[4*i:]))
		}
		return s
	case TypeFloat32:
		s := make([]float32, n)
		for i := range s {
			s[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return s
	case TypeUint64:
		s := make([]uint64, n)
		for i := range s {
			s[i] = le.Uint64(b[8*i:])
		}
		return s
	case TypeInt64:
		s := make([]int64, n)
		for i := range s {
			s[i] = int64(le.Uint64(b[8*i:]))
		}
		return s
	case TypeFloat64:
		s := make([]float64, n)
		for i := range s {
			s[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return s
	}
	return nil
}

// Parse validates a complete GGUF file held in b; tensor data aliases b. name is used in
// error messages only.
func Parse(name string, b []byte) (*File, error) {
	f, err := parse(name, b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return f, nil
}

func parse(name string, b []byte) (*File, error) {
	r := &reader{b: b}
	m, err := r.u32()
	if err != nil {
		return nil, err
	}
	if m != magic {
		return nil, fmt.Errorf("bad magic %q: not a GGUF file", b[:4])
	}
	version, err := r.u32()
	if err != nil {
		return nil, err
	}
	if version != 2 && version != 3 {
		if version&0xffff == 0 {
			return nil, fmt.Errorf("GGUF version %#x looks big-endian; only little-endian files are supported", version)
		}
		return nil, fmt.Errorf("unsupported GGUF version %d (want 2 or 3)", version)
	}
	// Minimum sizes: a tensor info is name length 8 + n_dims 4 + type 4 + offset 8; a KV is
	// key length 8 + type 4 + at least 1 value byte.
	nTensors, err := r.count("tensor", 24, maxTensors)
	if err != nil {
		return nil, err
	}
	nKV, err := r.count("metadata", 13, maxKV)
	if err != nil {
		return nil, err
	}
	// Capacity hints are capped: the counts are only trusted as far as entries actually parse.
	f := &File{Path: name, Version: version, Alignment: defaultAlignment,
		meta: make(map[string]int, min(nKV, 4096)), byName: make(map[string]int, min(nTensors, 4096))}
	f.Meta = make([]KV, 0, min(nKV, 4096))
	for i := range nKV {
		key, err := r.str()
		if err != nil {
			return nil, fmt.Errorf("metadata %d key: %w", i, err)
		}
		if _, dup := f.meta[key]; dup {
			return nil, fmt.Errorf("duplicate metadata key %q", key)
		}
		t, err := r.u32()
		if err != nil {
			return nil, fmt.Errorf("metadata %q: %w", key, err)
		}
		v, err := r.value(Type(t), 0)
		if err != nil {
			return nil, fmt.Errorf("metadata %q: %w", key, err)
		}
		f.meta[key] = len(f.Meta)
		f.Meta = append(f.Meta, KV{Key: key, Value: v})
	}
	if v, ok := f.Get("general.alignment"); ok {
		a, isU32 := v.Data.(uint32)
		if !isU32 {
			return nil, fmt.Errorf("general.alignment is a %s, want uint32", v.TypeName())
		}
		if a == 0 || a&(a-1) != 0 || a > 1<<30 {
			return nil, fmt.Errorf("general.alignment %d is not a power of two", a)
		}
		f.Alignment = int(a)
	}

	type span struct{ off, size uint64 }
	spans := make([]span, 0, min(nTensors, 4096))
	f.tensors = make([]tensor.Info, 0, min(nTensors, 4096))
	for i := range nTensors {
		tname, err := r.str()
		if err != nil {
			return nil, fmt.Errorf("tensor %d name: %w", i, err)
		}
		if _, dup := f.byName[tname]; dup {
			return nil, fmt.Errorf("duplicate tensor name %q", tname)
		}
		info, off, size, err := readTensorInfo(r, tname)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", tname, err)
		}
		if off%uint64(f.Alignment) != 0 {
			return nil, fmt.Errorf("tensor %q: data offset %d is not a multiple of the alignment %d", tname, off, f.Alignment)
		}
		f.byName[tname] = len(f.tensors)
		f.tensors = append(f.tensors, info)
		spans = append(spans, span{off, size})
	}
	start := (uint64(r.pos) + uint64(f.Alignment) - 1) / uint64(f.Alignment) * uint64(f.Alignment)
	if nTensors > 0 && start > uint64(len(b)) {
		return nil, fmt.Errorf("tensor data section at byte %d starts past the end of the %d-byte file", start, len(b))
	}
	f.DataOffset = int64(start)
	dataLen := uint64(len(b)) - min(start, uint64(len(b)))
	for i := range f.tensors {
		s := spans[i]
		if s.off > dataLen || s.size > dataLen-s.off {
			return nil, fmt.Errorf("tensor %q: data [%d, %d) runs past the end of the %d-byte data section (file truncated?)", f.tensors[i].Name, s.off, s.off+s.size, dataLen)
		}
		p := start + s.off
		f.tensors[i].Data = b[p : p+s.size : p+s.size]
	}
	// Tensors must not share bytes.
	order := make([]int, len(spans))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if spans[a].off < spans[b].off {
			return -1
		} else if spans[a].off > spans[b].off {
			return 1
		}
		return 0
	})
	for k := 1; k < len(order); k++ {
		p, c := spans[order[k-1]], spans[order[k]]
		if c.off < p.off+p.size && c.size > 0 && p.size > 0 {
			return nil, fmt.Errorf("tensor %q overlaps tensor %q", f.tensors[order[k]].Name, f.tensors[order[k-1]].Name)
		}
	}
	return f, nil
}

// readTensorInfo reads dims, type and offset, returning the info (without Data, attached once
// the data section is located), the offset and the data size in bytes.
func readTensorInfo(r *reader, name string) (info tensor.Info, off, size uint64, err error) {
	nd, err := r.u32()
	if err != nil {
		return tensor.Info{}, 0, 0, err
	}
	if nd > maxDims {
		return tensor.Info{}, 0, 0, fmt.Errorf("%d dimensions, at most %d allowed", nd, maxDims)
	}
	ne := make([]uint64, nd)
	n := uint64(1)
	for j := range ne {
		if ne[j], err = r.u64(); err != nil {
			return tensor.Info{}, 0, 0, err
		}
		if ne[j] > math.MaxInt64 || (ne[j] != 0 && n > math.MaxInt64/ne[j]) || (ne[j] != 0 && n*ne[j] > 1<<50) {
			return tensor.Info{}, 0, 0, fmt.Errorf("dims %v are too large", ne[:j+1])
		}
		n *= ne[j]
	}
	tid, err := r.u32()
	if err != nil {
		return tensor.Info{}, 0, 0, err
	}
	dt, err := tensor.FromGGML(tid)
	if err != nil {
		return tensor.Info{}, 0, 0, err
	}
	if off, err = r.u64(); err != nil {
		return tensor.Info{}, 0, 0, err
	}
	if nd > 0 && ne[0]%uint64(dt.BlockSize()) != 0 {
		return tensor.Info{}, 0, 0, fmt.Errorf("row length %d is not a multiple of the %s block size %d", ne[0], dt, dt.BlockSize())
	}
	nbytes, err := dt.BytesFor(int(n))
	if err != nil {
		return tensor.Info{}, 0, 0, err
	}
	shape := make([]int, nd)
	for j := range ne {
		shape[int(nd)-1-j] = int(ne[j])
	}
	return tensor.Info{Name: name, DType: dt, Shape: shape}, off, uint64(nbytes), nil
}
