package engine

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"
	"time"

	"github.com/tokenwise/tokenwise/grammar"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// Grammars compiles output grammars (structured output) for one tokenizer and keeps the
// compiled tables, keyed by a hash of what was compiled, so that a schema sent with every
// request is compiled once and its mask cache is shared by all of them. Safe for concurrent
// use.
type Grammars struct {
	tok   *tokenizer.Tokenizer
	once  sync.Once
	vocab *grammar.Vocab

	mu    sync.Mutex
	cache map[[32]byte]*compiled
	order [][32]byte // oldest first, for the bound
	max   int

	// OnCompile, if set, is told how long each compilation took (metrics).
	OnCompile func(time.Duration)
}

// NewGrammars returns a cache for tok holding up to max compiled grammars (0: 256).
func NewGrammars(tok *tokenizer.Tokenizer, max int) *Grammars {
	if max <= 0 {
		max = 256
	}
	return &Grammars{tok: tok, cache: map[[32]byte]*compiled{}, max: max}
}

// Vocab is the tokenizer's vocabulary as grammars see it: each token's bytes, none for
// special tokens (a grammar never allows them; end of sequence is allowed by id).
func (g *Grammars) Vocab() *grammar.Vocab {
	g.once.Do(func() {
		toks := make([][]byte, g.tok.VocabSize())
		for id := range toks {
			if !g.tok.IsSpecial(id) {
				toks[id] = g.tok.TokenBytes(id)
			}
		}
		g.vocab = grammar.NewVocab(toks)
	})
	return g.vocab
}

// Compile returns the table of spec under o, compiling it unless cached; concurrent calls
// for one spec compile it once. Errors are the spec's (grammar.SchemaError,
// grammar.ErrBudget, a vocabulary that cannot spell it) and are not cached.
func (g *Grammars) Compile(spec grammar.Spec, o grammar.Options) (*grammar.Table, error) {
	key := specKey(spec, o)
	g.mu.Lock()
	e, ok := g.cache[key]
	if !ok {
		e = &compiled{done: make(chan struct{})}
		if len(g.order) >= g.max {
			delete(g.cache, g.order[0])
			g.order = g.order[1:]
		}
		g.cache[key] = e
		g.order = append(g.order, key)
	}
	g.mu.Unlock()
	if ok {
		<-e.done
		return e.t, e.err
	}
	start := time.Now()
	gr, err := grammar.Compile(spec, o)
	if err == nil {
		e.t, err = grammar.NewTable(gr, g.Vocab())
	}
	e.err = err
	close(e.done)
	if err != nil {
		g.mu.Lock()
		if g.cache[key] == e {
			delete(g.cache, key)
			g.order = slices.DeleteFunc(g.order, func(k [32]byte) bool { return k == key })
		}
		g.mu.Unlock()
		return nil, err
	}
	if g.OnCompile != nil {
		g.OnCompile(time.Since(start))
	}
	return e.t, nil
}

// compiled is a cache entry: done is closed once t or err is set.
type compiled struct {
	done chan struct{}
	t    *grammar.Table
	err  error
}

func specKey(spec grammar.Spec, o grammar.Options) [32]byte {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	field(spec.JSONSchema)
	if spec.JSONObject {
		field([]byte{1})
	} else {
		field(nil)
	}
	field([]byte{byte(len(spec.Choices) >> 8), byte(len(spec.Choices))})
	for _, c := range spec.Choices {
		field([]byte(c))
	}
	field([]byte(spec.Regex))
	field([]byte{byte(o.Whitespace)})
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(o.Budget.MaxStates))
	binary.LittleEndian.PutUint64(b[8:], uint64(o.Budget.Timeout))
	field(b[:])
	var key [32]byte
	h.Sum(key[:0])
	return key
}
