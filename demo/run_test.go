package demo

import (
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/domain"
)

func TestParseVerdict(t *testing.T) {
	ex := domain.Generate(HeldOutSeed, 1)[0]
	v, ok := parseVerdict(ex.Completion)
	if !ok || v != ex.Fields {
		t.Fatalf("the reference completion: %+v, %v; want %+v", v, ok, ex.Fields)
	}
	for _, bad := range []string{
		ex.Completion[:len(ex.Completion)-1],                         // cut short
		strings.Replace(ex.Completion, `"feedback"`, `"feedbak"`, 1), // a key missing
		strings.Replace(ex.Completion, `"score": `, `"score": "`, 1), // wrong type
		`{"score": 3}`, "", "not json",
	} {
		if _, ok := parseVerdict(bad); ok {
			t.Errorf("%.80q: accepted", bad)
		}
	}
}

func TestSameJSON(t *testing.T) {
	if !sameJSON([]byte(`{"a": [1, 2], "b": "x"}`), []byte(`{"b":"x","a":[1,2]}`)) {
		t.Error("same values, different layout: not same")
	}
	if sameJSON([]byte(`{"a": 1}`), []byte(`{"a": 2}`)) || sameJSON([]byte(`{`), []byte(`{`)) {
		t.Error("different or invalid documents: same")
	}
}
