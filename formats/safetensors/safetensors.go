// Package safetensors reads and writes Hugging Face .safetensors files.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
// ({"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}, ...}),
// then the tensor data, offsets relative to the byte after the header. Files are memory-mapped;
// every tensor.Info.Data aliases the mapping, so nothing is copied and the data is valid until
// Close. Validation follows the reference Rust implementation: the data offsets must tile the
// data section exactly (sorted, contiguous, no gaps, no overlaps), and each tensor's byte size
// must equal its shape × dtype size.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tokenwise/tokenwise/formats/internal/mmapfile"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"

	"github.com/tokenwise/tokenwise/tensor"
)

// maxHeader is the largest JSON header accepted, the same limit as the Rust reader.
const maxHeader = 100_000_000

// File is one opened .safetensors file.
type File struct {
	Path     string
	Metadata map[string]string // the "__metadata__" entry; empty if absent

	tensors []tensor.Info // in data-offset order
	byName  map[string]int
	mapping []byte // the whole mmapped file, or nil when parsed from caller-owned bytes
}

// Open memory-maps and validates a .safetensors file.
func Open(path string) (*File, error) { return open(path, mmapfile.Map) }

// OpenResident is Open with the file read into memory that may be backed by huge pages
// (faster to stream through, at the cost of a copy: see mmapfile.Read), for a model's weights.
func OpenResident(path string) (*File, error) { return open(path, mmapfile.Read) }

func open(path string, load func(string, int64, string) ([]byte, error)) (*File, error) {
	m, err := load(path, 8, "safetensors")
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

// Close unmaps the file. Every tensor.Info.Data obtained from f becomes invalid.
func (f *File) Close() error {
	if f.mapping == nil {
		return nil
	}
	m := f.mapping
	f.mapping, f.tensors, f.byName = nil, nil, nil
	return mmapfile.Unmap(f.Path, m)
}

// Tensors returns every tensor in data-offset order. The slice is shared: do not modify it.
func (f *File) Tensors() []tensor.Info { return f.tensors }

// Tensor looks a tensor up by name.
func (f *File) Tensor(name string) (tensor.Info, bool) {
	i, ok := f.byName[name]
	if !ok {
		return tensor.Info{}, false
	}
	return f.tensors[i], true
}

// Names returns the tensor names, sorted.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.tensors))
	for _, t := range f.tensors {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names
}

type rawEntry struct {
	Dtype       *string       `json:"dtype"`
	Shape       []json.Number `json:"shape"`
	DataOffsets []json.Number `json:"data_offsets"`
	// Unknown fields are ignored, as the Rust reader does.
}

type parsedEntry struct {
	info       tensor.Info
	begin, end uint64
}

// Parse validates a complete safetensors file held in b. Tensor data aliases b. name is used
// in error messages only.
func Parse(name string, b []byte) (*File, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%s: %d bytes, too small for a safetensors header", name, len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader {
		return nil, fmt.Errorf("%s: header length %d exceeds the %d-byte limit", name, n, maxHeader)
	}
	if n > uint64(len(b)-8) {
		return nil, fmt.Errorf("%s: header length %d runs past the end of the %d-byte file", name, n, len(b))
	}
	header := b[8 : 8+n]
	data := b[8+n:]
	if len(header) == 0 || header[0] != '{' {
		return nil, fmt.Errorf("%s: header does not start with '{'", name)
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("%s: header is not a JSON object", name)
	}
	f := &File{Path: name, Metadata: map[string]string{}, byName: map[string]int{}}
	var entries []parsedEntry
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: header JSON: %w", name, err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, fmt.Errorf("%s: duplicate entry %q in header", name, key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%s: header JSON at %q: %w", name, key, err)
		}
		if key == "__metadata__" {
			if string(raw) == "null" {
				continue
			}
			if err := json.Unmarshal(raw, &f.Metadata); err != nil || f.Metadata == nil {
				return nil, fmt.Errorf("%s: __metadata__ must map strings to strings", name)
			}
			continue
		}
		e, err := parseEntry(key, raw)
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %q: %w", name, key, err)
		}
		entries = append(entries, e)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, fmt.Errorf("%s: header JSON object is not closed", name)
	}
	// Only whitespace (the writer's space padding) may follow the object.
	if rest := bytes.TrimLeft(header[dec.InputOffset():], " \t\r\n"); len(rest) != 0 {
		return nil, fmt.Errorf("%s: unexpected bytes after the header JSON", name)
	}

	// The offsets must tile the data section exactly.
	slices.SortStableFunc(entries, func(a, b parsedEntry) int {
		if a.begin != b.begin {
			if a.begin < b.begin {
				return -1
			}
			return 1
		}
		if a.end < b.end {
			return -1
		} else if a.end > b.end {
			return 1
		}
		return 0
	})
	var pos uint64
	for _, e := range entries {
		if e.begin != pos {
			if e.begin < pos {
				return nil, fmt.Errorf("%s: tensor %q: data_offsets [%d, %d] overlap the previous tensor (ends at %d)", name, e.info.Name, e.begin, e.end, pos)
			}
			return nil, fmt.Errorf("%s: tensor %q: data_offsets [%d, %d] leave a gap after offset %d", name, e.info.Name, e.begin, e.end, pos)
		}
		if e.end > uint64(len(data)) {
			return nil, fmt.Errorf("%s: tensor %q: data_offsets [%d, %d] run past the %d-byte data section", name, e.info.Name, e.begin, e.end, len(data))
		}
		e.info.Data = data[e.begin:e.end:e.end]
		pos = e.end
		f.byName[e.info.Name] = len(f.tensors)
		f.tensors = append(f.tensors, e.info)
	}
	if pos != uint64(len(data)) {
		return nil, fmt.Errorf("%s: tensors cover %d bytes but the data section has %d", name, pos, len(data))
	}
	return f, nil
}

func parseEntry(key string, raw json.RawMessage) (parsedEntry, error) {
	var r rawEntry
	if err := json.Unmarshal(raw, &r); err != nil {
		return parsedEntry{}, fmt.Errorf("bad entry: %w", err)
	}
	if r.Dtype == nil || r.Shape == nil || r.DataOffsets == nil {
		return parsedEntry{}, errors.New("entry needs dtype, shape and data_offsets")
	}
	dt, err := tensor.FromSafetensors(*r.Dtype)
	if err != nil {
		return parsedEntry{}, err
	}
	shape := make([]int, len(r.Shape))
	for i, s := range r.Shape {
		v, err := strconv.ParseUint(string(s), 10, 63)
		if err != nil {
			return parsedEntry{}, fmt.Errorf("shape[%d] = %s is not a non-negative integer", i, s)
		}
		shape[i] = int(v)
	}
	if len(r.DataOffsets) != 2 {
		return parsedEntry{}, fmt.Errorf("data_offsets has %d values, want 2", len(r.DataOffsets))
	}
	var off [2]uint64
	for i, s := range r.DataOffsets {
		v, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return parsedEntry{}, fmt.Errorf("data_offsets[%d] = %s is not a non-negative integer", i, s)
		}
		off[i] = v
	}
	if off[1] < off[0] {
		return parsedEntry{}, fmt.Errorf("data_offsets [%d, %d] end before they begin", off[0], off[1])
	}
	info := tensor.Info{Name: key, DType: dt, Shape: shape}
	nel := info.NumElements()
	if nel < 0 {
		return parsedEntry{}, fmt.Errorf("shape %v is too large", shape)
	}
	want, err := dt.BytesFor(nel)
	if err != nil {
		return parsedEntry{}, err
	}
	if off[1]-off[0] != uint64(want) {
		return parsedEntry{}, fmt.Errorf("%s%v needs %d bytes but data_offsets [%d, %d] hold %d", dt, shape, want, off[0], off[1], off[1]-off[0])
	}
	return parsedEntry{info: info, begin: off[0], end: off[1]}, nil
}

// Model is a Hugging Face checkpoint: one model.safetensors, or shards listed by
// model.safetensors.index.json.
type Model struct {
	Dir      string
	Metadata map[string]string // the first (or only) file's __metadata__
	files    []*File
	tensors  map[string]tensor.Info
}

// OpenModel opens the weights of an HF model folder: model.safetensors.index.json with its
// shards if present, else model.safetensors. A path to a single .safetensors file works too.
func OpenModel(dir string) (*Model, error) { return openModel(dir, Open) }

// OpenModelResident is OpenModel with every file read into memory (OpenResident).
func OpenModelResident(dir string) (*Model, error) { return openModel(dir, OpenResident) }

func openModel(dir string, openFile func(string) (*File, error)) (*Model, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		f, err := openFile(dir)
		if err != nil {
			return nil, err
		}
		return newModel(filepath.Dir(dir), []*File{f}, nil)
	}
	indexPath := filepath.Join(dir, "model.safetensors.index.json")
	if raw, err := os.ReadFile(indexPath); err == nil {
		return openSharded(dir, indexPath, raw, openFile)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	single := filepath.Join(dir, "model.safetensors")
	if _, err := os.Stat(single); err != nil {
		return nil, fmt.Errorf("%s: no model.safetensors or model.safetensors.index.json", dir)
	}
	f, err := openFile(single)
	if err != nil {
		return nil, err
	}
	return newModel(dir, []*File{f}, nil)
}

func openSharded(dir, indexPath string, raw []byte, openFile func(string) (*File, error)) (*Model, error) {
	var idx struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("%s: %w", indexPath, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("%s: weight_map is missing or empty", indexPath)
	}
	var shards []string
	for tname, file := range idx.WeightMap {
		if file == "" || filepath.Base(file) != file || file == "." || file == ".." {
			return nil, fmt.Errorf("%s: weight_map[%q] = %q is not a file name in the model folder", indexPath, tname, file)
		}
		if !slices.Contains(shards, file) {
			shards = append(shards, file)
		}
	}
	sort.Strings(shards)
	var files []*File
	for _, s := range shards {
		f, err := openFile(filepath.Join(dir, s))
		if err != nil {
			for _, g := range files {
				g.Close()
			}
			return nil, err
		}
		files = append(files, f)
	}
	return newModel(dir, files, idx.WeightMap)
}

func newModel(dir string, files []*File, weightMap map[string]string) (*Model, error) {
	m := &Model{Dir: dir, files: files, tensors: map[string]tensor.Info{}, Metadata: files[0].Metadata}
	where := map[string]string{}
	for _, f := range files {
		for _, t := range f.tensors {
			if prev, dup := where[t.Name]; dup {
				m.Close()
				return nil, fmt.Errorf("%s: tensor %q is in both %s and %s", dir, t.Name, prev, filepath.Base(f.Path))
			}
			where[t.Name] = filepath.Base(f.Path)
			m.tensors[t.Name] = t
		}
	}
	for tname, file := range weightMap {
		if got, ok := where[tname]; !ok || got != file {
			m.Close()
			if !ok {
				return nil, fmt.Errorf("%s: model.safetensors.index.json lists %q in %s, but no shard has it", dir, tname, file)
			}
			return nil, fmt.Errorf("%s: model.safetensors.index.json lists %q in %s, but it is in %s", dir, tname, file, got)
		}
	}
	return m, nil
}

// Tensor looks a tensor up by name across all shards.
func (m *Model) Tensor(name string) (tensor.Info, bool) {
	t, ok := m.tensors[name]
	return t, ok
}

// Names returns all tensor names, sorted.
func (m *Model) Names() []string {
	names := make([]string, 0, len(m.tensors))
	for n := range m.tensors {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Close unmaps every shard; tensor data obtained from m becomes invalid.
func (m *Model) Close() error {
	var first error
	for _, f := range m.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	m.files, m.tensors = nil, nil
	return first
}
