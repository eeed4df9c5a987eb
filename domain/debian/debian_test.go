package debian

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/internal/testref"
)

func fixture(t *testing.T) []Record {
	t.Helper()
	f, err := os.Open("testdata/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestExampleFromRecord(t *testing.T) {
	recs := fixture(t)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	ex, ok := NewExample(recs[0])
	if !ok {
		t.Fatal("libfoo1 gives no example")
	}
	want := `{"name": "libfoo1", "version": "1.2-3+b1", "section": "libs", "priority": "optional", "architecture": "amd64", ` +
		`"maintainer": {"name": "Jane Doe", "email": "jane@example.org"}, "depends": ["dpkg", "libc6", "libbar2", "libbaz2"], ` +
		`"homepage": "https://foo.example.org", "description": "shared library for \"foo\""}`
	if ex.Completion != want {
		t.Fatalf("completion\n got %s\nwant %s", ex.Completion, want)
	}
	if ex.Group != "foo" {
		t.Errorf("group %q, want the source package foo", ex.Group)
	}
	// The prompt keeps the record's fields in a fixed order and drops dpkg's own.
	if strings.Contains(ex.Prompt, "Conffiles") || strings.Contains(ex.Prompt, "Status:") {
		t.Errorf("prompt shows dpkg's local fields:\n%s", ex.Prompt)
	}
	if !strings.HasPrefix(ex.Prompt, Instruction+"\n\nPackage: libfoo1\nSource: foo (1.2-3)\nVersion: 1.2-3+b1\n") ||
		!strings.HasSuffix(ex.Prompt, "Homepage: https://foo.example.org\nDescription: shared library for \"foo\"\n Foo does things.\n .\n More things.") {
		t.Errorf("prompt:\n%s", ex.Prompt)
	}
	bare, _ := NewExample(recs[2])
	if want := `{"name": "bare", "version": "1:2.0", "section": "", "priority": "", "architecture": "all", "maintainer": {"name": "Team", "email": ""}, "depends": [], "homepage": null, "description": "no section, no dependencies"}`; bare.Completion != want {
		t.Fatalf("completion\n got %s\nwant %s", bare.Completion, want)
	}
	var back Answer
	if err := json.Unmarshal([]byte(ex.Completion), &back); err != nil || !slices.Equal(back.Depends, ex.Answer.Depends) {
		t.Fatalf("completion does not parse back: %v", err)
	}
}

func TestRemovedPackagesLeftOut(t *testing.T) {
	sp := Splits(fixture(t), 1)
	n := 0
	for _, xs := range sp {
		for _, x := range xs {
			if x.Name == "foo-old" {
				t.Fatal("a removed package (config-files only) became an example")
			}
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d examples, want 2", n)
	}
}

func TestParseErrors(t *testing.T) {
	for _, in := range []string{" leading continuation\n", "Package: a\nno colon here\n"} {
		if _, err := Parse(strings.NewReader(in)); err == nil {
			t.Errorf("%q: no error", in)
		}
	}
}

// systemSplits is the task on this machine's status file alone: what every Debian CI has.
func systemSplits(t *testing.T, seed uint64) map[string][]Example {
	t.Helper()
	if _, err := os.Stat(StatusFile); err != nil {
		t.Skipf("not a Debian system: %v", err)
	}
	recs, err := System(false)
	if err != nil {
		t.Fatal(err)
	}
	return Splits(recs, seed)
}

// TestSplitsShareNoSource: the three splits are disjoint by source package (so no split holds
// a near copy of another's record), deterministic, and another seed draws another split.
func TestSplitsShareNoSource(t *testing.T) {
	a, b, c := systemSplits(t, 1), systemSplits(t, 1), systemSplits(t, 2)
	owner := map[string]string{}
	total := 0
	for _, s := range []string{Train, Validation, HeldOut} {
		if len(a[s]) == 0 {
			t.Fatalf("split %s is empty (%d train)", s, len(a[Train]))
		}
		total += len(a[s])
		for i, x := range a[s] {
			if o, ok := owner[x.Group]; ok && o != s {
				t.Fatalf("source %s is in %s and %s", x.Group, o, s)
			}
			owner[x.Group] = s
			if b[s][i].Prompt != x.Prompt || b[s][i].Completion != x.Completion {
				t.Fatalf("split %s example %d differs between two runs", s, i)
			}
		}
	}
	t.Logf("status file: %d examples: train %d, validation %d, held-out %d", total, len(a[Train]), len(a[Validation]), len(a[HeldOut]))
	same := 0
	for i := range min(len(a[HeldOut]), len(c[HeldOut])) {
		if a[HeldOut][i].Name == c[HeldOut][i].Name {
			same++
		}
	}
	if same == len(a[HeldOut]) {
		t.Fatal("seed 2 draws the same held-out split as seed 1")
	}
}

// TestAnswersMatchSchema: every answer of the machine's records validates against
// answer.schema.json under the reference validator (Python jsonschema).
func TestAnswersMatchSchema(t *testing.T) {
	sp := systemSplits(t, 1)
	var docs []testref.JSONDoc
	for _, xs := range sp {
		for _, x := range xs {
			docs = append(docs, testref.JSONDoc{Schema: Schema, Doc: x.Completion})
		}
	}
	if fails := testref.ValidateJSON(t, docs); len(fails) > 0 {
		t.Fatalf("%d of %d answers fail the schema, first: %s", len(fails), len(docs), fails[0])
	}
	t.Logf("%d answers valid", len(docs))
}
