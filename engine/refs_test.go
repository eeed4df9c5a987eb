package engine

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// needRefs skips (or fails under TOKENWISE_REQUIRE_REFS=1) with why when a
// reference is missing.
func needRefs(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
		t.Fatalf("reference missing (TOKENWISE_REQUIRE_REFS=1): %s; run scripts/setup-refs.sh", why)
	}
	t.Skipf("reference missing: %s; run scripts/setup-refs.sh", why)
}

// refsDir is TOKENWISE_REFS, or <repo>/.cache/refs.
func refsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TOKENWISE_REFS")
	if dir == "" {
		dir = filepath.Join(repoRoot(), ".cache", "refs")
	}
	if _, err := os.Stat(dir); err != nil {
		needRefs(t, dir)
	}
	return dir
}

// refPython is the Python of the reference venv (transformers + jinja2):
// TOKENWISE_PYTHON, or <refs>/../py/bin/python.
func refPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("TOKENWISE_PYTHON")
	if py == "" {
		py = filepath.Join(filepath.Dir(refsDir(t)), "py", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		needRefs(t, "python venv with transformers at "+py)
	}
	return py
}
