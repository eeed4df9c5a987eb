package tensor

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// kquantInput is a tensor that reaches the quantizers' corners: normal values over many
// magnitudes, an all-zero block, constant and sign-mixed sub-blocks, tiny values under
// GROUP_MAX_EPS, all-positive and all-negative blocks, and near-ties.
func kquantInput(rows, cols int) []float32 {
	rng := rand.New(rand.NewPCG(41, 42))
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(6)-3)))
	}
	if len(x) >= 8*256 {
		clear(x[:256])
		for i := range 256 {
			x[256+i] = 3                                            // constant
			x[512+i] = float32(i%32) - 15.5                         // near-ties
			x[768+i] = float32(1e-17 * float64(i+1))                // under GROUP_MAX_EPS
			x[1024+i] = float32(math.Abs(float64(x[1024+i]))) + 0.5 // all positive
			x[1280+i] = -float32(math.Abs(float64(x[1280+i])))      // all negative
			x[1536+i] = float32(rng.NormFloat64())
		}
		clear(x[1536 : 1536+32]) // one zero sub-block
		x[1792+5] = 1e4          // one outlier
	}
	return x
}

// ggmlQuantizer builds a harness around ggml's ggml_quantize_chunk (the call llama-quantize
// makes for each tensor without an importance matrix) from a llama.cpp build: the static
// libggml-base.a under $TOKENWISE_LLAMA_DIR/build (default .cache/llama.cpp, as
// scripts/bench-llamacpp.sh builds it). Skips when there is none.
func ggmlQuantizer(t *testing.T) string {
	t.Helper()
	// ggml's quantizer: libggml-base from a llama.cpp build (TOKENWISE_LLAMA_DIR) or, by
	// default, the shared library node-llama-cpp ships prebuilt among the references.
	var link []string
	if dir := os.Getenv("TOKENWISE_LLAMA_DIR"); dir != "" {
		link = []string{filepath.Join(dir, "build", "ggml", "src", "libggml-base.a"), "-lm", "-lpthread", "-fopenmp", "-lstdc++"}
	} else {
		refs := os.Getenv("TOKENWISE_REFS")
		if refs == "" {
			refs = filepath.Join("..", ".cache", "refs")
		}
		bins, err := filepath.Abs(filepath.Join(refs, "node_modules", "@node-llama-cpp", runtime.GOOS+"-x64", "bins", runtime.GOOS+"-x64"))
		if err != nil {
			t.Fatal(err)
		}
		link = []string{filepath.Join(bins, "libggml-base.so"), "-Wl,-rpath," + bins}
	}
	if _, err := os.Stat(link[0]); err != nil || runtime.GOARCH != "amd64" {
		msg := "no ggml library at " + link[0] + " (run scripts/setup-refs.sh, or set TOKENWISE_LLAMA_DIR to a llama.cpp build)"
		if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" && runtime.GOARCH == "amd64" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// ggml.h's two declarations the harness needs (the prebuilt library comes without its
	// headers); enum ggml_type is an int.
	src := filepath.Join(t.TempDir(), "q.c")
	if err := os.WriteFile(src, []byte(`#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
size_t ggml_row_size(int type, int64_t ne);
size_t ggml_quantize_chunk(int type, const float *src, void *dst, int64_t start, int64_t nrows, int64_t n_per_row, const float *imatrix);
int main(int argc, char **argv) {
	int type = atoi(argv[1]); long npr = atol(argv[2]);
	FILE *f = fopen(argv[3], "rb"); fseek(f, 0, SEEK_END); long n = ftell(f) / 4; fseek(f, 0, SEEK_SET);
	float *x = malloc(n * 4); if (fread(x, 4, n, f) != (size_t)n) return 1; fclose(f);
	long rows = n / npr; void *out = malloc(ggml_row_size(type, npr) * rows);
	size_t w = ggml_quantize_chunk(type, x, out, 0, rows, npr, NULL);
	FILE *o = fopen(argv[4], "wb"); fwrite(out, 1, w, o); fclose(o);
	return 0;
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Fatalf("no C compiler (cc) to build the ggml quantizer harness: install gcc")
	}
	bin := filepath.Join(t.TempDir(), "q")
	cmd := exec.Command("cc", append([]string{"-O2", src}, append(link, "-o", bin)...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the ggml quantizer harness: %v\n%s", err, out)
	}
	return bin
}

// TestQuantizeKMatchesGGML: Q4_K, Q5_K and Q6_K blocks are byte for byte ggml's
// (quantize_row_q4_K_ref / _q5_K_ref / _q6_K_ref through ggml_quantize_chunk).
func TestQuantizeKMatchesGGML(t *testing.T) {
	bin := ggmlQuantizer(t)
	dir := t.TempDir()
	const rows, cols = 40, 1536 // 240 blocks
	x := kquantInput(rows, cols)
	in := filepath.Join(dir, "x.f32")
	if err := os.WriteFile(in, Bytes(x), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dt := range []DType{Q4_K, Q5_K, Q6_K} {
		out := filepath.Join(dir, dt.String())
		if b, err := exec.Command(bin, fmt.Sprint(int(dt)), fmt.Sprint(cols), in, out).CombinedOutput(); err != nil {
			t.Fatalf("%v: ggml: %v\n%s", dt, err, b)
		}
		want, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := dt.BytesFor(len(x))
		got := make([]byte, n)
		if err := Quantize(dt, x, got); err != nil {
			t.Fatal(err)
		}
		if len(want) != len(got) {
			t.Fatalf("%v: ggml wrote %d bytes, want %d", dt, len(want), len(got))
		}
		bb := dt.BlockBytes()
		bad := 0
		for b := 0; b < len(got); b += bb {
			if !bytes.Equal(got[b:b+bb], want[b:b+bb]) {
				if bad < 3 {
					t.Errorf("%v block %d differs:\n got %x\nggml %x", dt, b/bb, got[b:b+bb], want[b:b+bb])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%v: %d of %d blocks differ", dt, bad, len(got)/bb)
		}
	}
}
