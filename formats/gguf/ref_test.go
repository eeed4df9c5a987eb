package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/tokenwise/tokenwise/tensor"
)

// refPython returns the reference venv's interpreter (scripts/setup-refs.sh makes it at
// .cache/py, beside TOKENWISE_REFS) after checking gguf-py imports; skips without it, or
// fails when TOKENWISE_REQUIRE_REFS=1.
func refPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("TOKENWISE_PYTHON")
	if py == "" {
		refs := os.Getenv("TOKENWISE_REFS")
		if refs == "" {
			_, file, _, _ := runtime.Caller(0)
			refs = filepath.Join(filepath.Dir(file), "..", "..", ".cache", "refs")
		}
		py = filepath.Join(refs, "..", "py", "bin", "python")
	}
	if out, err := exec.Command(py, "-c", "import gguf, numpy").CombinedOutput(); err != nil {
		msg := "reference Python " + py + " with gguf and numpy unavailable (run scripts/setup-refs.sh): " + string(out)
		if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return py
}

func runPython(t *testing.T, py, script string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(py, append([]string{"-c", script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	return out
}

// Go writes a GGUF; llama.cpp's gguf-py reader must see the same metadata (types and values,
// in order), tensor shapes in GGUF order, types, offsets and bytes, and dequantize to our values.
func TestRefGoWritesGGUFPyReads(t *testing.T) {
	py := refPython(t)
	p := filepath.Join(t.TempDir(), "go.gguf")
	meta := sampleMeta()
	x := make([]float32, 4*64)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)*0.37)) * float32(i%7+1)
	}
	var ts []tensor.Info
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8_0, tensor.Q4_0, tensor.Q4_1} {
		n, _ := dt.BytesFor(len(x))
		b := make([]byte, n)
		if err := tensor.Quantize(dt, x, b); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tensor.Info{Name: "w." + dt.GGMLName(), DType: dt, Shape: []int{4, 64}, Data: b})
	}
	ts = append(ts, tensor.Info{Name: "v", DType: tensor.F32, Shape: []int{3}, Data: tensor.Bytes([]float32{1, 2, 3})})
	if err := Write(p, meta, ts, 0); err != nil {
		t.Fatal(err)
	}
	script := `
import sys, json, numpy as np, gguf
from gguf.quants import dequantize
r = gguf.GGUFReader(sys.argv[1])
fields = []
for k, f in r.fields.items():
    if k.startswith("GGUF."):
        continue
    v = f.contents()
    if isinstance(v, float) and v != v: v = "nan"
    n = int(f.parts[4][0]) if f.types[0] == gguf.GGUFValueType.ARRAY else -1
    fields.append({"key": k, "types": [t.name for t in f.types], "value": v, "count": n})
tensors = []
for t in r.tensors:
    deq = dequantize(t.data, t.tensor_type).astype(np.float32)
    tensors.append({"name": t.name, "type": t.tensor_type.name, "shape": [int(s) for s in t.shape],
                    "offset": int(t.data_offset), "hex": t.data.tobytes().hex(), "deq": deq.tobytes().hex()})
print(json.dumps({"alignment": r.alignment, "data_offset": r.data_offset, "fields": fields, "tensors": tensors}))
`
	var got struct {
		Alignment  int `json:"alignment"`
		DataOffset int `json:"data_offset"`
		Fields     []struct {
			Key   string   `json:"key"`
			Types []string `json:"types"`
			Value any      `json:"value"`
			Count int      `json:"count"`
		} `json:"fields"`
		Tensors []struct {
			Name, Type string
			Shape      []int
			Offset     int
			Hex, Deq   string
		} `json:"tensors"`
	}
	if err := json.Unmarshal(runPython(t, py, script, p), &got); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got.Alignment != 32 || int64(got.DataOffset) != f.DataOffset {
		t.Errorf("gguf-py alignment %d data offset %d; ours %d", got.Alignment, got.DataOffset, f.DataOffset)
	}
	if len(got.Fields) != len(meta) {
		t.Fatalf("gguf-py saw %d fields, want %d", len(got.Fields), len(meta))
	}
	for i, kv := range meta {
		g := got.Fields[i]
		if g.Key != kv.Key {
			t.Fatalf("field %d: gguf-py key %q, want %q (order must be kept)", i, g.Key, kv.Key)
		}
		if want := pyTypes(kv.Value); !reflect.DeepEqual(g.Types, want) {
			t.Errorf("%s: gguf-py types %v, want %v", kv.Key, g.Types, want)
		}
		if want := pyJSON(t, flatten(kv.Value)); !reflect.DeepEqual(pyJSON(t, g.Value), want) {
			t.Errorf("%s: gguf-py value %v, want %v", kv.Key, g.Value, want)
		}
		if kv.Value.Type == TypeArray && g.Count != kv.Value.Len() {
			t.Errorf("%s: gguf-py count %d, want %d", kv.Key, g.Count, kv.Value.Len())
		}
	}
	if len(got.Tensors) != len(ts) {
		t.Fatalf("gguf-py saw %d tensors", len(got.Tensors))
	}
	for i, w := range ts {
		g := got.Tensors[i]
		wantShape := make([]int, len(w.Shape))
		for j := range w.Shape {
			wantShape[j] = w.Shape[len(w.Shape)-1-j] // gguf-py reports ne order
		}
		if g.Name != w.Name || g.Type != w.DType.String() || !reflect.DeepEqual(g.Shape, wantShape) || g.Hex != hex.EncodeToString(w.Data) {
			t.Errorf("tensor %d: gguf-py %s %s %v, want %s %s %v", i, g.Name, g.Type, g.Shape, w.Name, w.DType, wantShape)
		}
		if int64(g.Offset) != f.DataOffset+int64(dataOffset(f, w.Name)) {
			t.Errorf("tensor %s: gguf-py offset %d", w.Name, g.Offset)
		}
		deq := make([]float32, len(w.Data)/w.DType.BlockBytes()*w.DType.BlockSize())
		if err := tensor.Dequantize(w.DType, w.Data, deq); err != nil {
			t.Fatal(err)
		}
		if g.Deq != hex.EncodeToString(tensor.Bytes(deq)) {
			t.Errorf("tensor %s: gguf-py dequantizes differently", w.Name)
		}
	}
}

// dataOffset is where a tensor's data lies relative to the data section.
func dataOffset(f *File, name string) int {
	ti, _ := f.Tensor(name)
	return int(uintptr(unsafe.Pointer(unsafe.SliceData(ti.Data))) - uintptr(unsafe.Pointer(&f.mapping[0])) - uintptr(f.DataOffset))
}

var pyTypeNames = map[Type]string{TypeUint8: "UINT8", TypeInt8: "INT8", TypeUint16: "UINT16", TypeInt16: "INT16",
	TypeUint32: "UINT32", TypeInt32: "INT32", TypeFloat32: "FLOAT32", TypeBool: "BOOL", TypeString: "STRING",
	TypeArray: "ARRAY", TypeUint64: "UINT64", TypeInt64: "INT64", TypeFloat64: "FLOAT64"}

// pyTypes is gguf-py's type chain for a value: an array lists its first element's types
// (nothing more when it is empty), e.g. ["ARRAY", "ARRAY", "STRING"].
func pyTypes(v Value) []string {
	out := []string{pyTypeNames[v.Type]}
	if v.Type != TypeArray || v.Len() == 0 {
		return out
	}
	if sub, ok := v.Data.([]Value); ok {
		return append(out, pyTypes(sub[0])...)
	}
	return append(out, pyTypeNames[v.Elem])
}

// flatten gives the value as gguf-py's contents() does: arrays as lists, nested ones flattened.
func flatten(v Value) any {
	if v.Type != TypeArray {
		return v.Data
	}
	out := []any{}
	if sub, ok := v.Data.([]Value); ok {
		for _, s := range sub {
			out = append(out, flatten(s).([]any)...)
		}
		return out
	}
	rv := reflect.ValueOf(v.Data)
	for i := 0; i < rv.Len(); i++ {
		out = append(out, rv.Index(i).Interface())
	}
	return out
}

// pyJSON normalizes a value through JSON so Go and Python values compare alike.
func pyJSON(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// gguf-py writes; Go reads the same metadata (structure of nested arrays included) and bytes.
func TestRefGGUFPyWritesGoReads(t *testing.T) {
	py := refPython(t)
	p := filepath.Join(t.TempDir(), "py.gguf")
	script := `
import sys, json, numpy as np, gguf
from gguf import GGUFValueType as V, GGMLQuantizationType as T
from gguf.quants import quantize
w = gguf.GGUFWriter(sys.argv[1], arch="llama")
w.add_custom_alignment(64)
w.add_uint32("llama.block_count", 3)
w.add_float32("llama.rope.freq_base", 500000.0)
w.add_key_value("i8", -8, V.INT8); w.add_key_value("u16", 65535, V.UINT16); w.add_key_value("i64", -2**40, V.INT64)
w.add_key_value("f64", 0.1, V.FLOAT64); w.add_bool("b", True); w.add_string("s", "héllo\nworld")
w.add_array("tokenizer.ggml.tokens", ["<|endoftext|>", "Ġthe", "ü"])
w.add_array("tokenizer.ggml.token_type", [3, 1, 1])
w.add_array("floats", [0.5, -1.25])
w.add_array("nested", [["a", "b"], ["c"], ["d", "e", "f"]])
rng = np.random.default_rng(3)
x = rng.standard_normal((8, 64)).astype(np.float32)
w.add_tensor("f32", x)
w.add_tensor("f16", x.astype(np.float16))
for name, ty in [("bf16", T.BF16), ("q8_0", T.Q8_0), ("q4_0", T.Q4_0), ("q4_1", T.Q4_1)]:
    w.add_tensor(name, quantize(x, ty), raw_dtype=ty)
w.add_tensor("vec", np.arange(5, dtype=np.float32))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
r = gguf.GGUFReader(sys.argv[1])
print(json.dumps({t.name: t.data.tobytes().hex() for t in r.tensors if t.name.startswith("blk.0.") or not t.name.startswith("blk.")}))
`
	var want map[string]string
	if err := json.Unmarshal(runPython(t, py, script, p), &want); err != nil {
		t.Fatal(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Alignment != 64 || f.DataOffset%64 != 0 {
		t.Errorf("alignment %d, data offset %d", f.Alignment, f.DataOffset)
	}
	wantMeta := []KV{
		{"general.architecture", String("llama")},
		{"general.alignment", Uint32(64)},
		{"llama.block_count", Uint32(3)},
		{"llama.rope.freq_base", Float32(500000)},
		{"i8", Int8(-8)}, {"u16", Uint16(65535)}, {"i64", Int64(-1 << 40)}, {"f64", Float64(0.1)},
		{"b", Bool(true)}, {"s", String("héllo\nworld")},
		{"tokenizer.ggml.tokens", Array([]string{"<|endoftext|>", "Ġthe", "ü"})},
		{"tokenizer.ggml.token_type", Array([]int32{3, 1, 1})},
		{"floats", Array([]float32{0.5, -1.25})},
		{"nested", Arrays([]Value{Array([]string{"a", "b"}), Array([]string{"c"}), Array([]string{"d", "e", "f"})})},
	}
	if !reflect.DeepEqual(f.Meta, wantMeta) {
		for i := range max(len(f.Meta), len(wantMeta)) {
			if i >= len(f.Meta) || i >= len(wantMeta) || !reflect.DeepEqual(f.Meta[i], wantMeta[i]) {
				t.Fatalf("metadata %d differs:\n got %#v\nwant %#v", i, f.Meta[i:], wantMeta[i:])
			}
		}
	}
	if len(f.Tensors()) != len(want) {
		t.Fatalf("%d tensors, gguf-py %d", len(f.Tensors()), len(want))
	}
	types := map[string]tensor.DType{"f32": tensor.F32, "f16": tensor.F16, "bf16": tensor.BF16, "q8_0": tensor.Q8_0, "q4_0": tensor.Q4_0, "q4_1": tensor.Q4_1, "vec": tensor.F32}
	for _, ti := range f.Tensors() {
		wantShape := []int{8, 64}
		if ti.Name == "vec" {
			wantShape = []int{5}
		}
		if ti.DType != types[ti.Name] || !reflect.DeepEqual(ti.Shape, wantShape) || hex.EncodeToString(ti.Data) != want[ti.Name] {
			t.Errorf("tensor %s: %s%v differs from gguf-py", ti.Name, ti.DType, ti.Shape)
		}
	}
	// And our re-encoding of what we read is byte-identical to gguf-py's file.
	var buf bytes.Buffer
	if err := Encode(&buf, f.Meta, f.Tensors(), 0); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(p)
	if !bytes.Equal(buf.Bytes(), orig) {
		t.Errorf("re-encoded file (%d bytes) differs from gguf-py's (%d bytes)", buf.Len(), len(orig))
	}
}

// The real SmolLM2-135M-Instruct Q4_1 GGUF (written by llama.cpp; installed by
// scripts/setup-refs.sh): it opens, re-encodes to the identical bytes, and the tensors of
// layer 0 and outside the layers (Q4_1, Q8_0, F32) dequantize exactly as gguf-py does (all 30
// layers take gguf-py ~20 s and add no new type).
func TestRefSmolLM2(t *testing.T) {
	py := refPython(t)
	p := filepath.Join(filepath.Dir(filepath.Dir(py)), "..", "refs", "smollm2", "smollm2-135m-instruct-q4_1.gguf")
	if refs := os.Getenv("TOKENWISE_REFS"); refs != "" {
		p = filepath.Join(refs, "smollm2", "smollm2-135m-instruct-q4_1.gguf")
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if arch, err := f.GetString("general.architecture"); err != nil || arch != "llama" {
		t.Errorf("architecture %q %v", arch, err)
	}
	if toks, err := f.GetStrings("tokenizer.ggml.tokens"); err != nil || len(toks) != 49152 {
		t.Errorf("tokens: %d %v", len(toks), err)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || !reflect.DeepEqual(emb.Shape, []int{49152, 576}) {
		t.Errorf("token_embd.weight shape %v (want PyTorch order [vocab, hidden])", emb.Shape)
	}
	var buf bytes.Buffer
	if err := Encode(&buf, f.Meta, f.Tensors(), 0); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), orig) {
		t.Errorf("re-encoding llama.cpp's file gives different bytes (%d vs %d)", buf.Len(), len(orig))
	}
	buf = bytes.Buffer{}
	orig = nil
	script := `
import sys, json, hashlib, numpy as np, gguf
from gguf.quants import dequantize
r = gguf.GGUFReader(sys.argv[1])
print(json.dumps({t.name: [t.tensor_type.name, hashlib.sha256(dequantize(t.data, t.tensor_type).astype(np.float32).tobytes()).hexdigest()] for t in r.tensors if t.name.startswith("blk.0.") or not t.name.startswith("blk.")}))
`
	var want map[string][2]string
	if err := json.Unmarshal(runPython(t, py, script, p), &want); err != nil {
		t.Fatal(err)
	}
	if len(want) < 10 {
		t.Fatalf("gguf-py listed only %d tensors", len(want))
	}
	types := map[tensor.DType]bool{}
	for _, ti := range f.Tensors() {
		if strings.HasPrefix(ti.Name, "blk.") && !strings.HasPrefix(ti.Name, "blk.0.") {
			continue
		}
		types[ti.DType] = true
		out := make([]float32, ti.NumElements())
		if err := tensor.Dequantize(ti.DType, ti.Data, out); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(tensor.Bytes(out))
		if w := want[ti.Name]; w[0] != ti.DType.String() || w[1] != hex.EncodeToString(sum[:]) {
			t.Errorf("tensor %s (%s): dequantized values differ from gguf-py (%s)", ti.Name, ti.DType, w[0])
		}
	}
	if len(types) != 3 {
		t.Errorf("checked types %v, want Q4_1, Q8_0 and F32", types)
	}
}

// go test ./formats/gguf -run X -bench OpenSmolLM2: open + validate the 98 MB SmolLM2 GGUF
// (272 tensors, 49,152 tokens and 48,900 merges of metadata); the weights are only mapped.
func BenchmarkOpenSmolLM2(b *testing.B) {
	refs := os.Getenv("TOKENWISE_REFS")
	if refs == "" {
		_, file, _, _ := runtime.Caller(0)
		refs = filepath.Join(filepath.Dir(file), "..", "..", ".cache", "refs")
	}
	p := filepath.Join(refs, "smollm2", "smollm2-135m-instruct-q4_1.gguf")
	if _, err := os.Stat(p); err != nil {
		b.Skip(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		f, err := Open(p)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
