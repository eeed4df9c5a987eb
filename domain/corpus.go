package domain

import (
	"fmt"
	"os"
	"path/filepath"
)

// Seeds of the standard splits. The demo's base model and its adaptation were trained on
// TrainSeed; the demo measures on HeldOutSeed, which neither saw.
const (
	TrainSeed   = 1
	HeldOutSeed = 2
)

// Split is one corpus file: N examples drawn from Seed.
type Split struct {
	Name string `json:"split"` // "train" or "held-out"; the file is Name + ".jsonl"
	Seed uint64 `json:"seed"`
	N    int    `json:"examples"`
}

// Splits are the standard train and held-out splits with train and heldOut examples;
// a split of 0 examples is left out.
func Splits(train, heldOut int) []Split {
	var out []Split
	for _, s := range []Split{{"train", TrainSeed, train}, {"held-out", HeldOutSeed, heldOut}} {
		if s.N > 0 {
			out = append(out, s)
		}
	}
	return out
}

// File is a written split.
type File struct {
	Split
	Path  string `json:"path"`
	Bytes int64  `json:"bytes"`
}

// WriteSplits writes each split into dir (created if needed) as Name.jsonl in WriteJSONL's
// {"prompt","completion"} lines: the corpus `tokenwise analyze` and `tokenwise specialize`
// read (`tokenwise corpus`).
func WriteSplits(dir string, splits []Split) ([]File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []File
	for _, s := range splits {
		if s.N < 0 {
			return nil, fmt.Errorf("%s split: %d examples: must not be negative", s.Name, s.N)
		}
		path := filepath.Join(dir, s.Name+".jsonl")
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		err = WriteJSONL(f, Generate(s.Seed, s.N))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		files = append(files, File{Split: s, Path: path, Bytes: st.Size()})
	}
	return files, nil
}
