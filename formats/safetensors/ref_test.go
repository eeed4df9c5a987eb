package safetensors

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/tokenwise/tokenwise/tensor"
)

// refPython returns the Python interpreter of the reference venv (scripts/setup-refs.sh makes
// it at .cache/py, beside TOKENWISE_REFS), checking that the modules import. Without it the
// test is skipped, or fails when TOKENWISE_REQUIRE_REFS=1.
func refPython(t *testing.T, modules ...string) string {
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
	check := "import " + modules[0]
	for _, m := range modules[1:] {
		check += ", " + m
	}
	if out, err := exec.Command(py, "-c", check).CombinedOutput(); err != nil {
		msg := "reference Python " + py + " with " + check + " unavailable (run scripts/setup-refs.sh): " + string(out)
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

// Go writes; the Rust library (through Python) reads every tensor back, then serializes the
// same tensors itself. The two files must be byte-identical.
func TestRefGoWritesPythonReads(t *testing.T) {
	py := refPython(t, "safetensors", "numpy")
	dir := t.TempDir()
	ts := sample()
	ts = append(ts,
		tensor.Info{Name: "f64", DType: tensor.F64, Shape: []int{2}, Data: tensor.Bytes([]float64{math.Pi, -1})},
		tensor.Info{Name: "i64", DType: tensor.I64, Shape: []int{1, 1}, Data: tensor.Bytes([]int64{-5})},
		tensor.Info{Name: "i32", DType: tensor.I32, Shape: []int{3}, Data: tensor.Bytes([]int32{1, 2, 3})},
		tensor.Info{Name: "i8", DType: tensor.I8, Shape: []int{3}, Data: tensor.Bytes([]int8{-1, 0, 1})},
		tensor.Info{Name: "i16", DType: tensor.I16, Shape: []int{1}, Data: tensor.Bytes([]int16{300})},
		tensor.Info{Name: "naïve \"name\"\n", DType: tensor.F32, Shape: []int{1}, Data: tensor.Bytes([]float32{9})},
	)
	goPath := filepath.Join(dir, "go.safetensors")
	if err := Write(goPath, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	pyPath := filepath.Join(dir, "py.safetensors")
	script := `
import sys, json, numpy as np
from safetensors import deserialize, serialize, TensorSpec
src, dst = sys.argv[1], sys.argv[2]
raw = open(src, "rb").read()
names = {"F64":"float64","F32":"float32","F16":"float16","BF16":"bfloat16","I64":"int64","I32":"int32","I16":"int16","I8":"int8"}
out, specs, keep = {}, {}, []
for name, t in deserialize(raw):
    out[name] = {"dtype": t["dtype"], "shape": t["shape"], "hex": bytes(t["data"]).hex()}
    buf = np.frombuffer(bytes(t["data"]) or b"\0", dtype=np.uint8).copy()
    keep.append(buf)
    specs[name] = TensorSpec(dtype=names[t["dtype"]], shape=t["shape"], data_ptr=buf.ctypes.data, data_len=len(t["data"]))
open(dst, "wb").write(bytes(serialize(specs, {"format": "pt"})))
print(json.dumps(out))
`
	var got map[string]struct {
		DType string `json:"dtype"`
		Shape []int  `json:"shape"`
		Hex   string `json:"hex"`
	}
	if err := json.Unmarshal(runPython(t, py, script, goPath, pyPath), &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ts) {
		t.Fatalf("python read %d tensors, want %d", len(got), len(ts))
	}
	for _, w := range ts {
		g, ok := got[w.Name]
		if !ok || g.DType != w.DType.SafetensorsName() || !equalShape(g.Shape, w.Shape) || g.Hex != hex.EncodeToString(w.Data) {
			t.Errorf("tensor %q: python read %+v", w.Name, g)
		}
	}
	a, _ := os.ReadFile(goPath)
	b, _ := os.ReadFile(pyPath)
	if !bytes.Equal(a, b) {
		t.Errorf("Go and Rust serializations differ:\n go: %q\n py: %q", a[:min(len(a), 400)], b[:min(len(b), 400)])
	}
}

// Python (numpy) writes; Go reads bit-exact. numpy's float16 conversions also check
// tensor.F32ToF16/F16ToF32 on ties, subnormals, overflow and random values.
func TestRefPythonWritesGoReads(t *testing.T) {
	py := refPython(t, "safetensors", "numpy")
	path := filepath.Join(t.TempDir(), "np.safetensors")
	script := `
import sys, numpy as np
from safetensors.numpy import save_file
rng = np.random.default_rng(7)
edge = np.array([0.0, -0.0, 1.0, 65504, 65519.99, 65520, 1e10, -1e10, np.inf, -np.inf, 2**-24, 2**-25, 1.5*2**-24,
                 2**-25*1.0000001, 1.00048828125, 1.00146484375, 6.1e-5, 0.1, 1/3], dtype=np.float32)
src = np.concatenate([edge, (rng.standard_normal(4000) * 10.0 ** rng.integers(-9, 6, 4000)).astype(np.float32)])
mids = (np.arange(0, 0x7bff, dtype=np.uint16).view(np.float16).astype(np.float64) +
        np.arange(1, 0x7c00, dtype=np.uint16).view(np.float16).astype(np.float64)) / 2
src = np.concatenate([src, mids.astype(np.float32)])
h = src.astype(np.float16)
save_file({"src": src.reshape(-1, 1), "f16": h.reshape(-1, 1), "back": h.astype(np.float32).reshape(-1, 1),
           "f64": rng.standard_normal((3, 5)), "i64": np.arange(-3, 3, dtype=np.int64).reshape(2, 3)},
          sys.argv[1], metadata={"format": "np"})
`
	runPython(t, py, script, path)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src, _ := f.Tensor("src")
	h, _ := f.Tensor("f16")
	back, _ := f.Tensor("back")
	if src.DType != tensor.F32 || h.DType != tensor.F16 || back.DType != tensor.F32 || f.Metadata["format"] != "np" {
		t.Fatalf("dtypes %s %s %s, metadata %v", src.DType, h.DType, back.DType, f.Metadata)
	}
	sv, _ := tensor.Float32s(src.Data)
	hv, _ := tensor.Uint16s(h.Data)
	bv, _ := tensor.Float32s(back.Data)
	if len(sv) < 30000 || len(hv) != len(sv) {
		t.Fatalf("%d source values, %d f16", len(sv), len(hv))
	}
	bad := 0
	for i, x := range sv {
		if got := tensor.F32ToF16(x); got != hv[i] && bad < 10 {
			t.Errorf("F32ToF16(%g) = %#04x, numpy %#04x", x, got, hv[i])
			bad++
		}
		if got := tensor.F16ToF32(hv[i]); math.Float32bits(got) != math.Float32bits(bv[i]) && bad < 10 {
			t.Errorf("F16ToF32(%#04x) = %g, numpy %g", hv[i], got, bv[i])
			bad++
		}
	}
	i64, _ := f.Tensor("i64")
	dst := make([]float32, 6)
	if err := tensor.Dequantize(i64.DType, i64.Data, dst); err != nil || dst[0] != -3 || dst[5] != 2 || !equalShape(i64.Shape, []int{2, 3}) {
		t.Errorf("i64: %v %v %v", dst, i64.Shape, err)
	}
	if f64, ok := f.Tensor("f64"); !ok || f64.DType != tensor.F64 || len(f64.Data) != 120 {
		t.Errorf("f64: %+v", f64)
	}
}
