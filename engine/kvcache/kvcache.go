// Package kvcache manages a paged KV cache: the cache memory is cut into fixed-size blocks
// of BlockSize token slots, and each sequence owns a list of block ids (its block table),
// so sequences of any length share one pool without fragmentation.
//
// Full blocks are also a prefix cache. A full block is named by a hash of its parent block's
// hash and its own token ids, so equal hashes mean equal whole prefixes. When a sequence
// frees its blocks, hashed ones stay findable until their slot is reused: a later prompt
// with the same prefix takes them back instead of recomputing them. Free blocks are reused
// least recently freed first (LRU), and a sequence frees its tail first, so the shared
// beginnings of prompts live longest.
//
// The Manager only does bookkeeping of block ids; the memory itself belongs to the model
// runner (model.PagedCache). It is not safe for concurrent use: the scheduler owns it.
package kvcache

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Hash names a full block: sha256 over the parent's hash and the block's token ids. A
// 256-bit hash makes a collision (which would silently hand a sequence another prompt's
// keys and values) out of the question.
type Hash [32]byte

// BlockHash returns the hash of a full block of tokens that follows the block parent
// (the zero Hash for the first block).
func BlockHash(parent Hash, tokens []int) Hash {
	h := sha256.New()
	h.Write(parent[:])
	var b [8]byte
	for _, t := range tokens {
		binary.LittleEndian.PutUint64(b[:], uint64(t))
		h.Write(b[:])
	}
	var out Hash
	h.Sum(out[:0])
	return out
}

// PrefixHashes returns the hashes of the full blocks of tokens, in order.
func PrefixHashes(tokens []int, blockSize int) []Hash {
	out := make([]Hash, 0, len(tokens)/blockSize)
	var parent Hash
	for i := 0; i+blockSize <= len(tokens); i += blockSize {
		parent = BlockHash(parent, tokens[i:i+blockSize])
		out = append(out, parent)
	}
	return out
}

const none = -1

type block struct {
	refs       int  // sequences holding the block
	hashed     bool // the block is full and findable by hash
	hash       Hash
	prev, next int // free-list links (none when not free)
	free       bool
}

// Manager hands out blocks and keeps the prefix cache.
type Manager struct {
	blockSize int
	blocks    []block
	cached    map[Hash]int // hash → block id, for hashed blocks (held or free)

	// The free list runs from the least recently freed block (head, reused first) to the
	// most recently freed (tail).
	head, tail int
	nfree      int

	// Prefix-cache statistics in tokens, as vLLM's prefix_cache_queries/hits count them.
	Queries, Hits int64
}

// New makes a manager of numBlocks blocks of blockSize tokens, all free.
func New(numBlocks, blockSize int) (*Manager, error) {
	if numBlocks <= 0 || blockSize <= 0 {
		return nil, fmt.Errorf("kvcache: %d blocks of %d tokens: both must be > 0", numBlocks, blockSize)
	}
	m := &Manager{blockSize: blockSize, blocks: make([]block, numBlocks), cached: map[Hash]int{}, head: none, tail: none}
	for i := range m.blocks {
		m.blocks[i] = block{prev: none, next: none}
		m.pushFree(i)
	}
	return m, nil
}

// BlockSize is the number of token slots per block.
func (m *Manager) BlockSize() int { return m.blockSize }

// NumBlocks is the total number of blocks.
func (m *Manager) NumBlocks() int { return len(m.blocks) }

// NumFree is the number of blocks no sequence holds (cached ones included: they can be
// reused at any time).
func (m *Manager) NumFree() int { return m.nfree }

// Usage is the fraction of blocks held by sequences, vLLM's kv_cache_usage_perc.
func (m *Manager) Usage() float64 { return 1 - float64(m.nfree)/float64(len(m.blocks)) }

// BlocksFor is the number of blocks that hold n tokens.
func (m *Manager) BlocksFor(n int) int { return (n + m.blockSize - 1) / m.blockSize }

// Lookup finds the longest run of cached full blocks at the start of tokens, takes a
// reference on each and returns them. At most limit tokens are matched: the caller passes
// one less than the prompt, since the last token must be computed to get logits.
func (m *Manager) Lookup(tokens []int, limit int) []int {
	n := min(len(tokens), limit)
	m.Queries += int64(n)
	var ids []int
	var parent Hash
	for i := 0; i+m.blockSize <= n; i += m.blockSize {
		parent = BlockHash(parent, tokens[i:i+m.blockSize])
		id, ok := m.cached[parent]
		if !ok {
			break
		}
		m.hold(id)
		ids = append(ids, id)
	}
	m.Hits += int64(len(ids) * m.blockSize)
	return ids
}

// Allocate appends fresh blocks to table until it holds n tokens and returns it. When too
// few blocks are free it changes nothing and returns ok == false.
func (m *Manager) Allocate(table []int, n int) (_ []int, ok bool) {
	need := m.BlocksFor(n) - len(table)
	if need <= 0 {
		return table, true
	}
	if need > m.nfree {
		return table, false
	}
	for range need {
		id := m.head
		m.removeFree(id)
		b := &m.blocks[id]
		if b.hashed { // evict the least recently freed cached block
			delete(m.cached, b.hash)
			b.hashed = false
		}
		b.refs = 1
		table = append(table, id)
	}
	return table, true
}

// Commit records that block id (the i-th of a sequence) is full and holds the tokens that
// hash to h, so that other prompts can find it. A block whose hash is already cached under
// another id stays private (its twin serves lookups).
func (m *Manager) Commit(id int, h Hash) {
	b := &m.blocks[id]
	if b.hashed {
		return
	}
	if _, dup := m.cached[h]; dup {
		return
	}
	b.hashed, b.hash = true, h
	m.cached[h] = id
}

// Free drops a sequence's reference on every block of table, last block first, so that
// the tail of a sequence is reused before the prefix it may share with others.
func (m *Manager) Free(table []int) {
	for i := len(table) - 1; i >= 0; i-- {
		id := table[i]
		b := &m.blocks[id]
		if b.refs <= 0 {
			panic(fmt.Sprintf("kvcache: block %d freed more often than held", id)) // a scheduler bug, never input
		}
		b.refs--
		if b.refs == 0 {
			m.pushFree(id)
		}
	}
}

// Refs is the number of sequences holding block id (for tests and leak checks).
func (m *Manager) Refs(id int) int { return m.blocks[id].refs }

// hold takes a reference on a cached block, taking it off the free list if it was free.
func (m *Manager) hold(id int) {
	b := &m.blocks[id]
	if b.refs == 0 {
		m.removeFree(id)
	}
	b.refs++
}

func (m *Manager) pushFree(id int) {
	b := &m.blocks[id]
	b.free, b.prev, b.next = true, m.tail, none
	if m.tail != none {
		m.blocks[m.tail].next = id
	} else {
		m.head = id
	}
	m.tail = id
	m.nfree++
}

func (m *Manager) removeFree(id int) {
	b := &m.blocks[id]
	if b.prev != none {
		m.blocks[b.prev].next = b.next
	} else {
		m.head = b.next
	}
	if b.next != none {
		m.blocks[b.next].prev = b.prev
	} else {
		m.tail = b.prev
	}
	b.free, b.prev, b.next = false, none, none
	m.nfree--
}
