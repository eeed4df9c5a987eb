package testref

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tokenwise/tokenwise/kernels"
)

// LlamaCpp runs llama.cpp (node-llama-cpp, tests/llamacpp/run.mjs) on one request and decodes
// its JSON answer into out. The request format is run.mjs's.
//
// A request that runs prompts compares arithmetic, so it names the ggml CPU build llama.cpp
// runs: the one the kernels reproduce now (kernels.CurrentGGMLBuild), unless the request sets
// "cpuLibrary" itself. run.mjs loads exactly that library and reports the one it mapped; the
// test fails if they differ, and its log names the library, so a parity result never depends
// on which CPU the test landed on (on its own, ggml would load the best library for the CPU:
// on an Intel CPU with AMX that is sapphirerapids, whose AMX quantized products tokenwise
// reproduces under kernels.GGMLAMX, that CPU's default build; F16 products keep the AVX-512
// arithmetic there).
func LlamaCpp(t testing.TB, req map[string]any, out any) {
	t.Helper()
	Path(t, "node_modules", "node-llama-cpp", "dist", "index.js")
	want, _ := req["cpuLibrary"].(string)
	if _, runs := req["prompts"]; runs && want == "" {
		b := kernels.CurrentGGMLBuild()
		if !kernels.CPUHasGGMLBuild(b) {
			t.Fatalf("llama.cpp: this CPU cannot load libggml-cpu-%s.so (ggml's %s build), which the kernels reproduce now", b.Library(), b)
		}
		want = b.Library()
		req["cpuLibrary"] = want
	}
	if want != "" {
		Path(t, "ggml", want, "node_modules", "node-llama-cpp", "dist", "index.js")
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(RepoRoot(), "tests", "llamacpp", "run.mjs")
	cmd := exec.Command("node", script)
	cmd.Env = append(os.Environ(), "TOKENWISE_REFS="+Dir())
	cmd.Stdin = bytes.NewReader(body)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("llama.cpp (node %s) on %v: %v\n%s", script, req["model"], err, stderr.String())
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("llama.cpp output: %v: %.300s", err, stdout)
	}
	if want != "" {
		var got struct {
			CPULibrary string `json:"cpuLibrary"`
		}
		if err := json.Unmarshal(stdout, &got); err != nil || got.CPULibrary != want {
			t.Fatalf("llama.cpp loaded libggml-cpu-%s.so, asked for libggml-cpu-%s.so", got.CPULibrary, want)
		}
		model, _ := req["model"].(string)
		t.Logf("llama.cpp reference: libggml-cpu-%s.so on %s", want, filepath.Base(model))
	}
}
