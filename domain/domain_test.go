package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/grammar"
)

func TestDeterministicAndSplitsDiffer(t *testing.T) {
	a, b := Generate(1, 50), Generate(1, 50)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different examples")
	}
	c := Generate(2, 50)
	same := 0
	for i := range a {
		if a[i].Prompt == c[i].Prompt {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("%d prompts shared between seeds 1 and 2", same)
	}
}

func TestCompletionSchema(t *testing.T) {
	keys := []string{"score", "grammar", "coherence", "vocabulary", "verdict", "strengths", "weaknesses", "feedback"}
	for i, ex := range Generate(3, 200) {
		var v Verdict
		dec := json.NewDecoder(strings.NewReader(ex.Completion))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("example %d: %v: %s", i, err, ex.Completion)
		}
		if v != ex.Fields {
			t.Fatalf("example %d: completion %+v, fields %+v", i, v, ex.Fields)
		}
		last := -1
		for _, k := range keys {
			at := strings.Index(ex.Completion, `"`+k+`": `)
			if at <= last {
				t.Fatalf("example %d: key %q out of order or not followed by \": \": %s", i, k, ex.Completion)
			}
			last = at
		}
		if v.Score < 1 || v.Score > 5 || (v.Verdict == "pass") != (v.Score >= 3) {
			t.Fatalf("example %d: score %d verdict %q break the rubric", i, v.Score, v.Verdict)
		}
		if !strings.HasPrefix(ex.Prompt, Instruction) || !strings.Contains(ex.Prompt, "\n\nEssay:\n") {
			t.Fatalf("example %d: prompt shape: %.120q", i, ex.Prompt)
		}
	}
}

func TestWriteJSONL(t *testing.T) {
	var b bytes.Buffer
	exs := Generate(4, 3)
	if err := WriteJSONL(&b, exs); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines", len(lines))
	}
	for i, l := range lines {
		var r struct{ Prompt, Completion string }
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Prompt != exs[i].Prompt || r.Completion != exs[i].Completion {
			t.Fatalf("line %d: %v", i, err)
		}
	}
}

func ExampleGenerate() {
	ex := Generate(1, 1)[0]
	fmt.Println(ex.Fields.Verdict, ex.Fields.Score)
	fmt.Println(ex.Completion[:40])
	// Output:
	// pass 5
	// {"score": 5, "grammar": 5, "coherence":
}

// BestScoreAccuracy rests on this: from the same random state, essays of levels 3, 4 and 5
// are the same text, and so are levels 1 and 2; the two groups differ.
func TestEssayShowsOnlyWeakOrNot(t *testing.T) {
	differ := 0
	for seed := range uint64(50) {
		essay := func(q int) string {
			return writeEssay(rand.New(rand.NewPCG(seed, 1)), topics[seed%uint64(len(topics))], q)
		}
		if essay(3) != essay(4) || essay(4) != essay(5) || essay(1) != essay(2) {
			t.Fatalf("seed %d: essays within a group differ: the score shows beyond weak/not, and BestScoreAccuracy is wrong", seed)
		}
		if essay(2) != essay(3) {
			differ++
		}
	}
	if differ < 45 {
		t.Errorf("weak and other essays differ for %d of 50 seeds: want nearly all", differ)
	}
}

// TestSchemaMatchesCompletions: every completion is a document of Schema (as the grammar
// reads it, with spaced whitespace), and Schema names Verdict's fields in order.
func TestSchemaMatchesCompletions(t *testing.T) {
	g, err := grammar.Compile(grammar.Spec{JSONSchema: []byte(Schema)}, grammar.Options{Whitespace: grammar.Spaced})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range Generate(1, 200) {
		if !g.Accepts([]byte(ex.Completion)) {
			t.Fatalf("completion is not a document of Schema: %s", ex.Completion)
		}
	}
}

// TestSchemaFile: domain/verdict.schema.json (the README's --json-schema example) is Schema.
func TestSchemaFile(t *testing.T) {
	b, err := os.ReadFile("verdict.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var file, want any
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(Schema), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(file, want) {
		t.Fatalf("verdict.schema.json differs from domain.Schema")
	}
}
