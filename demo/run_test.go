package demo

import (
	"math"
	"os/exec"
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

// shellQuote's output, read back by bash, is the argument: the generate command the demo
// prints must paste as it is.
func TestShellQuote(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	for _, s := range []string{"demo/model", "--chat", "", "two words", "it's", domain.Generate(HeldOutSeed, 1)[0].Prompt, "tab\there\\back 'q' \"dq\" $HOME `x` \x01"} {
		q := shellQuote(s)
		out, err := exec.Command(bash, "-c", "printf %s "+q).Output()
		if err != nil || string(out) != s {
			t.Errorf("shellQuote(%q) = %s: bash reads %q (%v)", s, q, out, err)
		}
	}
}

func TestWilsonAndSignTest(t *testing.T) {
	// 40 of 100: the Wilson interval is [30.9%, 49.8%].
	if ci := wilson(40, 100); math.Abs(ci[0]-0.3094) > 0.001 || math.Abs(ci[1]-0.4980) > 0.001 {
		t.Errorf("wilson(40, 100) = %v", ci)
	}
	// 7 against 0: p = 2/2^7; 14 against 8: p = 0.286; no difference: 1.
	for _, tc := range []struct {
		b, c int
		p    float64
	}{{0, 7, 2.0 / 128}, {14, 8, 0.2863}, {0, 0, 1}, {5, 5, 1}} {
		if p := signTest(tc.b, tc.c); math.Abs(p-tc.p) > 0.001 {
			t.Errorf("signTest(%d, %d) = %.4f, want %.4f", tc.b, tc.c, p, tc.p)
		}
	}
}
