package experiment

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"

	"github.com/tokenwise/tokenwise/domain/debian"
	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/grammar"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
	"github.com/tokenwise/tokenwise/train"
)

// Fields are the answer's fields graded one by one, in answer.schema.json's order; the
// maintainer object counts as its two strings.
var Fields = []string{"name", "version", "section", "priority", "architecture", "maintainer.name", "maintainer.email", "depends", "homepage", "description"}

// Example is one held-out (or training) record as the corpus files hold it.
type Example struct {
	Prompt     string `json:"prompt"`
	Completion string `json:"completion"`
}

// Record is one held-out prompt's run through one arm, as eval/armN.jsonl holds it.
type Record struct {
	Index        int     `json:"index"`
	PromptTokens int     `json:"prompt_tokens"`
	OutputTokens int     `json:"output_tokens"` // engine.Usage.CompletionTokens
	DecodeSteps  int     `json:"decode_steps"`  // engine.Timing.DecodeSteps
	JumpedTokens int     `json:"jumped_tokens"` // appended by the grammar without a step
	PrefillMs    float64 `json:"prefill_ms"`
	DecodeMs     float64 `json:"decode_ms"`
	Finish       string  `json:"finish"`
	// Valid says the text is the schema's document: a JSON object with every key and only
	// those, of the right types.
	Valid bool `json:"valid"`
	// Right[i] says Fields[i] equals the expected answer's (false when the text is no JSON
	// object or lacks the key).
	Right []bool `json:"right"`
	Text  string `json:"text"`
}

// Exact says every field is right.
func (r Record) Exact() bool {
	for _, ok := range r.Right {
		if !ok {
			return false
		}
	}
	return len(r.Right) == len(Fields)
}

// readJSONL reads {"prompt","completion"} lines.
func readJSONL(path string) ([]Example, error) { return readLines[Example](path) }

// readLines reads a JSONL file of T, skipping blank lines; an error names the line.
func readLines[T any](path string) ([]T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []T
	for i, line := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// FewShotPrefix is the conversation arm 0 sees before each held-out prompt: each shot as a
// user turn and the expected answer as the assistant's, in the ChatML that train.ChatPrompt
// (what arms 1 and 2 are trained on) writes.
func FewShotPrefix(shots []Example) string {
	var b strings.Builder
	for _, s := range shots {
		b.WriteString(train.ChatPrompt(s.Prompt))
		b.WriteString(s.Completion)
		b.WriteString(train.EndOfTurn + "\n")
	}
	return b.String()
}

// evalOptions configure one arm's evaluation.
type evalOptions struct {
	Prefix    string // text before each ChatPrompt (arm 0's shots)
	MaxTokens int
	Threads   int
	Workers   int // records answered at once, each by its own copy of the model
	Schema    bool
}

// evaluate runs exs[len(done):] greedily through the model in dir and appends a record per
// prompt to path (JSONL), in order, returning every record (done ones first). With
// o.Workers > 1 that many copies of the model answer records at once, o.Threads split
// among them: greedy answers do not depend on it, and the report's times come from the
// timing pass, which runs one record at a time.
func evaluate(ctx context.Context, dir, path string, exs []Example, o evalOptions, progress func(done, total int)) ([]Record, error) {
	done, err := readRecords(path)
	if err != nil {
		return nil, err
	}
	if len(done) > len(exs) {
		return nil, fmt.Errorf("%s has %d records, the held-out split %d", path, len(done), len(exs))
	}
	if len(done) == len(exs) {
		return done, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	workers := max(1, min(o.Workers, len(exs)-len(done)))
	wo := o
	wo.Threads = max(1, o.Threads/workers)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		r   Record
		err error
	}
	next := make(chan int)
	results := make(chan result)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m, tok, schema, err := loadArm(dir, wo)
			if err != nil {
				select {
				case results <- result{err: err}:
				case <-ctx.Done():
				}
				return
			}
			defer m.Close()
			for i := range next {
				r, err := answer(ctx, m, tok, schema, o, i, exs[i])
				select {
				case results <- result{r: r, err: err}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	go func() {
		defer close(next)
		for i := len(done); i < len(exs); i++ {
			select {
			case next <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()
	// fail stops the workers and waits for them (they close their models) before returning.
	fail := func(err error) ([]Record, error) {
		cancel()
		for range results {
		}
		return nil, err
	}
	out := done
	pending := map[int]Record{}
	for res := range results {
		if res.err != nil {
			return fail(res.err)
		}
		pending[res.r.Index] = res.r
		for {
			r, ok := pending[len(out)]
			if !ok {
				break
			}
			delete(pending, r.Index)
			line, err := json.Marshal(r)
			if err == nil {
				_, err = f.Write(append(line, '\n'))
			}
			if err != nil {
				return fail(err)
			}
			out = append(out, r)
			if progress != nil {
				progress(len(out), len(exs))
			}
		}
	}
	if len(out) != len(exs) {
		return nil, fmt.Errorf("evaluate %s: %d of %d records answered", dir, len(out), len(exs))
	}
	return out, f.Sync()
}

// answer runs one held-out record greedily and grades it.
func answer(ctx context.Context, m *model.Model, tok *tokenizer.Tokenizer, schema *grammar.Table, o evalOptions, i int, ex Example) (Record, error) {
	ids := tok.Encode(o.Prefix+train.ChatPrompt(ex.Prompt), false)
	res, err := engine.Generate(ctx, m, tok, ids, engine.Options{MaxTokens: o.MaxTokens, Grammar: schema})
	if err != nil {
		return Record{}, fmt.Errorf("held-out prompt %d: %w", i, err)
	}
	valid, right := Grade(res.Text, ex.Completion)
	return Record{Index: i, PromptTokens: len(ids), OutputTokens: res.Usage.CompletionTokens, DecodeSteps: res.Timing.DecodeSteps,
		JumpedTokens: res.Timing.JumpedTokens, PrefillMs: res.Timing.PrefillMs, DecodeMs: res.Timing.DecodeMs,
		Finish: res.FinishReason, Valid: valid, Right: right, Text: res.Text}, nil
}

// loadArm loads the model and tokenizer in dir and, with o.Schema, compiles the answer's
// schema for its vocabulary.
func loadArm(dir string, o evalOptions) (*model.Model, *tokenizer.Tokenizer, *grammar.Table, error) {
	m, err := model.Load(dir, model.Options{Threads: o.Threads})
	if err != nil {
		return nil, nil, nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		m.Close()
		return nil, nil, nil, err
	}
	var schema *grammar.Table
	if o.Schema {
		if schema, err = engine.NewGrammars(tok, 1).Compile(grammar.Spec{JSONSchema: debian.Schema}, grammar.Options{Whitespace: grammar.Spaced}); err != nil {
			m.Close()
			return nil, nil, nil, fmt.Errorf("answer schema: %w", err)
		}
	}
	return m, tok, schema, nil
}

// readRecords reads an arm's records so far; a missing file is none, and a last line cut
// short (the run was killed while writing it) is dropped and rewritten.
func readRecords(path string) ([]Record, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	good := 0
	for sc.Scan() {
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Index != len(out) {
			break
		}
		out = append(out, r)
		good += len(sc.Bytes()) + 1
	}
	if good < len(data) {
		if err := os.Truncate(path, int64(good)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Grade compares an answer with the expected one field by field. valid says text is the
// schema's document; right[i] says Fields[i] is as expected.
func Grade(text, expected string) (valid bool, right []bool) {
	right = make([]bool, len(Fields))
	var want map[string]any
	if err := json.Unmarshal([]byte(expected), &want); err != nil {
		return false, right // the corpus writes every completion as JSON
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		return false, right
	}
	for i, f := range Fields {
		w, wok := lookup(want, f)
		g, gok := lookup(got, f)
		right[i] = wok && gok && reflect.DeepEqual(w, g)
	}
	var a debian.Answer
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if dec.Decode(&a) != nil || dec.More() {
		return false, right
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal([]byte(text), &keys)
	valid = len(keys) == 9 && a.Version != "" && a.Description != ""
	if m, ok := got["maintainer"].(map[string]any); !ok || len(m) != 2 {
		valid = false
	}
	if _, ok := got["depends"].([]any); !ok {
		valid = false
	}
	return valid, right
}

// lookup finds a dotted field in a decoded JSON object.
func lookup(m map[string]any, field string) (any, bool) {
	head, rest, nested := strings.Cut(field, ".")
	v, ok := m[head]
	if !ok || !nested {
		return v, ok
	}
	sub, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	return lookup(sub, rest)
}

// Timing is one arm's answer to one held-out record, timed again in the interleaved pass.
type Timing struct {
	Index     int     `json:"index"`
	Arm       int     `json:"arm"`
	PrefillMs float64 `json:"prefill_ms"`
	DecodeMs  float64 `json:"decode_ms"`
}

// timeArms runs every held-out record through the three arms in turn (record i starts at
// arm i mod 3), so that whatever else the machine is doing falls on the arms alike: the
// evaluations run one arm after another, minutes or hours apart, and a neighbour's load
// then reads as one arm's speed. Each answer must be the text its evaluation recorded
// (greedy decoding is deterministic); the timings go to path (JSONL), written at the end.
func timeArms(ctx context.Context, dirs, prefixes []string, path string, exs []Example, want [][]Record, o evalOptions, progress func(done, total int)) ([]Timing, error) {
	type arm struct {
		m      *model.Model
		tok    *tokenizer.Tokenizer
		schema *grammar.Table
	}
	arms := make([]arm, len(dirs))
	for i, dir := range dirs {
		if len(want[i]) != len(exs) {
			return nil, fmt.Errorf("arm %d has %d evaluated records, the held-out split %d", i, len(want[i]), len(exs))
		}
		m, tok, schema, err := loadArm(dir, o)
		if err != nil {
			return nil, err
		}
		defer m.Close()
		arms[i] = arm{m: m, tok: tok, schema: schema}
	}
	var out []Timing
	var buf bytes.Buffer
	for i, ex := range exs {
		for j := range arms {
			k := (i + j) % len(arms)
			a := arms[k]
			ids := a.tok.Encode(prefixes[k]+train.ChatPrompt(ex.Prompt), false)
			res, err := engine.Generate(ctx, a.m, a.tok, ids, engine.Options{MaxTokens: o.MaxTokens, Grammar: a.schema})
			if err != nil {
				return nil, fmt.Errorf("arm %d, held-out prompt %d: %w", k, i, err)
			}
			if res.Text != want[k][i].Text {
				return nil, fmt.Errorf("arm %d, held-out prompt %d: the timed answer differs from the evaluated one (%q, evaluated %q)", k, i, res.Text, want[k][i].Text)
			}
			t := Timing{Index: i, Arm: k, PrefillMs: res.Timing.PrefillMs, DecodeMs: res.Timing.DecodeMs}
			line, _ := json.Marshal(t)
			buf.Write(append(line, '\n'))
			out = append(out, t)
		}
		if progress != nil {
			progress(i+1, len(exs))
		}
	}
	return out, os.WriteFile(path, buf.Bytes(), 0o644)
}

// readTimings reads the interleaved pass's timings (nil, nil when it has not run).
func readTimings(path string) ([]Timing, error) {
	ts, err := readLines[Timing](path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return ts, err
}
