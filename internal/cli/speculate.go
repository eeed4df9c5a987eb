package cli

import (
	"errors"
	"fmt"

	"github.com/tokenwise/tokenwise/cost"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tokenwise/tokenwise/engine/spec"
)

// addSpecFlags adds the speculative-decoding flags generate and serve share.
func addSpecFlags(fl *pflag.FlagSet, speculate *string, maxDraft *int, index *string, fixed *bool) {
	fl.StringVar(speculate, "speculate", "off", "draft tokens to verify in one pass, from: prompt (text seen earlier in the prompt or output), domain (the draft index of past answers), schema (the text a JSON schema or grammar forces, verified instead of jumped over); comma-separated, or off. Output is unchanged")
	fl.IntVar(maxDraft, "max-draft", 4, "most drafted tokens verified per step (with --speculate)")
	fl.BoolVar(fixed, "fixed-draft", false, "draft --max-draft tokens every step (as vLLM's num_speculative_tokens), instead of as many as the sequence's acceptance and the measured step costs pay for; for acceptance measurements")
	fl.StringVar(index, "draft-index", "", "draft index for --speculate domain (default: "+spec.DraftIndexFile+" in the model folder, as specialize writes it)")
}

// proposers builds the --speculate list. The domain index is --draft-index or the model
// folder's draft_index.bin. With learn (serve, which adds every finished answer to the
// index), a model without one starts from an empty index, bounded as specialize's, and
// note says so; an index named by --draft-index must exist.
func proposers(list, indexPath, model string, learn bool) (c spec.Chain, note string, err error) {
	var idx *spec.Index
	if strings.Contains(list, "domain") {
		named := indexPath != ""
		if !named {
			indexPath = filepath.Join(model, spec.DraftIndexFile)
			if st, err := os.Stat(model); err == nil && !st.IsDir() {
				indexPath = filepath.Join(filepath.Dir(model), spec.DraftIndexFile)
			}
		}
		idx, err = spec.ReadIndexFile(indexPath)
		switch {
		case err != nil && learn && !named && errors.Is(err, os.ErrNotExist):
			idx = newDraftIndex()
			note = fmt.Sprintf("no %s: the domain index starts empty and learns from the answers served (at most %d contexts)", indexPath, draftIndexEntries)
		case err != nil:
			return nil, "", fmt.Errorf("--speculate domain: %w", err)
		}
	}
	if c, err = spec.Proposers(list, idx); err != nil {
		return nil, "", fmt.Errorf("--speculate: %w", err)
	}
	return c, note, nil
}

// verifyBound is the most tokens a decode step (every sequence's last token and its drafts)
// may carry on this CPU while it stays bandwidth-bound: the cost model's decode ridge
// (cost.Shape.DecodeRidge) for the model's shape and weights on the shipped profile that
// matches this CPU, at a context of half maxLen. Below the ridge a step reads the weights
// once whatever it carries, so drafts cost little; past it each drafted token costs what
// decoding it would, and a rejected one is lost work. The engine's own rule (drafts only
// where measured step costs say they pay) works under this bound. Without a matching
// profile there is no bound but that rule. It returns the bound and a line saying why.
func verifyBound(modelPath, kvDType string, threads, maxLen int) (int, string) {
	name, why := cost.MatchProfile(cost.ThisCPU())
	return verifyBoundOn(name, why, modelPath, kvDType, threads, maxLen)
}

// verifyBoundOn is verifyBound on the named profile (none: why says why).
func verifyBoundOn(name, why, modelPath, kvDType string, threads, maxLen int) (int, string) {
	if name == "" || modelPath == "" {
		return 0, "drafts bounded by measured step costs only: " + why
	}
	s, hw, dt, kv, err := costInputs("serve", modelPath, name, "", kvDType) // serve's --kv-cache-dtype: f32 or f16
	if err != nil {
		return 0, "drafts bounded by measured step costs only: " + err.Error()
	}
	if maxLen <= 0 {
		maxLen = 1024 // the context a narrow job's prompt and answer take, when the model's is not cut
	}
	ctx := maxLen / 2
	ridge, err := s.DecodeRidge(hw, ctx, dt, kv, threads)
	if err != nil || ridge == 0 {
		return 0, fmt.Sprintf("no decode ridge on %s at context %d: drafts bounded by measured step costs only", name, ctx)
	}
	return ridge, fmt.Sprintf("at most %d tokens a decode step with drafts (the cost model's decode ridge on %s, %s weights, context %d)", ridge, name, dt.Name, ctx)
}
