package tensor

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// refPython returns the reference venv's interpreter (scripts/setup-refs.sh makes it at
// .cache/py, beside TOKENWISE_REFS) after checking the modules import; skips without it, or
// fails when TOKENWISE_REQUIRE_REFS=1.
func refPython(t *testing.T, modules string) string {
	t.Helper()
	py := os.Getenv("TOKENWISE_PYTHON")
	if py == "" {
		refs := os.Getenv("TOKENWISE_REFS")
		if refs == "" {
			_, file, _, _ := runtime.Caller(0)
			refs = filepath.Join(filepath.Dir(file), "..", ".cache", "refs")
		}
		py = filepath.Join(refs, "..", "py", "bin", "python")
	}
	if out, err := exec.Command(py, "-c", "import "+modules).CombinedOutput(); err != nil {
		msg := "reference Python " + py + " with " + modules + " unavailable (run scripts/setup-refs.sh): " + string(out)
		if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return py
}

// gguf-py (llama.cpp's Python package) carries numpy ports of ggml's reference quantizers and
// dequantizers, kept equal to the C code by llama.cpp's own tests. Our quantized bytes and
// dequantized floats must match them exactly.
func TestRefGGUFPyQuants(t *testing.T) {
	py := refPython(t, "gguf, numpy")
	dir := t.TempDir()
	script := `
import sys, os, numpy as np
from gguf.quants import quantize, dequantize
from gguf import GGMLQuantizationType as T
d = sys.argv[1]
rng = np.random.default_rng(11)
x = (rng.standard_normal(32 * 512) * 10.0 ** rng.integers(-6, 4, 32 * 512)).astype(np.float32)
x[:32] = 0                                   # all-zero block
x[32:64] = np.arange(32) - 15.5              # many values land near the rounding points
x[64:96] = np.linspace(-127, 127, 32).round() + 0.5 * (np.arange(32) % 2)  # Q8_0 ties at d = 1
x[96:128] = 7.0; x[100] = -8.0                # clamping at 15 in Q4_0
x[128:160] = 3.0                              # constant block: Q4_1 d = 0
x.tofile(os.path.join(d, "x.f32"))
for name, ty in [("q8_0", T.Q8_0), ("q4_0", T.Q4_0), ("q4_1", T.Q4_1), ("bf16", T.BF16), ("f16", T.F16)]:
    q = quantize(x.reshape(-1, 256), ty)
    q.tofile(os.path.join(d, name + ".q"))
    dequantize(q, ty).astype(np.float32).tofile(os.path.join(d, name + ".deq"))
# k-quants: random block bytes with finite, moderate f16 scales.
for name, ty, size, doff in [("q4_k", T.Q4_K, 144, [0, 2]), ("q6_k", T.Q6_K, 210, [208]), ("q5_k", T.Q5_K, 176, [0, 2]),
                             ("q2_k", T.Q2_K, 84, [80, 82]), ("q3_k", T.Q3_K, 110, [108]), ("q5_0", T.Q5_0, 22, [0]),
                             ("q5_1", T.Q5_1, 24, [0, 2])]:
    b = rng.integers(0, 256, (64, size), dtype=np.uint8)
    for o in doff:
        b[:, o:o+2] = rng.uniform(-2, 2, (64, 1)).astype(np.float16).view(np.uint8)
    b.tofile(os.path.join(d, name + ".q"))
    dequantize(b, ty).astype(np.float32).tofile(os.path.join(d, name + ".deq"))
nan = np.array([np.nan, -np.nan, np.inf, -np.inf, 1e38, 3.4028235e38], dtype=np.float32)
nan.tofile(os.path.join(d, "special.f32"))
quantize(nan, T.BF16).tofile(os.path.join(d, "special.bf16"))
`
	cmd := exec.Command(py, "-c", script, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("python: %v\n%s", err, out)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	floats := func(name string) []float32 {
		v, err := Float32s(read(name))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	x := floats("x.f32")
	for _, c := range []struct {
		name string
		dt   DType
	}{{"q8_0", Q8_0}, {"q4_0", Q4_0}, {"q4_1", Q4_1}, {"bf16", BF16}, {"f16", F16}} {
		want := read(c.name + ".q")
		n, _ := c.dt.BytesFor(len(x))
		got := make([]byte, n)
		if err := Quantize(c.dt, x, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			bs := c.dt.BlockBytes()
			for i := range got {
				if got[i] != want[i] {
					blk := i / bs
					t.Errorf("%s: quantized bytes differ first in block %d (byte %d): got %x want %x", c.name, blk, i%bs, got[blk*bs:blk*bs+bs], want[blk*bs:blk*bs+bs])
					break
				}
			}
		}
		checkDequant(t, c.name, c.dt, want, floats(c.name+".deq"))
	}
	checkDequant(t, "q4_k", Q4_K, read("q4_k.q"), floats("q4_k.deq"))
	checkDequant(t, "q6_k", Q6_K, read("q6_k.q"), floats("q6_k.deq"))
	checkDequant(t, "q5_k", Q5_K, read("q5_k.q"), floats("q5_k.deq"))
	checkDequant(t, "q2_k", Q2_K, read("q2_k.q"), floats("q2_k.deq"))
	checkDequant(t, "q3_k", Q3_K, read("q3_k.q"), floats("q3_k.deq"))
	checkDequant(t, "q5_0", Q5_0, read("q5_0.q"), floats("q5_0.deq"))
	checkDequant(t, "q5_1", Q5_1, read("q5_1.q"), floats("q5_1.deq"))

	sp := floats("special.f32")
	wantBF := read("special.bf16")
	for i, v := range sp {
		if got := F32ToBF16(v); got != uint16(wantBF[2*i])|uint16(wantBF[2*i+1])<<8 {
			t.Errorf("F32ToBF16(%g) = %#04x, gguf-py %#02x%02x", v, got, wantBF[2*i+1], wantBF[2*i])
		}
	}
}

func checkDequant(t *testing.T, name string, dt DType, q []byte, want []float32) {
	t.Helper()
	got := make([]float32, len(want))
	if err := Dequantize(dt, q, got); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] == 0 && want[i] == 0) {
			t.Fatalf("%s: dequantized[%d] = %g, gguf-py %g", name, i, got[i], want[i])
		}
	}
}

// Every type we know has the block size and byte size llama.cpp's gguf-py lists, and every
// type gguf-py lists that can appear in a file is known here.
func TestRefGGMLSizes(t *testing.T) {
	py := refPython(t, "gguf")
	out, err := exec.Command(py, "-c", `
from gguf.constants import GGML_QUANT_SIZES
for ty, (blk, size) in GGML_QUANT_SIZES.items(): print(ty.value, ty.name, blk, size)
`).Output()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var id uint32
		var name string
		var blk, size int
		if _, err := fmt.Sscan(line, &id, &name, &blk, &size); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		d, err := FromGGML(id)
		if err != nil {
			if name != "Q8_1" && name != "Q8_K" { // compute-only types, never stored in files
				t.Errorf("gguf-py type %d %s unknown here", id, name)
			}
			continue
		}
		seen++
		if d.String() != name || d.BlockSize() != blk || d.BlockBytes() != size {
			t.Errorf("type %d: ours %s %d/%d, gguf-py %s %d/%d", id, d, d.BlockSize(), d.BlockBytes(), name, blk, size)
		}
	}
	if seen != len(dtypes) {
		t.Errorf("gguf-py confirmed %d of our %d types", seen, len(dtypes))
	}
}
