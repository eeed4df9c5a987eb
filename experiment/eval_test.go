package experiment

import (
	"slices"
	"strings"
	"testing"
)

const want = `{"name": "trang", "version": "20220510-2", "section": "text", "priority": "optional", "architecture": "all", "maintainer": {"name": "Debian XML/SGML Group", "email": "x@y.org"}, "depends": ["default-jre", "java-runtime"], "homepage": null, "description": "XML schema converter"}`

// TestGrade: the expected answer is valid with every field right; one changed field is
// wrong alone; a missing key leaves the others graded but the document invalid; no JSON
// grades nothing.
func TestGrade(t *testing.T) {
	all := make([]bool, len(Fields))
	for i := range all {
		all[i] = true
	}
	if valid, right := Grade(want, want); !valid || !slices.Equal(right, all) {
		t.Errorf("the expected answer: valid %v, right %v", valid, right)
	}
	cases := []struct {
		text  string
		valid bool
		wrong []string // the fields graded wrong
	}{
		{strings.Replace(want, `"x@y.org"`, `"x@y.com"`, 1), true, []string{"maintainer.email"}},
		{strings.Replace(want, `["default-jre", "java-runtime"]`, `["java-runtime", "default-jre"]`, 1), true, []string{"depends"}},
		{strings.Replace(want, `"homepage": null`, `"homepage": "https://x"`, 1), true, []string{"homepage"}},
		{strings.Replace(want, `"section": "text", `, ``, 1), false, []string{"section"}},
		{strings.Replace(want, `"section": "text"`, `"section": 3`, 1), false, []string{"section"}},
		{want[:len(want)-1], false, Fields},
		{"", false, Fields},
	}
	for _, c := range cases {
		valid, right := Grade(c.text, want)
		var wrong []string
		for i, ok := range right {
			if !ok {
				wrong = append(wrong, Fields[i])
			}
		}
		if valid != c.valid || !slices.Equal(wrong, c.wrong) {
			t.Errorf("%s: valid %v, wrong %v; want %v, %v", c.text, valid, wrong, c.valid, c.wrong)
		}
	}
	if (Record{Right: all}).Exact() != true || (Record{Right: all[:3]}).Exact() {
		t.Error("Record.Exact")
	}
}

// TestFewShotPrefix: the shots are ChatML turns ending where the held-out prompt's begins.
func TestFewShotPrefix(t *testing.T) {
	got := FewShotPrefix([]Example{{"P1", "C1"}, {"P2", "C2"}})
	wantText := "<|im_start|>user\nP1<|im_end|>\n<|im_start|>assistant\nC1<|im_end|>\n<|im_start|>user\nP2<|im_end|>\n<|im_start|>assistant\nC2<|im_end|>\n"
	if got != wantText {
		t.Errorf("prefix %q", got)
	}
}
