package parity

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// HF is what Hugging Face tokenizers produced for one text (see hf_encode.js).
type HF struct {
	IDs     []int  `json:"ids"`      // encode(text, add_special_tokens=false)
	IDsSp   []int  `json:"ids_sp"`   // encode(text, add_special_tokens=true)
	Dec     string `json:"dec"`      // decode(IDs, skip_special_tokens=false)
	DecSp   string `json:"dec_sp"`   // decode(IDsSp, skip_special_tokens=false)
	DecSkip string `json:"dec_skip"` // decode(IDsSp, skip_special_tokens=true)
	// Offsets of IDs as [start, end) in Unicode code points of the text (HF's unit), when
	// asked for.
	Offsets [][2]int `json:"-"`
}

// scriptDir is the folder of hf_encode.js: this source file's folder.
func scriptDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// HFEncode runs hf_encode.js (HF tokenizers from npm, under refs) on every text with the
// tokenizer.json at tokPath; withOffsets adds the token offsets. Results are cached as gzip JSONL under cacheDir, keyed by the
// hash of the tokenizer file, the texts, the script and the installed tokenizers version, so
// a second run reads the cache instead of running node.
func HFEncode(refs, tokPath string, texts []string, cacheDir string, withOffsets bool) ([]HF, error) {
	tokBytes, err := os.ReadFile(tokPath)
	if err != nil {
		return nil, err
	}
	script := filepath.Join(scriptDir(), "hf_encode.js")
	scriptBytes, err := os.ReadFile(script)
	if err != nil {
		return nil, err
	}
	pkg, err := os.ReadFile(filepath.Join(refs, "node_modules", "tokenizers", "package.json"))
	if err != nil {
		return nil, fmt.Errorf("npm tokenizers not installed under %s (run scripts/setup-refs.sh): %w", refs, err)
	}
	var input bytes.Buffer
	enc := json.NewEncoder(&input)
	enc.SetEscapeHTML(false)
	for _, t := range texts {
		if err := enc.Encode(t); err != nil {
			return nil, err
		}
	}
	h := sha256.New()
	for _, part := range [][]byte{tokBytes, input.Bytes(), scriptBytes, pkg, []byte(fmt.Sprint(withOffsets))} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	key := hex.EncodeToString(h.Sum(nil))[:24]
	cached := filepath.Join(cacheDir, "hf-"+key+".jsonl.gz")
	if out, err := readHF(cached, texts); err == nil {
		now := time.Now()
		_ = os.Chtimes(cached, now, now) // in use: keep it from pruneCache
		return out, nil
	}
	pruneCache(cacheDir, 14*24*time.Hour)

	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	args := []string{script, tokPath, "-", "-"}
	if withOffsets {
		args = []string{script, "--offsets", tokPath, "-", "-"}
	}
	cmd := exec.Command("node", args...)
	cmd.Env = append(os.Environ(), "TOKENWISE_REFS="+refs)
	cmd.Stdin = &input
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("node %s %s: %v: %s", script, tokPath, err, strings.TrimSpace(stderr.String()))
	}
	tmp := cached + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	zw := gzip.NewWriter(f)
	_, werr := zw.Write(stdout.Bytes())
	if cerr := zw.Close(); werr == nil {
		werr = cerr
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, werr
	}
	if err := os.Rename(tmp, cached); err != nil {
		return nil, err
	}
	return readHF(cached, texts)
}

// pruneCache removes reference outputs unused for longer than age: each change to the corpus,
// a tokenizer or the script leaves one behind.
func pruneCache(dir string, age time.Duration) {
	old, _ := filepath.Glob(filepath.Join(dir, "hf-*.jsonl.gz"))
	for _, p := range old {
		if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) > age {
			_ = os.Remove(p)
		}
	}
}

func readHF(path string, texts []string) ([]HF, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 256<<20)
	out := make([]HF, 0, len(texts))
	for sc.Scan() {
		// hf_encode.js leaves out fields equal to their defaults.
		var r struct {
			IDs     []int   `json:"ids"`
			IDsSp   []int   `json:"ids_sp"`
			Dec     *string `json:"dec"`
			DecSp   *string `json:"dec_sp"`
			DecSkip *string `json:"dec_skip"`
			Offs    []int   `json:"offs"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, len(out)+1, err)
		}
		if len(out) >= len(texts) {
			return nil, fmt.Errorf("%s: more results than the %d texts", path, len(texts))
		}
		hf := HF{IDs: r.IDs, IDsSp: r.IDsSp, Dec: texts[len(out)]}
		if hf.IDs == nil {
			hf.IDs = []int{}
		}
		if r.IDsSp == nil {
			hf.IDsSp = hf.IDs
		}
		if r.Dec != nil {
			hf.Dec = *r.Dec
		}
		hf.DecSp, hf.DecSkip = hf.Dec, hf.Dec
		if r.DecSp != nil {
			hf.DecSp = *r.DecSp
		}
		if r.DecSkip != nil {
			hf.DecSkip = *r.DecSkip
		}
		if len(r.Offs)%2 != 0 {
			return nil, fmt.Errorf("%s:%d: odd number of offsets", path, len(out)+1)
		}
		for j := 0; j+1 < len(r.Offs); j += 2 {
			hf.Offsets = append(hf.Offsets, [2]int{r.Offs[j], r.Offs[j+1]})
		}
		out = append(out, hf)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) != len(texts) {
		return nil, fmt.Errorf("%s: %d results for %d texts", path, len(out), len(texts))
	}
	return out, nil
}

// VocabCase is one of llama.cpp's tokenizer test vectors.
type VocabCase struct {
	Text string
	IDs  []int
}

// LlamaVocab reads llama.cpp's models/ggml-vocab-NAME.gguf.inp and .out from dir (setup-refs.sh
// puts them in <refs>/llama-vocab). The .inp holds the cases, each followed by
// "\n__ggml_vocab_test__\n"; the .out one line of space-separated ids per case, made with HF
// AutoTokenizer.encode(text, add_special_tokens=False).
func LlamaVocab(dir, name string) ([]VocabCase, error) {
	base := filepath.Join(dir, "ggml-vocab-"+name+".gguf")
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		return nil, err
	}
	outp, err := os.ReadFile(base + ".out")
	if err != nil {
		return nil, err
	}
	const sep = "\n__ggml_vocab_test__\n"
	texts := strings.Split(string(inp), sep)
	if texts[len(texts)-1] != "" {
		return nil, fmt.Errorf("%s.inp: does not end with the case separator", base)
	}
	texts = texts[:len(texts)-1]
	lines := strings.Split(strings.TrimSuffix(string(outp), "\n"), "\n")
	if len(lines) != len(texts) {
		return nil, fmt.Errorf("%s: %d cases in .inp but %d lines in .out", base, len(texts), len(lines))
	}
	cases := make([]VocabCase, len(texts))
	for i, t := range texts {
		cases[i].Text = t
		for _, f := range strings.Fields(lines[i]) {
			id, err := strconv.Atoi(f)
			if err != nil {
				return nil, fmt.Errorf("%s.out:%d: %w", base, i+1, err)
			}
			cases[i].IDs = append(cases[i].IDs, id)
		}
	}
	return cases, nil
}
