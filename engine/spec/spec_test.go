package spec

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestPromptLookup(t *testing.T) {
	p := PromptLookup{}
	cases := []struct {
		tokens []int
		k      int
		want   []int
	}{
		// "... 5 6 7 8 9 ... 5 6" -> what followed 5 6: 7 8 9
		{[]int{1, 5, 6, 7, 8, 9, 2, 5, 6}, 3, []int{7, 8, 9}},
		// The longest n-gram wins over a more recent shorter one: 3-gram "4 5 6" -> 7.
		{[]int{4, 5, 6, 7, 1, 5, 6, 9, 4, 5, 6}, 2, []int{7, 1}},
		// Among equal matches, the most recent: "2" was followed by 3, later by 8.
		{[]int{2, 3, 0, 2, 8, 1, 2}, 1, []int{8}},
		// The continuation stops at the end of what is known.
		{[]int{7, 1, 2, 3, 1, 2}, 5, []int{3, 1, 2}},
		{[]int{1, 2, 3}, 4, nil},
		{[]int{}, 4, nil},
	}
	for _, c := range cases {
		if got := p.Propose(c.tokens, c.k); !slices.Equal(got, c.want) {
			t.Errorf("Propose(%v, %d) = %v, want %v", c.tokens, c.k, got, c.want)
		}
	}
	if got := (PromptLookup{MinN: 2}).Propose([]int{2, 3, 0, 2}, 3); got != nil {
		t.Errorf("MinN 2: a lone token proposed %v", got)
	}
}

func TestIndex(t *testing.T) {
	x := NewIndex(3, 1000)
	// The answers' skeleton: {"verdict": X, "score": Y}
	for i := range 5 {
		x.Add([]int{100, 101, 102, 200 + i, 103, 104, 300 + i, 105})
	}
	// After the skeleton's start, the index proposes its fixed part.
	if got := x.Propose([]int{9, 100}, 2); !slices.Equal(got, []int{101, 102}) {
		t.Errorf("after 100: %v, want [101 102]", got)
	}
	// After a value seen once, the 3-token context knows what follows.
	if got := x.Propose([]int{101, 102, 203}, 2); !slices.Equal(got, []int{103, 104}) {
		t.Errorf("after 101 102 203: %v, want [103 104]", got)
	}
	// Nothing known: nothing proposed.
	if got := x.Propose([]int{1, 2, 3}, 4); got != nil {
		t.Errorf("unknown context: %v", got)
	}
	// The bound holds: a full index adds no contexts but keeps counting known ones.
	small := NewIndex(2, 10)
	for i := range 100 {
		small.Add([]int{i, i + 1, i + 2})
	}
	if small.Len() != 10 {
		t.Errorf("%d contexts, want the bound 10", small.Len())
	}
}

func TestChain(t *testing.T) {
	x := NewIndex(2, 100)
	x.Add([]int{1, 2, 3, 1, 2, 3})
	c := Chain{PromptLookup{MinN: 2}, x}
	if got := c.Propose([]int{5, 1}, 2); !slices.Equal(got, []int{2, 3}) {
		t.Errorf("index fallback: %v", got)
	}
	if got := c.Propose([]int{7, 8, 9, 7, 8}, 1); fmt.Sprint(got) != "[9]" {
		t.Errorf("prompt lookup first: %v", got)
	}
}

func TestIndexFile(t *testing.T) {
	x := NewIndex(3, 100)
	x.Add([]int{1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3, 4})
	path := t.TempDir() + "/i.bin"
	if err := x.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	y, err := ReadIndexFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if y.Len() != x.Len() || y.Order != 3 || y.MaxEntries != 100 {
		t.Fatalf("read %d contexts order %d max %d, wrote %d", y.Len(), y.Order, y.MaxEntries, x.Len())
	}
	for _, ctx := range [][]int{{1}, {1, 2}, {2, 3}, {9, 1, 2}} {
		if a, b := x.Propose(ctx, 3), y.Propose(ctx, 3); !slices.Equal(a, b) {
			t.Errorf("after %v: written %v, read %v", ctx, a, b)
		}
	}
	// Truncated and foreign files are errors naming the file and offset.
	data, _ := os.ReadFile(path)
	os.WriteFile(path, data[:len(data)-3], 0o644)
	if _, err := ReadIndexFile(path); err == nil || !strings.Contains(err.Error(), "offset") {
		t.Errorf("truncated: %v", err)
	}
	os.WriteFile(path, []byte("{}"), 0o644)
	if _, err := ReadIndexFile(path); err == nil || !strings.Contains(err.Error(), "not a tokenwise draft index") {
		t.Errorf("foreign: %v", err)
	}
	if _, err := Proposers("prompt,domain", nil); err == nil {
		t.Error("domain without an index: no error")
	}
	if _, err := Proposers("ngram", nil); err == nil || !strings.Contains(err.Error(), `"ngram"`) {
		t.Errorf("unknown proposer: %v", err)
	}
	for _, list := range []string{"prompt,domain", "domain,prompt"} {
		c, err := Proposers(list, y)
		if err != nil {
			t.Fatalf("%s: %v", list, err)
		}
		// y: after 1 2 3 came 4 twice and 5 once. A two-token repeat in the sequence wins
		// over the index, a one-token one does not.
		if got := c.Propose([]int{2, 3, 7, 2, 3}, 1); !slices.Equal(got, []int{7}) {
			t.Errorf("%s: a two-token match in the sequence drafts %v, want [7]", list, got)
		}
		if got := c.Propose([]int{3, 9, 1, 2, 3}, 1); !slices.Equal(got, []int{4}) {
			t.Errorf("%s: a one-token match (3 → 9) against the index's 1 2 3 → 4: drafts %v, want [4]", list, got)
		}
		if got := c.Propose([]int{8, 6, 8}, 1); !slices.Equal(got, []int{6}) {
			t.Errorf("%s: nothing in the index: the one-token match drafts %v, want [6]", list, got)
		}
	}
	if c, err := Proposers("domain", y); err != nil || len(c) != 1 {
		t.Errorf("domain alone: %v %v", c, err)
	}
}
