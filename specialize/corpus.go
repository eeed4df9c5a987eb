// Package specialize fits a tokenizer and a model to a domain corpus: it prunes the
// vocabulary to what the domain uses (plus everything BPE needs to still reach it and to
// encode any other text), adds merged domain tokens that shorten the corpus, renumbers ids
// densely, and performs the matching surgery on a checkpoint's embedding and LM-head rows.
//
// Two guarantees are checked on every run rather than assumed:
//   - pruning only: every corpus text encodes to exactly its old ids under the id map;
//   - with added tokens: no corpus text gets more tokens than before, and every text decodes
//     back to itself.
//
// The tokenizer it writes is an ordinary tokenizer.json, so HF tokenizers (and anything built
// on it: vLLM, SGLang, transformers) reproduces the same ids.
package specialize

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Side says which side of a request a corpus text is on; output tokens are decode steps.
type Side int

const (
	Text   Side = iota // plain text or {"text"}: counted on both sides' totals as "text"
	Input              // a prompt
	Output             // a completion
)

func (s Side) String() string {
	switch s {
	case Input:
		return "input"
	case Output:
		return "output"
	}
	return "text"
}

// Doc is one corpus text.
type Doc struct {
	Text string
	Side Side
	// Group numbers the record a text belongs to: a JSONL line's prompt and completion share
	// one, so that a merged token is counted once per record when it must recur in several
	// (Options.MinDocs). 0 is a record of its own.
	Group int
}

// ReadCorpus reads corpus files. A file whose lines are JSON objects is JSONL: {"text"} lines
// are Text docs, {"prompt","completion"} lines give an Input and an Output doc. Any other file
// is one Text doc.
func ReadCorpus(paths ...string) ([]Doc, error) {
	var docs []Doc
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		d, err := parseCorpus(p, data)
		if err != nil {
			return nil, err
		}
		// Records are numbered on across files, from 1.
		base := 1
		if len(docs) > 0 {
			base = docs[len(docs)-1].Group + 1
		}
		for i := range d {
			d[i].Group += base
		}
		docs = append(docs, d...)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("corpus: no texts in %s", strings.Join(paths, ", "))
	}
	return docs, nil
}

func parseCorpus(name string, data []byte) ([]Doc, error) {
	trim := bytes.TrimSpace(data)
	if len(trim) == 0 {
		return nil, nil
	}
	if trim[0] != '{' {
		return []Doc{{Text: string(data), Side: Text, Group: 0}}, nil
	}
	var docs []Doc
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	line, records := 0, 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		group := records // from 0 in this file; ReadCorpus offsets them
		records++
		var rec struct {
			Text       *string `json:"text"`
			Prompt     *string `json:"prompt"`
			Completion *string `json:"completion"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		switch {
		case rec.Text != nil:
			docs = append(docs, Doc{Text: *rec.Text, Side: Text, Group: group})
		case rec.Prompt != nil || rec.Completion != nil:
			if rec.Prompt != nil {
				docs = append(docs, Doc{Text: *rec.Prompt, Side: Input, Group: group})
			}
			if rec.Completion != nil {
				docs = append(docs, Doc{Text: *rec.Completion, Side: Output, Group: group})
			}
		default:
			return nil, fmt.Errorf("%s:%d: want {\"text\"} or {\"prompt\",\"completion\"}", name, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return docs, nil
}
