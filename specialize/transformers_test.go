package specialize

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// transformersGGUF tokenizes texts with the tokenizer transformers builds from the GGUF at path
// (tests/specialize/hf_gguf_encode.py: AutoTokenizer's gguf_file path).
func transformersGGUF(t *testing.T, path string, texts []string) [][]int {
	t.Helper()
	py := os.Getenv("TOKENWISE_PYTHON")
	if py == "" {
		py = filepath.Join(filepath.Dir(testref.Dir()), "py", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		testref.Missing(t, "python venv with transformers at %s", py)
	}
	var in bytes.Buffer
	for _, s := range texts {
		b, _ := json.Marshal(s)
		in.Write(b)
		in.WriteByte('\n')
	}
	cmd := exec.Command(py, filepath.Join(testref.RepoRoot(), "tests", "specialize", "hf_gguf_encode.py"), path)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hf_gguf_encode.py: %v\n%s", err, stderr.String())
	}
	var ids [][]int
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var v []int
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("hf_gguf_encode.py: %v: %s", err, sc.Text())
		}
		ids = append(ids, v)
	}
	if len(ids) != len(texts) {
		t.Fatalf("hf_gguf_encode.py answered %d of %d texts\n%s", len(ids), len(texts), stderr.String())
	}
	return ids
}

// writeTokenizerGGUF writes a GGUF holding only a plan's tokenizer (no tensors): all that
// transformers' GGUF tokenizer converter reads.
func writeTokenizerGGUF(t *testing.T, p *Plan) string {
	t.Helper()
	meta, err := tokenizer.GGUFMetadata(p.JSON, nil, 0, tokenizer.GGUFSpecialIDs{BOS: -1, EOS: -1, PAD: -1})
	if err != nil {
		t.Fatal(err)
	}
	meta = append([]gguf.KV{{Key: "general.architecture", Value: gguf.String("llama")}}, meta...)
	path := filepath.Join(t.TempDir(), "tok.gguf")
	if err := gguf.Write(path, meta, nil, 32); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTransformersGGUF: transformers' GGUF tokenizer (what vLLM and SGLang build from a bare
// GGUF) against tokenwise on SmolLM2's vocabulary specialized to the essay domain. With
// added tokens that hold spaces, the converter drops those tokens (reproduced: it tokenizes to
// more ids); with Options.Portable every added token survives and the ids are tokenwise's,
// text for text. Pruning alone matches too.
func TestTransformersGGUF(t *testing.T) {
	f, err := gguf.Open(testref.Path(t, "smollm2", "smollm2-135m-instruct-q4_1.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	tokJSON, _, _, _, err := tokenizer.GGUFToHF(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	train := domainDocs(1, 120)
	var texts []string
	for _, d := range domainDocs(2, 12) {
		texts = append(texts, d.Text)
	}
	texts = append(texts, "plain text: no domain token here.\n", `{"score": 3, "verdict": "pass"}`)
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"prune", Options{Prune: true}},
		{"portable", Options{Prune: true, Add: 96, Portable: true}},
		{"spaces", Options{Prune: true, Add: 96}},
	} {
		p, err := Build(tokJSON, train, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		spaced := 0
		for _, nt := range p.NewTokens {
			if nt.Added && !portable(nt.Text) {
				spaced++
			}
		}
		theirs := transformersGGUF(t, writeTokenizerGGUF(t, p), texts)
		ours, hf := 0, 0
		differ := 0
		for i, s := range texts {
			want := p.Tokenizer.Encode(s, false)
			ours += len(want)
			hf += len(theirs[i])
			if !slices.Equal(theirs[i], want) {
				differ++
				if tc.name != "spaces" {
					t.Fatalf("%s: text %d %q: transformers' GGUF tokenizer %v, tokenwise %v", tc.name, i, s[:min(60, len(s))], theirs[i], want)
				}
			}
		}
		t.Logf("%s: %d new tokens, %d added tokens with a character outside printable ASCII; %d texts: tokenwise %d ids, transformers from the GGUF %d, %d texts differ",
			tc.name, len(p.NewTokens), spaced, len(texts), ours, hf, differ)
		if tc.name == "spaces" {
			// The converter's loss, reproduced: with spaced tokens present it splits them into
			// their parts, so the GGUF tokenizes to more ids than the model was specialized for.
			if spaced == 0 || hf <= ours || differ == 0 {
				t.Fatalf("spaces: %d spaced added tokens, ids %d (tokenwise) vs %d (transformers): the converter's drop did not show", spaced, ours, hf)
			}
		}
		if tc.name == "portable" && spaced != 0 {
			t.Fatalf("portable: %d added tokens hold a character outside printable ASCII", spaced)
		}
	}
}
