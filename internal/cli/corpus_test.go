package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/specialize"
)

// corpus writes the seeded domain splits; analyze and specialize read them.
func TestCorpusCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "essays")
	out, stderr, err := runCLI(t, "corpus", "--out", dir, "--train", "30", "--held-out", "5", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got corpusJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	train, held := filepath.Join(dir, "train.jsonl"), filepath.Join(dir, "held-out.jsonl")
	want := []domain.File{{Split: domain.Split{Name: "train", Seed: 1, N: 30}, Path: train}, {Split: domain.Split{Name: "held-out", Seed: 2, N: 5}, Path: held}}
	for i := range got.Files {
		if st, err := os.Stat(got.Files[i].Path); err != nil || st.Size() != got.Files[i].Bytes || st.Size() == 0 {
			t.Errorf("%s: %v, %d bytes reported", got.Files[i].Path, err, got.Files[i].Bytes)
		}
		if i < len(want) {
			want[i].Bytes = got.Files[i].Bytes
		}
	}
	if !reflect.DeepEqual(got.Files, want) {
		t.Fatalf("--json files %+v, want %+v", got.Files, want)
	}
	// The files hold exactly domain.Generate's examples, prompts as input and completions
	// as output, as specialize.ReadCorpus reads them.
	for _, f := range got.Files {
		docs, err := specialize.ReadCorpus(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		exs := domain.Generate(f.Seed, f.N)
		if len(docs) != 2*len(exs) {
			t.Fatalf("%s: %d texts, want %d", f.Path, len(docs), 2*len(exs))
		}
		for i, ex := range exs {
			g := i + 1 // one record per line
			if docs[2*i] != (specialize.Doc{Text: ex.Prompt, Side: specialize.Input, Group: g}) || docs[2*i+1] != (specialize.Doc{Text: ex.Completion, Side: specialize.Output, Group: g}) {
				t.Fatalf("%s: example %d differs from domain.Generate(%d)", f.Path, i, f.Seed)
			}
		}
	}

	out, _, err = runCLI(t, "analyze", "--tokenizer", repoPath("demo", "model"), "--corpus", train, "--add", "16")
	if flat := strings.Join(strings.Fields(out), " "); err != nil || !strings.Contains(flat, "input 30 texts") || !strings.Contains(flat, "output 30 texts") {
		t.Fatalf("analyze the corpus: %v\n%s", err, out)
	}
	spec := filepath.Join(t.TempDir(), "spec")
	if _, stderr, err := runCLI(t, "specialize", "--model", repoPath("demo", "model"), "--corpus", train, "--held-out", held, "--prune", "--add", "16", "--out", spec); err != nil {
		t.Fatalf("specialize on the corpus: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(spec, "model.safetensors")); err != nil {
		t.Fatal(err)
	}

	// Without --json: nothing on stdout, one line per file on stderr; and the same files.
	again := filepath.Join(t.TempDir(), "again")
	out, stderr, err = runCLI(t, "corpus", "--out", again, "--train", "30", "--held-out", "0")
	if err != nil || out != "" || !strings.Contains(stderr, "train.jsonl: 30 train examples (seed 1)") || strings.Contains(stderr, "held-out") {
		t.Fatalf("corpus without --json: %v, stdout %q, stderr %q", err, out, stderr)
	}
	a, _ := os.ReadFile(train)
	b, _ := os.ReadFile(filepath.Join(again, "train.jsonl"))
	if string(a) != string(b) {
		t.Error("the same counts gave different train.jsonl files")
	}
	if _, err := os.Stat(filepath.Join(again, "held-out.jsonl")); err == nil {
		t.Error("--held-out 0 wrote held-out.jsonl")
	}

	for _, args := range [][]string{
		{"corpus"},
		{"corpus", "--out", again, "--train", "-1"},
		{"corpus", "--out", again, "--train", "0", "--held-out", "0"},
		{"corpus", "--out", filepath.Join(train, "sub")}, // a file where the folder should be
	} {
		if _, _, err := runCLI(t, args...); err == nil || !strings.HasPrefix(err.Error(), "corpus: ") {
			t.Errorf("%q: error %v, want one starting \"corpus: \"", args, err)
		}
	}
}

// corpus --example prints one example's text exactly; generate --prompt-file reads a prompt
// byte for byte, so the two chain into the README's first command on the demo model.
func TestCorpusExampleAndPromptFile(t *testing.T) {
	ex := domain.Generate(domain.HeldOutSeed, 2)[1]
	out, stderr, err := runCLI(t, "corpus", "--example", "held-out:2")
	if err != nil || out != ex.Prompt {
		t.Fatalf("--example held-out:2: %v %s\ngot  %q\nwant %q", err, stderr, out, ex.Prompt)
	}
	if out, _, err := runCLI(t, "corpus", "--example", "held-out:2", "--field", "completion"); err != nil || out != ex.Completion {
		t.Fatalf("--field completion: %v, got %q want %q", err, out, ex.Completion)
	}
	for _, bad := range [][]string{{"--example", "held-out"}, {"--example", "held-out:0"}, {"--example", "test:1"}, {"--example", "train:1", "--field", "x"}} {
		if _, _, err := runCLI(t, append([]string{"corpus"}, bad...)...); err == nil || !strings.Contains(err.Error(), bad[len(bad)-1]) {
			t.Errorf("corpus %v: error %v should name %q", bad, err, bad[len(bad)-1])
		}
	}
	file := filepath.Join(t.TempDir(), "essay.txt")
	if err := os.WriteFile(file, []byte(ex.Prompt), 0o644); err != nil {
		t.Fatal(err)
	}
	viaFile, _, err := runCLI(t, "generate", "--model", repoPath("demo", "model"), "--chat", "--max-tokens", "8", "--json", "--prompt-file", file)
	if err != nil {
		t.Fatal(err)
	}
	viaFlag, _, err := runCLI(t, "generate", "--model", repoPath("demo", "model"), "--chat", "--max-tokens", "8", "--json", "--prompt", ex.Prompt)
	if err != nil {
		t.Fatal(err)
	}
	var a, b struct {
		PromptIDs []int `json:"prompt_ids"`
		IDs       []int `json:"ids"`
	}
	if json.Unmarshal([]byte(viaFile), &a) != nil || json.Unmarshal([]byte(viaFlag), &b) != nil || !reflect.DeepEqual(a, b) || len(a.PromptIDs) == 0 {
		t.Errorf("--prompt-file gave %+v, --prompt %+v", a, b)
	}
	if _, _, err := runCLI(t, "generate", "--model", repoPath("demo", "model"), "--prompt", "x", "--prompt-file", file); err == nil || !strings.Contains(err.Error(), "--prompt-file") {
		t.Errorf("both --prompt and --prompt-file: %v", err)
	}
	if _, _, err := runCLI(t, "generate", "--model", repoPath("demo", "model"), "--prompt-file", file+".missing"); err == nil || !strings.Contains(err.Error(), "--prompt-file") {
		t.Errorf("missing --prompt-file: %v", err)
	}
}

// corpus --task debian writes the package-record task's three splits from this machine's
// status file, capped by --train and --held-out, as specialize reads them.
func TestCorpusDebian(t *testing.T) {
	if _, err := os.Stat("/var/lib/dpkg/status"); err != nil {
		t.Skipf("not a Debian system: %v", err)
	}
	dir := t.TempDir()
	out, stderr, err := runCLI(t, "corpus", "--task", "debian", "--out", dir, "--train", "200", "--held-out", "20", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got corpusJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got.Files) != 3 {
		t.Fatalf("%d files, want train, validation and held-out: %+v", len(got.Files), got.Files)
	}
	seen := map[string]string{}
	for _, fi := range got.Files {
		docs, err := specialize.ReadCorpus(fi.Path)
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) != 2*fi.N || fi.N == 0 || fi.N > 200 || (fi.Name != "train" && fi.N > 20) {
			t.Fatalf("%s: %d docs for %d examples", fi.Name, len(docs), fi.N)
		}
		for i := 0; i < len(docs); i += 2 {
			var a struct{ Name string }
			if err := json.Unmarshal([]byte(docs[i+1].Text), &a); err != nil || a.Name == "" {
				t.Fatalf("%s: completion %q: %v", fi.Name, docs[i+1].Text, err)
			}
			if s, dup := seen[a.Name]; dup {
				t.Fatalf("package %s is in %s and %s", a.Name, s, fi.Name)
			}
			seen[a.Name] = fi.Name
		}
	}
	if _, _, err := runCLI(t, "corpus", "--task", "nope", "--out", dir); err == nil || !strings.Contains(err.Error(), "essays or debian") {
		t.Fatalf("--task nope: %v", err)
	}
}
