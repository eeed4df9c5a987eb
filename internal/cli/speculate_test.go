package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerifyBound: serve bounds a step's tokens with drafts by the cost model's decode ridge
// on the CPU's profile, and says so; without a profile there is no bound and the line says
// why.
func TestVerifyBound(t *testing.T) {
	gg := filepath.Join(genRefsDir(t), "smollm2", "smollm2-135m-instruct-q4_1.gguf")
	if _, err := os.Stat(gg); err != nil {
		t.Fatalf("reference missing: %s; run scripts/setup-refs.sh", gg)
	}
	n, why := verifyBoundOn("epyc-zen3-2core", "", gg, "f32", 2, 0)
	if n <= 1 || !strings.Contains(why, "decode ridge on epyc-zen3-2core") || !strings.Contains(why, "context 512") {
		t.Errorf("bound %d: %s", n, why)
	}
	n0, why0 := verifyBoundOn("", "no shipped CPU profile matches", gg, "f32", 2, 0)
	if n0 != 0 || !strings.Contains(why0, "no shipped CPU profile matches") {
		t.Errorf("no profile: bound %d: %s", n0, why0)
	}
	t.Logf("%s", why)
}
