// Command corpus writes the parity corpus (see package parity) to a file, for the bench
// scripts and for running the references by hand.
//
//	go run ./tests/parity/cmd/corpus -refs .cache/refs -sources udhr,go,json -format text -out bench.txt
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tests/parity"
)

func main() {
	refs := flag.String("refs", testref.Dir(), "references folder (scripts/setup-refs.sh)")
	sources := flag.String("sources", "", "comma-separated sources to keep (udhr,go,debian,json,adversarial); empty = all")
	full := flag.Bool("full", false, "the full corpus (parity.Full) instead of parity.Default")
	format := flag.String("format", "jsonl", "jsonl (one JSON string per text) or text (texts concatenated)")
	out := flag.String("out", "-", "output file, - for stdout")
	flag.Parse()
	if err := run(*refs, *full, *sources, *format, *out); err != nil {
		fmt.Fprintf(os.Stderr, "corpus: %v\n", err)
		os.Exit(1)
	}
}

func run(refs string, full bool, sources, format, out string) error {
	size := parity.Default
	if full {
		size = parity.Full
	}
	c, err := parity.Build(refs, size)
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, s := range strings.Split(sources, ",") {
		if s != "" {
			keep[s] = true
		}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, t := range c.Texts {
		if len(keep) > 0 && !keep[t.Source] {
			continue
		}
		switch format {
		case "jsonl":
			if err := enc.Encode(t.Text); err != nil {
				return err
			}
		case "text":
			b.WriteString(t.Text)
		default:
			return fmt.Errorf("-format %q: want jsonl or text", format)
		}
	}
	if out == "-" {
		_, err = os.Stdout.Write(b.Bytes())
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}
