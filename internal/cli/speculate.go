package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tokenwise/tokenwise/engine/spec"
)

// addSpecFlags adds the speculative-decoding flags generate and serve share.
func addSpecFlags(fl *pflag.FlagSet, speculate *string, maxDraft *int, index *string) {
	fl.StringVar(speculate, "speculate", "off", "draft tokens to verify in one pass, from: prompt (text seen earlier in the prompt or output), domain (the draft index of past answers), schema (the text a JSON schema or grammar forces, verified instead of jumped over); comma-separated, or off. Output is unchanged")
	fl.IntVar(maxDraft, "max-draft", 4, "most drafted tokens verified per step (with --speculate)")
	fl.StringVar(index, "draft-index", "", "draft index for --speculate domain (default: "+spec.DraftIndexFile+" in the model folder, as specialize writes it)")
}

// proposers builds the --speculate list. The domain index is --draft-index or the model
// folder's draft_index.bin.
func proposers(list, indexPath, model string) (spec.Chain, error) {
	var idx *spec.Index
	if strings.Contains(list, "domain") {
		if indexPath == "" {
			indexPath = filepath.Join(model, spec.DraftIndexFile)
			if st, err := os.Stat(model); err == nil && !st.IsDir() {
				indexPath = filepath.Join(filepath.Dir(model), spec.DraftIndexFile)
			}
		}
		var err error
		if idx, err = spec.ReadIndexFile(indexPath); err != nil {
			return nil, fmt.Errorf("--speculate domain: %w", err)
		}
	}
	c, err := spec.Proposers(list, idx)
	if err != nil {
		return nil, fmt.Errorf("--speculate: %w", err)
	}
	return c, nil
}
