package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/engine/spec"
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

// TestProposersDomainIndex: --speculate domain reads the model folder's draft index; where
// there is none, serve (learn) starts an empty one and says so, generate fails naming the
// file, and an index named by --draft-index must exist either way.
func TestProposersDomainIndex(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, spec.DraftIndexFile)
	if _, _, err := proposers("prompt,domain", "", dir, false); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("generate without an index: %v", err)
	}
	c, note, err := proposers("prompt,domain", "", dir, true)
	// Three proposers: prompt lookup on 2-3 tokens, the index, prompt lookup on one.
	if err != nil || !strings.Contains(note, "starts empty") || len(c) != 3 {
		t.Fatalf("serve without an index: %v, %q, %d proposers", err, note, len(c))
	}
	var idx *spec.Index
	for _, p := range c {
		if x, ok := p.(*spec.Index); ok {
			idx = x
		}
	}
	if idx == nil || idx.Len() != 0 || idx.MaxEntries != draftIndexEntries {
		t.Fatalf("serve's empty index: %+v", idx)
	}
	idx.Add([]int{5, 6, 7, 8, 9})
	if idx.Len() == 0 {
		t.Error("the empty index does not learn")
	}
	if _, _, err := proposers("domain", filepath.Join(dir, "other.bin"), dir, true); err == nil {
		t.Error("a missing --draft-index was accepted")
	}
}
