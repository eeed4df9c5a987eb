package specialize

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNewTokenIDs(t *testing.T) {
	dir := t.TempDir()
	if ids, err := NewTokenIDs(dir); ids != nil || err != nil {
		t.Errorf("a folder without vocab_map.json: %v, %v", ids, err)
	}
	if ids, err := NewTokenIDs(filepath.Join(dir, "model.gguf")); ids != nil || err != nil {
		t.Errorf("not a folder: %v, %v", ids, err)
	}
	os.WriteFile(filepath.Join(dir, VocabMapFile), []byte(`{"old_vocab_size":10,"new_tokens":[{"id":7,"text":"ab"},{"id":9,"text":"cd"}]}`), 0o644)
	ids, err := NewTokenIDs(dir)
	if err != nil || len(ids) != 2 || ids[0] != 7 || ids[1] != 9 {
		t.Errorf("ids %v, %v; want [7 9]", ids, err)
	}
	os.WriteFile(filepath.Join(dir, VocabMapFile), []byte(`{"new_tokens":`), 0o644)
	if _, err := NewTokenIDs(dir); err == nil {
		t.Error("a broken vocab_map.json gave no error")
	}
	// The embedded demo's specialized model records its merged tokens.
	ids, err = NewTokenIDs(filepath.Join("..", "demo", "adapted"))
	if err != nil || len(ids) == 0 {
		t.Errorf("demo/adapted: %d new tokens, %v", len(ids), err)
	}
}
