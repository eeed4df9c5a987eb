package specialize

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// VocabMapFile is what a specialized model folder records of its vocabulary: old and new
// sizes, new_to_old ids and the new tokens (written by the surgery).
const VocabMapFile = "vocab_map.json"

// NewTokenIDs reads the ids of the tokens a specialized vocabulary added (its merged domain
// tokens) from dir's vocab_map.json; nil, without an error, when dir has no such file (a
// model that was not specialized, or a .gguf file).
func NewTokenIDs(dir string) ([]int, error) {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, nil // not a folder: the caller reports a missing model itself
	}
	path := filepath.Join(dir, VocabMapFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var vm struct {
		NewTokens []NewToken `json:"new_tokens"`
	}
	if err := json.Unmarshal(b, &vm); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	ids := make([]int, len(vm.NewTokens))
	for i, t := range vm.NewTokens {
		ids[i] = t.ID
	}
	return ids, nil
}
