package kvcache

import (
	"slices"
	"testing"
)

func seq(n, from int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

func TestAllocateFree(t *testing.T) {
	m, err := New(4, 4)
	if err != nil {
		t.Fatal(err)
	}
	tab, ok := m.Allocate(nil, 9) // 3 blocks
	if !ok || len(tab) != 3 || m.NumFree() != 1 {
		t.Fatalf("allocate 9 tokens: table %v ok %v free %d", tab, ok, m.NumFree())
	}
	if _, ok := m.Allocate(tab, 17); ok {
		t.Fatal("allocating 5 blocks out of 4 succeeded")
	}
	if len(tab) != 3 || m.NumFree() != 1 {
		t.Fatalf("failed allocation changed state: %v free %d", tab, m.NumFree())
	}
	tab, ok = m.Allocate(tab, 12) // still 3 blocks
	if !ok || len(tab) != 3 {
		t.Fatalf("no-op allocate: %v %v", tab, ok)
	}
	m.Free(tab)
	if m.NumFree() != 4 || m.Usage() != 0 {
		t.Fatalf("after free: %d free, usage %v", m.NumFree(), m.Usage())
	}
}

func TestPrefixHitAndLRU(t *testing.T) {
	m, _ := New(4, 4)
	prompt := seq(10, 100) // 2 full blocks + 2 tokens
	tab, _ := m.Allocate(nil, len(prompt))
	hs := PrefixHashes(prompt, 4)
	for i, h := range hs {
		m.Commit(tab[i], h)
	}
	// A second prompt sharing 8 tokens finds both full blocks while the first still runs.
	other := append(seq(8, 100), 7, 7, 7)
	hit := m.Lookup(other, len(other)-1)
	if !slices.Equal(hit, tab[:2]) || m.Refs(tab[0]) != 2 {
		t.Fatalf("lookup: %v (refs %d), want %v", hit, m.Refs(tab[0]), tab[:2])
	}
	if m.Hits != 8 || m.Queries != 10 {
		t.Fatalf("stats: hits %d queries %d", m.Hits, m.Queries)
	}
	m.Free(hit)
	m.Free(tab)
	// Both freed; cached blocks are still findable.
	if got := m.Lookup(prompt, len(prompt)-1); !slices.Equal(got, tab[:2]) {
		t.Fatalf("lookup after free: %v", got)
	}
	m.Free(tab[:2])
	// The limit keeps the last block from matching when the prompt is block-aligned.
	if got := m.Lookup(seq(8, 100), 7); len(got) != 1 {
		t.Fatalf("limit 7: %v, want one block", got)
	}
	m.Free(tab[:1])
	// Allocating all 4 blocks evicts the cached ones; the prefix is gone.
	all, ok := m.Allocate(nil, 16)
	if !ok {
		t.Fatal("allocate all")
	}
	m.Free(all)
	if got := m.Lookup(prompt, len(prompt)-1); len(got) != 0 {
		t.Fatalf("evicted prefix still found: %v", got)
	}
}

func TestLRUOrder(t *testing.T) {
	m, _ := New(3, 2)
	a, _ := m.Allocate(nil, 2)
	b, _ := m.Allocate(nil, 2)
	m.Commit(a[0], PrefixHashes([]int{1, 2}, 2)[0])
	m.Commit(b[0], PrefixHashes([]int{3, 4}, 2)[0])
	m.Free(a) // freed first: reused first
	m.Free(b)
	// The never-used block 2 was freed at start, so it goes first, then a's.
	c, _ := m.Allocate(nil, 4)
	if !slices.Equal(c, []int{2, a[0]}) {
		t.Fatalf("allocation order %v, want [2 %d]", c, a[0])
	}
	if got := m.Lookup([]int{1, 2, 9}, 2); len(got) != 0 {
		t.Fatalf("a's prefix survived eviction: %v", got)
	}
	if got := m.Lookup([]int{3, 4, 9}, 2); !slices.Equal(got, b) {
		t.Fatalf("b's prefix lost: %v", got)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(0, 16); err == nil {
		t.Fatal("0 blocks accepted")
	}
	if _, err := New(4, 0); err == nil {
		t.Fatal("block size 0 accepted")
	}
}
