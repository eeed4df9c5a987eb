package cli

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// TestAdaptRecipe runs the GPU adaptation recipe (recipes/adapt.py, PyTorch) on the CPU, on
// a tiny model specialized by tokenwise, and holds it to tokenwise adapt: the same flags
// read the same records into the same held-out loss before training (the same tokens,
// targets and loss), training lowers it, the checkpoint loads in tokenwise with the input's
// tensors and tokenizer files, a run cut by --stop-at and continued with --resume writes
// the weights of an unbroken run, and LoRA adapters (--lora-rank) are merged into the frozen
// blocks' matrices, leaving the rest as they were.
//
// TOKENWISE_TORCH_PYTHON names a Python with torch, transformers, peft and accelerate;
// scripts/check-adapt-recipe.sh installs one and runs this test. Without it the test skips:
// PyTorch is about 3 GB to install, too much for the test command.
func TestAdaptRecipe(t *testing.T) {
	py := os.Getenv("TOKENWISE_TORCH_PYTHON")
	if py == "" {
		t.Skip("TOKENWISE_TORCH_PYTHON is unset (scripts/check-adapt-recipe.sh installs PyTorch and runs this test)")
	}
	tmp := t.TempDir()
	synth := tinyDebianModel(t, tmp)
	trainFile, held := filepath.Join(tmp, "deb", "train.jsonl"), filepath.Join(tmp, "deb", "held-out.jsonl")
	spec := filepath.Join(tmp, "spec")
	mustRunErr(t, "specialize", "--model", synth, "--corpus", trainFile, "--validation", held, "--prune", "--add", "24", "--out", spec)

	recipe := func(out string, more ...string) string {
		t.Helper()
		args := append([]string{repoPath("recipes", "adapt.py"), "--model", spec, "--corpus", trainFile, "--eval", held,
			"--seq-len", "1200", "--batch", "2", "--dtype", "f32", "--threads", "2", "--out", out}, more...)
		cmd := exec.Command(py, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		if err != nil {
			t.Fatalf("recipes/adapt.py %v: %v\n%s", more, err, stderr.String())
		}
		return string(stdout) + stderr.String()
	}
	lossRe := regexp.MustCompile(`held-out loss: ([0-9.]+) -> ([0-9.]+)`)
	losses := func(out string) (float64, float64) {
		t.Helper()
		m := lossRe.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no held-out loss in:\n%s", out)
		}
		a, _ := strconv.ParseFloat(m[1], 64)
		b, _ := strconv.ParseFloat(m[2], 64)
		return a, b
	}

	// The same loss before training as tokenwise adapt's, and a lower one after.
	r1 := filepath.Join(tmp, "r1")
	before, after := losses(recipe(r1, "--steps", "8", "--lr", "3e-3", "--trainable", "all"))
	twOut, twErr := mustRunErr(t, "adapt", "--model", spec, "--corpus", trainFile, "--eval", held, "--seq-len", "1200", "--batch", "2",
		"--dtype", "f32", "--threads", "2", "--steps", "1", "--out", filepath.Join(tmp, "t1"))
	twBefore, _ := losses(twOut + twErr)
	if math.Abs(before-twBefore) > 1e-4 {
		t.Errorf("held-out loss before training: recipe %.4f, tokenwise adapt %.4f", before, twBefore)
	}
	if !(after < before) {
		t.Errorf("8 steps did not lower the held-out loss: %.4f -> %.4f", before, after)
	}
	in, got := tensors(t, filepath.Join(spec, "model.safetensors")), tensors(t, filepath.Join(r1, "model.safetensors"))
	if !slices.Equal(sortedKeys(in), sortedKeys(got)) {
		t.Errorf("checkpoint tensors %v, the input's %v", sortedKeys(got), sortedKeys(in))
	}
	for _, name := range []string{"tokenizer.json", "vocab_map.json", "config.json"} {
		a, errA := os.ReadFile(filepath.Join(spec, name))
		b, errB := os.ReadFile(filepath.Join(r1, name))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s not carried over (%v, %v)", name, errA, errB)
		}
	}
	gen := mustRun(t, "", "generate", "--model", r1, "--prompt", "Package: trang", "--max-tokens", "4", "--threads", "2", "--json")
	var res struct {
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(gen), &res); err != nil || res.Usage.CompletionTokens == 0 {
		t.Errorf("tokenwise generate on the recipe's checkpoint: %v\n%s", err, gen)
	}

	// Cut after two of four steps and resumed: the unbroken run's weights.
	whole, cut := filepath.Join(tmp, "whole"), filepath.Join(tmp, "cut")
	recipe(whole, "--steps", "4", "--lr", "3e-3")
	recipe(cut, "--steps", "4", "--lr", "3e-3", "--stop-at", "2", "--checkpoint-every", "1")
	if _, err := os.Stat(filepath.Join(cut, trainerStateFile)); err != nil {
		t.Fatalf("the cut run left no trainer state: %v", err)
	}
	recipe(cut, "--steps", "4", "--lr", "3e-3", "--resume")
	a, b := tensors(t, filepath.Join(whole, "model.safetensors")), tensors(t, filepath.Join(cut, "model.safetensors"))
	for name, w := range a {
		if !bytes.Equal(w, b[name]) {
			t.Errorf("resumed run's %s differs from the unbroken run's", name)
		}
	}

	// LoRA on the frozen blocks, merged: their matrices move, norms and the rest stay.
	lora := filepath.Join(tmp, "lora")
	recipe(lora, "--steps", "3", "--lr", "3e-3", "--trainable", "embed,head", "--lora-rank", "4")
	got = tensors(t, filepath.Join(lora, "model.safetensors"))
	for name, w := range in {
		moved := !bytes.Equal(w, got[name])
		matrix := regexp.MustCompile(`layers\.\d+\.(self_attn|mlp)\.\w+_proj\.weight$`).MatchString(name)
		if want := matrix || name == "model.embed_tokens.weight"; moved != want {
			t.Errorf("LoRA run: %s moved %v, want %v", name, moved, want)
		}
	}
}

// tensors reads a safetensors file's tensors as their raw bytes, by name.
func tensors(t *testing.T, path string) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(data)
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(data[8:8+n], &hdr); err != nil {
		t.Fatal(err)
	}
	body := data[8+n:]
	out := map[string][]byte{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var info struct {
			Offsets [2]int `json:"data_offsets"`
		}
		if err := json.Unmarshal(raw, &info); err != nil {
			t.Fatal(err)
		}
		out[name] = body[info.Offsets[0]:info.Offsets[1]]
	}
	return out
}

func sortedKeys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
