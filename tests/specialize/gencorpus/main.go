// Command gencorpus writes the essay-grading domain corpus (package domain) as JSONL
// {"prompt","completion"} files: a train split and a held-out split from different seeds.
//
//	go run ./tests/specialize/gencorpus -train 2000 -held-out 500 -out DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tokenwise/tokenwise/domain"
)

func main() {
	train := flag.Int("train", 2000, "examples in train.jsonl (seed 1)")
	held := flag.Int("held-out", 500, "examples in held-out.jsonl (seed 2)")
	out := flag.String("out", ".", "output folder")
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "gencorpus:", err)
		os.Exit(1)
	}
	for _, s := range []struct {
		name string
		seed uint64
		n    int
	}{{"train.jsonl", 1, *train}, {"held-out.jsonl", 2, *held}} {
		path := filepath.Join(*out, s.name)
		f, err := os.Create(path)
		if err == nil {
			err = domain.WriteJSONL(f, domain.Generate(s.seed, s.n))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "gencorpus: %s: %v\n", path, err)
			os.Exit(1)
		}
	}
}
