package grammar

// The parser is a pushdown automaton run on a set of stacks (a grammar may be ambiguous for a
// while: `1` may end a number or go on to `12`). A stack is its top state, which reads the
// next byte, and a persistent linked list of return states below it; stacks that share a
// history share its frames, so copying a parse state is copying a slice of small values.

// frame is a return state: where to continue when the rule called from it finishes.
type frame struct {
	pos  int32
	next *frame
}

// stack is one parse: top is a state that reads bytes; rest are its return states (nil: the
// root rule, whose end is the end of the document).
type stack struct {
	top  int32
	rest *frame
}

// outside stands for the unknown frames below a state when the mask cache studies a state on
// its own (see Table): a parse that returns into it has left what the state alone decides.
var outside = &frame{pos: -1}

// expandLimit bounds the calls made without reading a byte (a guard: compile refuses left
// recursion, so only a pathologically deep grammar reaches it).
const expandLimit = 10_000

type expansion struct {
	complete bool // some parse finished the document
	left     bool // some parse returned into outside
	calls    int
}

// expand adds to out the byte-reading stacks reached from state pos over rest without
// reading: the state itself if it reads bytes, every rule it may call, and the return if it
// is final.
func (g *Grammar) expand(pos int32, rest *frame, out []stack, x *expansion) []stack {
	st := &g.states[pos]
	if st.hasBytes {
		out = addStack(out, stack{pos, rest})
	}
	for _, e := range st.refs {
		x.calls++
		if x.calls > expandLimit {
			break
		}
		r := rest
		if !g.states[e.to].tail { // a call in tail position needs no return frame
			r = &frame{e.to, rest}
		}
		out = g.expand(g.ruleStart[e.rule], r, out, x)
	}
	if st.final {
		switch rest {
		case nil:
			x.complete = true
		case outside:
			x.left = true
		default:
			out = g.expand(rest.pos, rest.next, out, x)
		}
	}
	return out
}

// addStack appends s unless an equal stack is there: equal top and equal frames, compared by
// pointer first (shared history) and then by value.
func addStack(out []stack, s stack) []stack {
	for _, o := range out {
		if o.top == s.top && sameFrames(o.rest, s.rest) {
			return out
		}
	}
	return append(out, s)
}

func sameFrames(a, b *frame) bool {
	for a != b {
		if a == nil || b == nil || a.pos != b.pos {
			return false
		}
		a, b = a.next, b.next
	}
	return true
}

// step reads byte c from every stack in set, appending the stacks that survive to out.
func (g *Grammar) step(set []stack, c byte, out []stack, x *expansion) []stack {
	cls := int(g.classOf[c])
	for _, s := range set {
		to := g.trans[int(s.top)*g.nclass+cls]
		if to >= 0 {
			out = g.expand(to, s.rest, out, x)
		}
	}
	return out
}

// initial is the parse state before any byte: the root rule's start, expanded.
func (g *Grammar) initial() ([]stack, bool) {
	var x expansion
	set := g.expand(g.ruleStart[g.root], nil, nil, &x)
	return set, x.complete
}

// Accepts reports whether text is a complete document of the grammar.
func (g *Grammar) Accepts(text []byte) bool {
	ok, complete := g.prefix(text)
	return ok && complete
}

// Prefix reports whether text is a prefix of some document (or one).
func (g *Grammar) Prefix(text []byte) bool {
	ok, _ := g.prefix(text)
	return ok
}

// prefix reports whether text is a prefix of some document, and whether it is one.
func (g *Grammar) prefix(text []byte) (ok, complete bool) {
	set, complete := g.initial()
	st, ok := g.advance(parseState{set, complete}, text)
	return ok, st.complete
}

// parseState is a parse after some text: its stacks, and whether the text is a document.
type parseState struct {
	stacks   []stack
	complete bool
}

// advance reads text from st; false if some byte has no parse.
func (g *Grammar) advance(st parseState, text []byte) (parseState, bool) {
	set, complete := st.stacks, st.complete
	for _, c := range text {
		var x expansion
		set = g.step(set, c, nil, &x)
		complete = x.complete
		if len(set) == 0 && !complete {
			return parseState{}, false
		}
	}
	return parseState{set, complete}, true
}
