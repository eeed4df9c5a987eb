package grammar

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Grammar is a compiled grammar: a set of rules, each one automaton (a DFA) whose edges read
// a byte or call another rule. A document is valid when the root rule's automaton reaches a
// final state with nothing left on the call stack. It is immutable and safe to share between
// goroutines; a Matcher (one per sequence) holds the parse state.
type Grammar struct {
	classOf   [256]uint8 // byte -> byte class (bytes no rule tells apart share a class)
	nclass    int
	classSize []int  // bytes in each class
	classByte []byte // one byte of each class
	states    []state
	trans     []int32 // states × classes: the state a byte leads to, -1 none
	ruleStart []int32
	ruleName  []string
	root      int
	source    string // what it was compiled from, for errors
}

type state struct {
	final    bool
	hasBytes bool
	tail     bool      // final with no edges: a call that returns here can return at once
	forced   int16     // the only byte this state reads, -1 if none or several
	refs     []refEdge // rule calls: run rule, continue at to
	rule     int32
}

type refEdge struct{ rule, to int32 }

// Budget bounds compilation: a schema that would need more states, or more time, is refused
// with an error instead of a hang (deep anyOf nesting, huge bounded repetitions).
type Budget struct {
	MaxStates int           // automaton states over all rules; 0: 200,000
	Timeout   time.Duration // 0: 2 s
}

// ErrBudget is wrapped by the error of a grammar that exceeds its Budget.
var ErrBudget = errors.New("grammar exceeds its compile budget")

// builder collects rules before compilation.
type builder struct {
	rules  []*node
	names  []string
	byName map[string]int
	budget Budget
	start  time.Time
	nstate int
}

func newBuilder(b Budget) *builder {
	if b.MaxStates <= 0 {
		b.MaxStates = 200_000
	}
	if b.Timeout <= 0 {
		b.Timeout = 2 * time.Second
	}
	return &builder{byName: map[string]int{}, budget: b, start: time.Now()}
}

// rule returns the id of the rule called name, reserving it (body to follow) if new.
func (b *builder) rule(name string) (id int, isNew bool) {
	if id, ok := b.byName[name]; ok {
		return id, false
	}
	b.rules = append(b.rules, nil)
	b.names = append(b.names, name)
	b.byName[name] = len(b.rules) - 1
	return len(b.rules) - 1, true
}

func (b *builder) define(name string, body *node) int {
	id, _ := b.rule(name)
	b.rules[id] = body
	return id
}

func ref(id int) *node { return &node{op: opRef, ref: id} }

func (b *builder) check() error {
	if time.Since(b.start) > b.budget.Timeout {
		return fmt.Errorf("%w: compiling took over %v", ErrBudget, b.budget.Timeout)
	}
	if b.nstate > b.budget.MaxStates {
		return fmt.Errorf("%w: over %d automaton states", ErrBudget, b.budget.MaxStates)
	}
	return nil
}

// nfa is one rule's Thompson automaton, before determinization.
type nfa struct {
	eps   [][]int32
	bytes [][]nbyte
	refs  [][]refEdge
	b     *builder
	err   error
}

type nbyte struct {
	set byteSet
	to  int32
}

func (a *nfa) newState() int32 {
	a.eps = append(a.eps, nil)
	a.bytes = append(a.bytes, nil)
	a.refs = append(a.refs, nil)
	a.b.nstate++
	if a.err == nil && a.b.nstate&1023 == 0 {
		a.err = a.b.check()
	}
	return int32(len(a.eps) - 1)
}

// build adds n's automaton starting at from and returns its end state.
func (a *nfa) build(n *node, from int32) int32 {
	if a.err != nil {
		return from
	}
	switch n.op {
	case opEmpty:
		return from
	case opBytes:
		t := a.newState()
		a.bytes[from] = append(a.bytes[from], nbyte{n.set, t})
		return t
	case opRef:
		t := a.newState()
		a.refs[from] = append(a.refs[from], refEdge{int32(n.ref), t})
		return t
	case opSeq:
		cur := from
		for _, s := range n.subs {
			cur = a.build(s, cur)
		}
		return cur
	case opAlt:
		end := a.newState()
		for _, s := range n.subs {
			st := a.newState()
			a.eps[from] = append(a.eps[from], st)
			e := a.build(s, st)
			a.eps[e] = append(a.eps[e], end)
		}
		return end
	case opRep:
		cur := from
		for i := 0; i < n.min; i++ {
			cur = a.build(n.subs[0], cur)
		}
		if n.max < 0 {
			loop := a.newState()
			a.eps[cur] = append(a.eps[cur], loop)
			e := a.build(n.subs[0], loop)
			a.eps[e] = append(a.eps[e], loop)
			return loop
		}
		end := a.newState()
		for i := n.min; i < n.max; i++ {
			a.eps[cur] = append(a.eps[cur], end)
			cur = a.build(n.subs[0], cur)
		}
		a.eps[cur] = append(a.eps[cur], end)
		return end
	}
	panic("grammar: unknown op")
}

// compile determinizes every rule and lays the automata out in one table.
func (b *builder) compile(root int, source string) (*Grammar, error) {
	for id, body := range b.rules {
		if body == nil {
			return nil, fmt.Errorf("grammar: rule %q is used but never defined", b.names[id])
		}
	}
	g := &Grammar{root: root, ruleName: b.names, source: source}
	g.partition(b.rules)
	for id, body := range b.rules {
		a := &nfa{b: b}
		start := a.newState()
		end := a.build(body, start)
		if a.err != nil {
			return nil, a.err
		}
		if err := g.determinize(a, start, end, int32(id), b); err != nil {
			return nil, err
		}
	}
	for i := range g.states {
		s := &g.states[i]
		s.tail = s.final && !s.hasBytes && len(s.refs) == 0
		s.forced = -1
		if s.hasBytes {
			only, n := -1, 0
			for c := 0; c < g.nclass; c++ {
				if g.trans[i*g.nclass+c] >= 0 {
					n += g.classSize[c]
					only = int(g.classByte[c])
				}
			}
			if n == 1 {
				s.forced = int16(only)
			}
		}
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	return g, nil
}

// partition splits the 256 byte values into classes no rule tells apart, so each state's row
// has one entry per class (a JSON grammar has about 30) instead of 256.
func (g *Grammar) partition(rules []*node) {
	sets := map[byteSet]bool{}
	var walk func(n *node)
	walk = func(n *node) {
		if n.op == opBytes {
			sets[n.set] = true
		}
		for _, s := range n.subs {
			walk(s)
		}
	}
	for _, r := range rules {
		walk(r)
	}
	var class [256]int
	n := 1
	for set := range sets {
		remap := map[[2]int]int{}
		next := 0
		for b := 0; b < 256; b++ {
			k := [2]int{class[b], 0}
			if set.has(byte(b)) {
				k[1] = 1
			}
			id, ok := remap[k]
			if !ok {
				id = next
				remap[k] = id
				next++
			}
			class[b] = id
		}
		n = next
	}
	g.nclass = n
	g.classSize = make([]int, n)
	g.classByte = make([]byte, n)
	for b := 255; b >= 0; b-- {
		g.classOf[b] = uint8(class[b])
		g.classSize[class[b]]++
		g.classByte[class[b]] = byte(b)
	}
}

func (g *Grammar) determinize(a *nfa, start, end int32, rule int32, b *builder) error {
	closure := func(set []int32) []int32 {
		seen := map[int32]bool{}
		stack := slices.Clone(set)
		var out []int32
		for len(stack) > 0 {
			s := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if seen[s] {
				continue
			}
			seen[s] = true
			out = append(out, s)
			stack = append(stack, a.eps[s]...)
		}
		slices.Sort(out)
		return out
	}
	key := func(set []int32) string {
		var sb strings.Builder
		for _, s := range set {
			sb.WriteString(strconv.Itoa(int(s)))
			sb.WriteByte(',')
		}
		return sb.String()
	}
	base := int32(len(g.states))
	ids := map[string]int32{}
	var sets [][]int32
	add := func(set []int32) int32 {
		k := key(set)
		if id, ok := ids[k]; ok {
			return id
		}
		id := base + int32(len(sets))
		ids[k] = id
		sets = append(sets, set)
		g.states = append(g.states, state{rule: rule})
		g.trans = append(g.trans, make([]int32, g.nclass)...)
		b.nstate++
		return id
	}
	g.ruleStart = append(g.ruleStart, add(closure([]int32{start})))
	for i := 0; i < len(sets); i++ {
		if i&255 == 0 {
			if err := b.check(); err != nil {
				return err
			}
		}
		id := base + int32(i)
		set := sets[i]
		st := state{rule: rule}
		for c := 0; c < g.nclass; c++ {
			rb := g.classByte[c]
			var to []int32
			for _, s := range set {
				for _, e := range a.bytes[s] {
					if e.set.has(rb) {
						to = append(to, e.to)
					}
				}
			}
			t := int32(-1)
			if len(to) > 0 {
				t = add(closure(to))
				st.hasBytes = true
			}
			g.trans[int(id)*g.nclass+c] = t
		}
		byRule := map[int32][]int32{}
		var order []int32
		for _, s := range set {
			if s == end {
				st.final = true
			}
			for _, e := range a.refs[s] {
				if _, ok := byRule[e.rule]; !ok {
					order = append(order, e.rule)
				}
				byRule[e.rule] = append(byRule[e.rule], e.to)
			}
		}
		for _, r := range order {
			st.refs = append(st.refs, refEdge{r, add(closure(byRule[r]))})
		}
		g.states[id] = st
	}
	return nil
}

// checkLeftRecursion refuses a rule that can call itself before reading a byte: the parser
// would expand it forever.
func (g *Grammar) checkLeftRecursion() error {
	nullable := make([]bool, len(g.ruleStart))
	// A rule is nullable if its start reaches a final state through calls of nullable rules.
	for changed := true; changed; {
		changed = false
		for r := range g.ruleStart {
			if !nullable[r] && g.reachesFinal(g.ruleStart[r], nullable) {
				nullable[r], changed = true, true
			}
		}
	}
	for r := range g.ruleStart {
		seen := map[int32]bool{}
		var visit func(s int32) bool
		visit = func(s int32) bool {
			if seen[s] {
				return false
			}
			seen[s] = true
			for _, e := range g.states[s].refs {
				if int(e.rule) == r {
					return true
				}
				if visit(g.ruleStart[e.rule]) {
					return true
				}
				if nullable[e.rule] && visit(e.to) {
					return true
				}
			}
			return false
		}
		if visit(g.ruleStart[r]) {
			return fmt.Errorf("grammar: rule %q calls itself before reading anything (left recursion)", g.ruleName[r])
		}
	}
	return nil
}

func (g *Grammar) reachesFinal(s int32, nullable []bool) bool {
	seen := map[int32]bool{}
	var visit func(s int32) bool
	visit = func(s int32) bool {
		if seen[s] {
			return false
		}
		seen[s] = true
		if g.states[s].final {
			return true
		}
		for _, e := range g.states[s].refs {
			if nullable[e.rule] && visit(e.to) {
				return true
			}
		}
		return false
	}
	return visit(s)
}

// States is the number of automaton states over all rules (a measure of its size).
func (g *Grammar) States() int { return len(g.states) }
