package tokenizer

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"unicode/utf8"
)

// bpeModel is HF's BPE model: a vocabulary, ranked merges and the rules for characters that
// are not in the vocabulary (byte fallback, unk).
type bpeModel struct {
	vocab   map[string]int
	idToTok []string // model vocabulary by id ("" where unused)

	// merges maps the pair (left id, right id) packed as left<<32|right to rank<<32|merged id.
	merges mergeTable

	unkID        int // -1: no unk token (unknown characters are dropped, as in HF)
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	prefix       string // continuing_subword_prefix
	suffix       string // end_of_word_suffix
	fallbackIDs  [256]int32

	// byteInput is set when the last pre-tokenizer is ByteLevel. The pre-tokenizer then leaves
	// pieces as raw bytes and the model maps each byte to its ByteLevel character itself, through
	// byteUnit/byteID (256-entry tables). This skips building a transformed copy of every piece,
	// and offsets stay plain byte ranges of the input.
	byteInput bool
	byteUnit  [256]string // ByteLevel character (as UTF-8) for each byte
	byteID    [256]int32  // vocab id of byteUnit[b], -1 when absent

	// runeID is the vocab id of each single BMP character (-1 when absent), so the first
	// step of merging (one lookup per character) needs no string hashing. It matters for
	// SentencePiece-style files like Gemma-3, whose pieces are whole lines.
	runeID []int32

	cache pieceCache
}

// bpeToken is one model output token; start/end are byte offsets inside the piece.
type bpeToken struct {
	id         int32
	start, end int32
}

type symbol struct {
	id         int32
	start, end int32
	prev, next int32
}

// bpeScratch is per-call working memory, reused through a sync.Pool so encoding allocates
// nothing per piece.
type bpeScratch struct {
	syms  []symbol
	ranks []uint64 // rank<<32|newID of the pair starting at each symbol; noPair when none
	heap  []uint64
	buf   []byte
	local map[string][]uint32 // small lock-free cache in front of bpeModel.cache
}

const noPair = math.MaxUint64

func newBPE(vocab map[string]int, merges [][2]string, unk *string, prefix, suffix string,
	fuseUnk, byteFallback, ignoreMerges bool) (*bpeModel, error) {
	m := &bpeModel{vocab: vocab, unkID: -1, fuseUnk: fuseUnk, byteFallback: byteFallback,
		ignoreMerges: ignoreMerges, prefix: prefix, suffix: suffix}
	maxID := -1
	for _, id := range vocab {
		maxID = max(maxID, id)
	}
	m.idToTok = make([]string, maxID+1)
	for tok, id := range vocab {
		m.idToTok[id] = tok
	}
	if unk != nil {
		id, ok := vocab[*unk]
		if !ok {
			// HF accepts the file and fails when an unknown character is met; we cannot fail in
			// Encode, so refuse the file up front.
			return nil, fmt.Errorf("model.unk_token: %q is not in model.vocab", *unk)
		}
		m.unkID = id
	}
	for b := 0; b < 256; b++ {
		m.fallbackIDs[b] = -1
		if id, ok := vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.fallbackIDs[b] = int32(id)
		}
	}
	// Resolving a merge costs three vocabulary lookups; Gemma-3 has 515k merges, so the work
	// is split over the cores (map reads are safe concurrently) and the table filled after.
	packed := make([][2]uint64, len(merges))
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), 8, len(merges)/20000+1)
	errs := make([]error, workers) // each worker's first bad merge; chunks are in file order
	chunk := (len(merges) + workers - 1) / workers
	for w := 0; w < workers; w++ {
		lo, hi := w*chunk, min((w+1)*chunk, len(merges))
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			var buf []byte
			for i := lo; i < hi; i++ {
				mg := merges[i]
				a, ok := vocab[mg[0]]
				if !ok {
					errs[w] = fmt.Errorf("model.merges[%d]: token %q is not in model.vocab", i, mg[0])
					return
				}
				b, ok := vocab[mg[1]]
				if !ok {
					errs[w] = fmt.Errorf("model.merges[%d]: token %q is not in model.vocab", i, mg[1])
					return
				}
				// The merged token drops the right side's continuing_subword_prefix (HF cuts its length).
				second := mg[1][min(len(prefix), len(mg[1])):]
				buf = append(append(buf[:0], mg[0]...), second...)
				n, ok := vocab[string(buf)]
				if !ok {
					errs[w] = fmt.Errorf("model.merges[%d]: merged token %q is not in model.vocab", i, buf)
					return
				}
				packed[i] = [2]uint64{uint64(a)<<32 | uint64(b), uint64(i)<<32 | uint64(n)}
			}
		}(w)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the first bad merge, in file order
		}
	}
	m.merges = newMergeTable(len(merges))
	for _, p := range packed {
		// A pair listed twice keeps the later rank, as HF's map build does.
		m.merges.put(p[0], p[1])
	}
	m.setByteUnits()
	m.runeID = make([]int32, 1<<16)
	for i := range m.runeID {
		m.runeID[i] = -1
	}
	for tok, id := range vocab {
		if r, size := utf8.DecodeRuneInString(tok); size == len(tok) && r < 1<<16 && !(r == utf8.RuneError && size == 1) {
			m.runeID[r] = int32(id)
		}
	}
	return m, nil
}

// setByteUnits fills the ByteLevel tables used when byteInput is on.
func (m *bpeModel) setByteUnits() {
	for b := 0; b < 256; b++ {
		m.byteUnit[b] = string(byteToRune[b])
		m.byteID[b] = -1
		if id, ok := m.vocab[m.byteUnit[b]]; ok {
			m.byteID[b] = int32(id)
		}
	}
}

// tokenize appends the tokens of one pre-tokenized piece to out.
func (m *bpeModel) tokenize(s string, sc *bpeScratch, out []bpeToken) []bpeToken {
	if len(s) == 0 {
		return out
	}
	cacheable := len(s) < maxCachedPiece
	if cacheable {
		// First this goroutine's own cache (no lock: the scratch belongs to one call at a
		// time, and sync.Pool keeps it on the same P), then the shared one.
		packed, ok := sc.local[s]
		if !ok {
			if packed, ok = m.cache.get(s); ok {
				sc.remember(s, packed)
			}
		}
		if ok {
			pos := int32(0)
			for _, p := range packed {
				n := int32(p & 0xff)
				out = append(out, bpeToken{int32(p >> 8), pos, pos + n})
				pos += n
			}
			return out
		}
	}
	if m.ignoreMerges {
		// Llama-3: a piece that is itself a token is emitted whole, whatever the merges say.
		var id int
		var ok bool
		if m.byteInput {
			sc.buf = sc.buf[:0]
			for i := 0; i < len(s); i++ {
				sc.buf = append(sc.buf, m.byteUnit[s[i]]...)
			}
			id, ok = m.vocab[string(sc.buf)] // no allocation: the conversion is only a map key
		} else {
			id, ok = m.vocab[s]
		}
		if ok {
			if cacheable {
				packed := []uint32{uint32(id)<<8 | uint32(len(s))}
				m.cache.put(s, packed)
				sc.remember(s, packed)
			}
			return append(out, bpeToken{int32(id), 0, int32(len(s))})
		}
	}
	m.initialSymbols(s, sc)
	m.mergeAll(sc)
	first := len(out)
	for i := int32(0); i >= 0 && int(i) < len(sc.syms); i = sc.syms[i].next {
		sy := &sc.syms[i]
		out = append(out, bpeToken{sy.id, sy.start, sy.end})
	}
	if cacheable {
		packed := make([]uint32, 0, len(out)-first)
		for _, t := range out[first:] {
			packed = append(packed, uint32(t.id)<<8|uint32(t.end-t.start))
		}
		m.cache.put(s, packed)
		sc.remember(s, packed)
	}
	return out
}

// localCap bounds the per-scratch cache; when full it starts over.
const localCap = 8192

func (sc *bpeScratch) remember(s string, packed []uint32) {
	if sc.local == nil || len(sc.local) >= localCap {
		sc.local = make(map[string][]uint32, 1024)
	}
	sc.local[string([]byte(s))] = packed
}

// initialSymbols splits s into characters (bytes in byteInput mode) and looks each up, the way
// HF's merge_word does, leaving a doubly linked list of symbols in sc.syms.
func (m *bpeModel) initialSymbols(s string, sc *bpeScratch) {
	sc.syms = sc.syms[:0]
	add := func(id, start, end int32) {
		n := int32(len(sc.syms))
		if n > 0 {
			sc.syms[n-1].next = n
		}
		sc.syms = append(sc.syms, symbol{id: id, start: start, end: end, prev: n - 1, next: -1})
	}
	plain := m.prefix == "" && m.suffix == ""
	unkID, unkStart, unkEnd := int32(-1), int32(0), int32(0)
	for i := 0; i < len(s); {
		var j int
		var key string
		id := -1
		if m.byteInput {
			j = i + 1
			if plain {
				id = int(m.byteID[s[i]])
			}
			key = m.byteUnit[s[i]]
		} else {
			r, size := utf8.DecodeRuneInString(s[i:])
			j = i + size
			key = s[i:j]
			if plain {
				if r < 1<<16 && (r != utf8.RuneError || size == 3) {
					id = int(m.runeID[r])
				} else if v, ok := m.vocab[key]; ok {
					id = v
				}
			}
		}
		if !plain {
			sc.buf = sc.buf[:0]
			if i > 0 {
				sc.buf = append(sc.buf, m.prefix...)
			}
			sc.buf = append(sc.buf, key...)
			if j == len(s) {
				sc.buf = append(sc.buf, m.suffix...)
			}
			if v, ok := m.vocab[string(sc.buf)]; ok {
				id = v
			}
			key = string(sc.buf)
		}
		if id >= 0 {
			if unkID >= 0 {
				add(unkID, unkStart, unkEnd)
				unkID = -1
			}
			add(int32(id), int32(i), int32(j))
			i = j
			continue
		}
		if m.byteFallback && m.fallbackOK(key) {
			// Each byte of the character becomes <0xNN>; HF gives each a length of one byte.
			for k := 0; k < len(key); k++ {
				st := min(int32(i+k), int32(j))
				en := min(int32(i+k+1), int32(j))
				if k == len(key)-1 {
					en = int32(j)
				}
				add(m.fallbackIDs[key[k]], st, en)
			}
			i = j
			continue
		}
		if m.unkID >= 0 {
			switch {
			case unkID >= 0 && m.fuseUnk:
				unkEnd = int32(j)
			case unkID >= 0:
				add(unkID, unkStart, unkEnd)
				unkStart, unkEnd = int32(i), int32(j)
			default:
				unkID, unkStart, unkEnd = int32(m.unkID), int32(i), int32(j)
			}
		}
		i = j
	}
	if unkID >= 0 {
		add(unkID, unkStart, unkEnd)
	}
}

func (m *bpeModel) fallbackOK(key string) bool {
	for k := 0; k < len(key); k++ {
		if m.fallbackIDs[key[k]] < 0 {
			return false
		}
	}
	return true
}

func (m *bpeModel) pairRank(a, b int32) uint64 {
	return m.merges.get(uint64(uint32(a))<<32 | uint64(uint32(b)))
}

// mergeTable is an open-addressing hash table from packed pair to packed rank and id. The
// merge loop does one lookup per adjacent pair after every merge, and Go's general map spent
// twice as long per lookup as this flat table with one multiply for a hash and linear probing
// (BenchmarkEncode/gemma3, whose long pieces are nearly all merging).
type mergeTable struct {
	keys  []uint64 // emptyKey where free; ids are < 2^31, so a real key never equals it
	vals  []uint64
	shift uint
}

const emptyKey = math.MaxUint64

func newMergeTable(n int) mergeTable {
	size, shift := 16, uint(60)
	for size < 2*n {
		size <<= 1
		shift--
	}
	t := mergeTable{keys: make([]uint64, size), vals: make([]uint64, size), shift: shift}
	for i := range t.keys {
		t.keys[i] = emptyKey
	}
	return t
}

func (t *mergeTable) slot(k uint64) uint64 { return (k * 0x9E3779B97F4A7C15) >> t.shift }

// put inserts or replaces (a later duplicate merge replaces the earlier, as in HF).
func (t *mergeTable) put(k, v uint64) {
	mask := uint64(len(t.keys) - 1)
	for i := t.slot(k); ; i = (i + 1) & mask {
		if t.keys[i] == emptyKey || t.keys[i] == k {
			t.keys[i], t.vals[i] = k, v
			return
		}
	}
}

// get returns the value for k, or noPair.
func (t *mergeTable) get(k uint64) uint64 {
	mask := uint64(len(t.keys) - 1)
	for i := t.slot(k); ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			return t.vals[i]
		case emptyKey:
			return noPair
		}
	}
}

// linearMax is the symbol count up to which mergeAll scans for the best pair instead of
// keeping a heap. Most pieces are a few characters long; for them one pass over a small
// array is cheaper than heap pushes and stale-entry pops (the same reasoning as tiktoken's
// byte_pair_merge). Long pieces (runs of spaces, long words) would be quadratic, so they
// use the heap.
const linearMax = 48

// mergeAll applies merges by rank until none applies. HF pops (rank, position) from a
// min-heap and skips stale entries; since a merged token's text fixes the pair that made it,
// the result is the same as repeatedly merging the lowest-ranked adjacent pair, leftmost first.
func (m *bpeModel) mergeAll(sc *bpeScratch) {
	n := len(sc.syms)
	if n < 2 {
		return
	}
	if n > linearMax {
		m.mergeHeap(sc)
		return
	}
	syms := sc.syms
	if cap(sc.ranks) < n {
		sc.ranks = make([]uint64, n)
	}
	ranks := sc.ranks[:n]
	for i := 0; i < n-1; i++ {
		ranks[i] = m.pairRank(syms[i].id, syms[i+1].id)
	}
	ranks[n-1] = noPair
	for {
		best, bestRank := int32(-1), uint64(noPair)
		for i := int32(0); i >= 0; i = syms[i].next {
			if ranks[i] < bestRank { // rank in the high bits; strict < keeps the leftmost
				best, bestRank = i, ranks[i]
			}
		}
		if best < 0 {
			return
		}
		right := syms[best].next
		syms[best].id = int32(uint32(bestRank))
		syms[best].end = syms[right].end
		syms[best].next = syms[right].next
		if nx := syms[right].next; nx >= 0 {
			syms[nx].prev = best
			ranks[best] = m.pairRank(syms[best].id, syms[nx].id)
		} else {
			ranks[best] = noPair
		}
		if pv := syms[best].prev; pv >= 0 {
			ranks[pv] = m.pairRank(syms[pv].id, syms[best].id)
		}
	}
}

// mergeHeap is HF's merge_all for long pieces: a min-heap on (rank, position) with lazy
// deletion of entries whose pair no longer exists. An entry is one uint64, rank<<32|position,
// so ordering is a single compare. An entry is still valid when the pair now at its position
// has the same rank: a rank names one merge rule, hence one pair.
func (m *bpeModel) mergeHeap(sc *bpeScratch) {
	syms := sc.syms
	h := sc.heap[:0]
	push := func(v uint64) {
		h = append(h, v)
		i := len(h) - 1
		for i > 0 {
			p := (i - 1) / 2
			if h[p] <= v {
				break
			}
			h[i] = h[p]
			i = p
		}
		h[i] = v
	}
	pop := func() uint64 {
		top := h[0]
		last := h[len(h)-1]
		h = h[:len(h)-1]
		n := len(h)
		if n == 0 {
			return top
		}
		i := 0
		for {
			c := 2*i + 1
			if c >= n {
				break
			}
			if c+1 < n && h[c+1] < h[c] {
				c++
			}
			if last <= h[c] {
				break
			}
			h[i] = h[c]
			i = c
		}
		h[i] = last
		return top
	}
	entry := func(v uint64, pos int32) uint64 { return v>>32<<32 | uint64(uint32(pos)) }
	for i := 0; i+1 < len(syms); i++ {
		if v := m.pairRank(syms[i].id, syms[i+1].id); v != noPair {
			push(entry(v, int32(i)))
		}
	}
	for len(h) > 0 {
		top := pop()
		pos := int32(uint32(top))
		cur := &syms[pos]
		if cur.id < 0 || cur.next < 0 { // removed, or last
			continue
		}
		right := cur.next
		v := m.pairRank(cur.id, syms[right].id)
		if v == noPair || v>>32 != top>>32 {
			continue // stale entry
		}
		cur.id = int32(uint32(v))
		cur.end = syms[right].end
		cur.next = syms[right].next
		syms[right].id = -1 // removed
		syms[right].next = -1
		if cur.next >= 0 {
			syms[cur.next].prev = pos
			if v := m.pairRank(cur.id, syms[cur.next].id); v != noPair {
				push(entry(v, pos))
			}
		}
		if cur.prev >= 0 {
			if v := m.pairRank(syms[cur.prev].id, cur.id); v != noPair {
				push(entry(v, cur.prev))
			}
		}
	}
	sc.heap = h
}

// maxCachedPiece: pieces this long or longer skip the cache (HF's MAX_LENGTH); it also keeps
// each token length within the 8 bits the packed cache entries give it.
const maxCachedPiece = 256

// pieceCache remembers the tokens of pieces already seen, so the many repeated words of real
// text skip merging. It is sharded so concurrent encoders rarely contend for a lock, and each
// shard stops growing at a fixed size (like HF's cache, which stops inserting when full).
type pieceCache struct {
	shards [64]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]uint32 // id<<8 | byte length, per token
	_  [40]byte            // keep shards on separate cache lines
}

const shardCap = 2048

func shardOf(s string) int {
	h := uint(len(s))*0x9e37 ^ uint(s[0])*0x85eb ^ uint(s[len(s)-1])*0xc2b2
	if len(s) > 2 {
		h ^= uint(s[len(s)/2]) * 0x27d4
	}
	return int((h ^ h>>7) & 63)
}

func (c *pieceCache) get(s string) ([]uint32, bool) {
	sh := &c.shards[shardOf(s)]
	sh.mu.RLock()
	v, ok := sh.m[s]
	sh.mu.RUnlock()
	return v, ok
}

func (c *pieceCache) put(s string, v []uint32) {
	sh := &c.shards[shardOf(s)]
	sh.mu.Lock()
	if sh.m == nil {
		sh.m = make(map[string][]uint32, 256)
	}
	if len(sh.m) < shardCap {
		sh.m[string([]byte(s))] = v // copy: s may point into a large caller string
	}
	sh.mu.Unlock()
}
