package specialize

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tokenwise/tokenwise/convert"
)

// RunOptions control a whole specialization run.
type RunOptions struct {
	Options
	Init    string // mean, exp or fvt
	PadTo   int    // vocab_size multiple (default 64)
	GGUF    bool   // also write model.gguf
	HeldOut []Doc  // texts to report the reduction on (not used to choose tokens)
}

// LMHead is the cost of the LM head in one decode step: a [rows, hidden] matrix-vector product.
type LMHead struct {
	FLOPsBefore int64   `json:"flops_before"`
	FLOPsAfter  int64   `json:"flops_after"`
	BytesBefore int64   `json:"bytes_before"`
	BytesAfter  int64   `json:"bytes_after"`
	ShareBefore float64 `json:"share_of_decode_bytes_before"` // of the weight bytes a decode step reads
	ShareAfter  float64 `json:"share_of_decode_bytes_after"`
}

// Report is what a specialization run did and what it saves.
type Report struct {
	VocabBefore int         `json:"vocab_before"`
	VocabAfter  int         `json:"vocab_after"`
	Kept        int         `json:"kept_tokens"`
	NewMerges   int         `json:"new_merge_tokens"`
	NewAdded    int         `json:"new_added_tokens"`
	Dropped     int         `json:"dropped_candidates"`
	Unsupported int         `json:"unsupported_candidates"` // passed over: too rare in --validation
	Init        string      `json:"init"`
	Corpus      Evaluation  `json:"corpus"`
	HeldOut     *Evaluation `json:"held_out,omitempty"`
	Model       *Surgery    `json:"model,omitempty"`
	LMHead      *LMHead     `json:"lm_head,omitempty"`
	ParamsSaved int64       `json:"params_saved"`
	BytesSaved  int64       `json:"bytes_saved"`
	GGUF        string      `json:"gguf,omitempty"`
	// GGUFUnportable counts the GGUF's added tokens that transformers' GGUF tokenizer converter
	// drops (a space or a byte outside printable ASCII; see Options.Portable).
	GGUFUnportable int `json:"gguf_unportable_tokens,omitempty"`
}

// Run specializes the model at modelPath (an HF folder, or a .gguf converted to one first) to
// docs and writes the checkpoint, vocab_map.json, report.json and report.txt into outDir.
func Run(modelPath string, docs []Doc, outDir string, ro RunOptions) (*Report, error) {
	if ro.PadTo <= 0 {
		ro.PadTo = 64
	}
	src := modelPath
	if st, err := os.Stat(modelPath); err != nil {
		return nil, err
	} else if !st.IsDir() {
		tmp, err := os.MkdirTemp("", "tokenwise-specialize-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := convert.GGUFToHF(modelPath, tmp, convert.Options{}); err != nil {
			return nil, fmt.Errorf("%s: %w", modelPath, err)
		}
		src = tmp
	}
	tokJSON, err := os.ReadFile(filepath.Join(src, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	p, err := Build(tokJSON, docs, ro.Options)
	if err != nil {
		return nil, err
	}
	sg, err := WriteCheckpoint(src, p, outDir, ro.Init, ro.PadTo)
	if err != nil {
		return nil, err
	}
	r := NewReport(p, ro.HeldOut)
	r.Init = ro.Init
	r.SetModel(sg)
	if ro.GGUF {
		r.GGUF = filepath.Join(outDir, "model.gguf")
		if err := convert.HFToGGUF(outDir, r.GGUF, convert.Options{}); err != nil {
			return nil, fmt.Errorf("gguf: %w", err)
		}
		if r.GGUFUnportable, _, err = UnportableAdded(p.JSON); err != nil {
			return nil, err
		}
	}
	if err := writeJSON(filepath.Join(outDir, "report.json"), r); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(outDir, "report.txt"), []byte(r.Text()), 0o644); err != nil {
		return nil, err
	}
	return r, nil
}

// NewReport summarizes a plan (the tokenizer side); heldOut may be nil.
func NewReport(p *Plan, heldOut []Doc) *Report {
	r := &Report{VocabBefore: p.VocabBefore(), VocabAfter: p.VocabAfter(), Kept: p.Kept, Dropped: len(p.Dropped), Unsupported: p.Unsupported}
	for _, nt := range p.NewTokens {
		if nt.Added {
			r.NewAdded++
		} else {
			r.NewMerges++
		}
	}
	r.Corpus = Evaluation{Before: p.Before, After: p.After}
	if len(heldOut) > 0 {
		ev := p.Evaluate(heldOut)
		r.HeldOut = &ev
	}
	return r
}

// SetModel adds the checkpoint side: parameters, bytes and the LM head's decode cost.
func (r *Report) SetModel(sg *Surgery) {
	r.Model = sg
	r.ParamsSaved = sg.ParamsBefore - sg.ParamsAfter
	r.BytesSaved = sg.BytesBefore - sg.BytesAfter
	h := int64(sg.Hidden)
	l := &LMHead{
		FLOPsBefore: 2 * int64(sg.RowsBefore) * h, FLOPsAfter: 2 * int64(sg.RowsAfter) * h,
		BytesBefore: sg.HeadBefore, BytesAfter: sg.HeadAfter,
	}
	// A decode step reads every weight once, except the input embedding (one row); with tied
	// embeddings that matrix is read whole as the LM head.
	read := func(all, head int64) int64 {
		if sg.Tied {
			return all
		}
		return all - head // the untied embedding matrix is as large as the head
	}
	if b := read(sg.BytesBefore, sg.HeadBefore); b > 0 {
		l.ShareBefore = float64(sg.HeadBefore) / float64(b)
	}
	if b := read(sg.BytesAfter, sg.HeadAfter); b > 0 {
		l.ShareAfter = float64(sg.HeadAfter) / float64(b)
	}
	r.LMHead = l
}

func pct(before, after int) string {
	if before == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*float64(after-before)/float64(before))
}

// Text is the report for people.
func (r *Report) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "vocabulary: %d -> %d ids (%s): %d kept, %d new merge tokens, %d new added tokens",
		r.VocabBefore, r.VocabAfter, pct(r.VocabBefore, r.VocabAfter), r.Kept, r.NewMerges, r.NewAdded)
	if r.Dropped > 0 {
		fmt.Fprintf(&b, " (%d candidates dropped: they lengthened a corpus text)", r.Dropped)
	}
	if r.Unsupported > 0 {
		fmt.Fprintf(&b, " (%d candidates passed over: too rare in the validation records)", r.Unsupported)
	}
	b.WriteString("\n")
	if r.NewAdded+r.NewMerges > 0 {
		b.WriteString("the new tokens' rows are initialized, not trained: run tokenwise adapt before serving the model\n")
	}
	side := func(name string, e Evaluation) {
		// Only the sides the texts have: a corpus of completions has no input to count.
		var parts []string
		for _, sd := range []struct {
			name          string
			before, after int
		}{{"input", e.Before.Input, e.After.Input}, {"output", e.Before.Output, e.After.Output}, {"text", e.Before.Text, e.After.Text}} {
			if sd.before > 0 {
				parts = append(parts, fmt.Sprintf("%s %d -> %d (%s)", sd.name, sd.before, sd.after, pct(sd.before, sd.after)))
			}
		}
		if len(parts) == 0 {
			parts = append(parts, "none")
		}
		fmt.Fprintf(&b, "%s tokens: %s; texts longer: %d; round-trip failures: %d\n", name, strings.Join(parts, ", "), e.After.Longer, e.RoundTrip)
	}
	side("corpus", r.Corpus)
	if r.HeldOut != nil {
		side("held-out", *r.HeldOut)
	}
	if m := r.Model; m != nil {
		fmt.Fprintf(&b, "model: %s, hidden %d, tied embeddings %v; rows %d -> %d (padded to a multiple)\n",
			m.DType, m.Hidden, m.Tied, m.RowsBefore, m.RowsAfter)
		fmt.Fprintf(&b, "parameters: %d -> %d (saved %d); weight bytes %d -> %d (saved %d)\n",
			m.ParamsBefore, m.ParamsAfter, r.ParamsSaved, m.BytesBefore, m.BytesAfter, r.BytesSaved)
	}
	if l := r.LMHead; l != nil {
		fmt.Fprintf(&b, "LM head per decode step: %d -> %d FLOPs, %d -> %d bytes; share of decode weight reads %.1f%% -> %.1f%%\n",
			l.FLOPsBefore, l.FLOPsAfter, l.BytesBefore, l.BytesAfter, 100*l.ShareBefore, 100*l.ShareAfter)
	}
	if r.GGUF != "" {
		fmt.Fprintf(&b, "gguf: %s\n", r.GGUF)
		if r.GGUFUnportable > 0 {
			fmt.Fprintf(&b, "gguf: %d of its %d added tokens hold a space or a non-ASCII byte: transformers' GGUF tokenizer "+
				"(AutoTokenizer with gguf_file=, vLLM and SGLang given only the GGUF) drops them and tokenizes to more ids; "+
				"give those the tokenizer.json (vLLM --tokenizer %s) or specialize with --portable\n",
				r.GGUFUnportable, r.NewAdded, filepath.Dir(r.GGUF))
		}
	}
	return b.String()
}
