package pattern

import (
	"fmt"
	"strings"
	"testing"
)

// compileBoth returns the hand-written matcher Compile picks for expr and the
// regexp2 fallback for the same expression.
func compileBoth(t testing.TB, expr string) (fast, slow Matcher) {
	t.Helper()
	fast, err := Compile(expr)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fast.(*regexpMatcher); ok {
		t.Fatalf("Compile(%q) did not pick a hand-written matcher", expr)
	}
	slow, err = compileRegexp(expr)
	if err != nil {
		t.Fatal(err)
	}
	return fast, slow
}

func checkSame(t testing.TB, name string, fast, slow Matcher, s string) bool {
	t.Helper()
	got := fast.FindAll(s, nil)
	want := slow.FindAll(s, nil)
	if !sameRanges(got, want) {
		t.Errorf("%s on %q:\n fast    %s\n regexp2 %s", name, s, fmtRanges(s, got), fmtRanges(s, want))
		return false
	}
	return true
}

// TestFastMatchesRegexp holds every hand-written matcher to the regexp2
// matcher of the same pattern on the tricky inputs, on every pair of runes
// from a class-covering alphabet, and on random strings of that alphabet.
func TestFastMatchesRegexp(t *testing.T) {
	alphabet := []string{
		"a", "Z", "s", "S", "l", "e", "'", "\u2019", " ", "\t", "\n", "\r", "\v", "\u00a0", "\u3000", "\u0085",
		"7", "\u0663", "\u00b2", "\u2167", "\u0301", "\u0903", "\u01c5", "\u02b0", "\u4e2d", ".", "/", "\U0001F600",
		"\U0001D400", "\U0001D41A", "\U000107C0", "\U0001E950", "\u017f", "\xff", "\xe2\x82",
		"\U0002EBF0", "\U000116D0", "\U00010D69", "\U0001CCF0",
	}
	for _, k := range knownExprs {
		t.Run(k.name, func(t *testing.T) {
			fast, slow := compileBoth(t, k.expr)
			fails := 0
			check := func(s string) {
				if !checkSame(t, k.name, fast, slow, s) {
					fails++
					if fails > 10 {
						t.FailNow()
					}
				}
			}
			for _, s := range trickyInputs {
				check(s)
			}
			// Every string of up to three alphabet runes, also after a letter
			// and before a space, so each rune meets every neighbour.
			for _, a := range alphabet {
				for _, b := range alphabet {
					for _, c := range alphabet {
						check(a + b + c)
						check("x" + a + b + c + " ")
					}
				}
			}
			r := newRand(7)
			for i := 0; i < 3000; i++ {
				check(randomText(r, 1+r.IntN(60)))
			}
		})
	}
}

// TestFindAllAppends checks that matches are appended after what dst holds
// and that they tile the input.
func TestFindAllAppends(t *testing.T) {
	for _, k := range knownExprs {
		m, err := Compile(k.expr)
		if err != nil {
			t.Fatal(err)
		}
		s := trickyInputs[3]
		dst := m.FindAll(s, [][2]int{{-1, -1}})
		if dst[0] != [2]int{-1, -1} || len(dst) < 2 {
			t.Fatalf("%s: dst not appended to: %v", k.name, dst)
		}
		end := 0
		for _, r := range dst[1:] {
			if r[0] != end || r[1] <= r[0] {
				t.Fatalf("%s: ranges do not tile %q: %v", k.name, s, dst)
			}
			end = r[1]
		}
		if end != len(s) {
			t.Fatalf("%s: ranges end at %d of %d", k.name, end, len(s))
		}
	}
}

// TestFindAllNoAllocs checks the hand-written matchers allocate nothing when
// dst has room.
func TestFindAllNoAllocs(t *testing.T) {
	text := strings.Join(trickyInputs, " ")
	for _, k := range knownExprs {
		m, _ := Compile(k.expr)
		dst := make([][2]int, 0, len(text))
		if a := testing.AllocsPerRun(20, func() { dst = m.FindAll(text, dst[:0]) }); a != 0 {
			t.Errorf("%s: %v allocations per FindAll", k.name, a)
		}
	}
}

// FuzzMatchers compares each hand-written matcher with regexp2 on arbitrary
// bytes (invalid UTF-8 included: neither may panic, and they must agree).
func FuzzMatchers(f *testing.F) {
	for _, s := range trickyInputs {
		f.Add(s)
	}
	type pair struct{ fast, slow Matcher }
	var pairs []pair
	for _, k := range knownExprs {
		fast, slow := compileBoth(f, k.expr)
		pairs = append(pairs, pair{fast, slow})
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 2000 {
			return
		}
		for i, p := range pairs {
			checkSame(t, knownExprs[i].name, p.fast, p.slow, s)
		}
	})
}

// TestConcurrentUse runs every matcher from several goroutines at once (the
// tokenizer's batch encode does); run with -race to check for shared state.
func TestConcurrentUse(t *testing.T) {
	text := strings.Join(trickyInputs, "\n")
	for _, expr := range []string{exprGPT2, exprLlama3, exprQwen2, exprO200k, `\s+(?!\S)|\S+`} {
		m, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		want := m.FindAll(text, nil)
		done := make(chan [][2]int)
		for g := 0; g < 4; g++ {
			go func() { done <- m.FindAll(text, nil) }()
		}
		for g := 0; g < 4; g++ {
			if got := <-done; !sameRanges(got, want) {
				t.Errorf("%q: concurrent FindAll differs", expr)
			}
		}
	}
}

// TestCompileErrors checks that bad and unsupported patterns fail with an
// error naming the pattern, instead of matching something else.
func TestCompileErrors(t *testing.T) {
	for _, expr := range []string{`(`, `[a`, `a{2,1}`, `\`, `[a&&b]`, `[a[^b]]`, `[[:alpha:]]`, `a\Kb`, `\X`, `[\P{NoSuchProperty}]`, `(?s:a.b)`} {
		m, err := Compile(expr)
		if err == nil {
			t.Errorf("Compile(%q) = %T, want an error", expr, m)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", expr)) {
			t.Errorf("Compile(%q) error %q does not name the pattern", expr, err)
		}
	}
}
