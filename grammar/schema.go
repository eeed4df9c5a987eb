package grammar

import (
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
)

// Whitespace is where a JSON grammar lets whitespace appear between tokens.
type Whitespace int

const (
	// Compact allows none: {"a":1,"b":[2,3]}. The default, as in llama.cpp and XGrammar: a
	// small model given free whitespace may spend its tokens on it.
	Compact Whitespace = iota
	// Spaced puts one space after ':' and ',': {"a": 1, "b": [2, 3]}, as Python's json.dumps
	// and most chat models write JSON (the space is then forced, not a choice).
	Spaced
	// Pretty allows up to 20 whitespace bytes (space, tab, newline, return) between any two
	// tokens: indented, multi-line JSON.
	Pretty
)

// ParseWhitespace reads a Whitespace by name: compact, spaced or pretty.
func ParseWhitespace(s string) (Whitespace, error) {
	switch s {
	case "", "compact":
		return Compact, nil
	case "spaced":
		return Spaced, nil
	case "pretty":
		return Pretty, nil
	}
	return 0, fmt.Errorf("whitespace %q: want compact, spaced or pretty", s)
}

// Spec says what the output must be: exactly one of its fields is set.
type Spec struct {
	JSONSchema []byte   // a JSON Schema (see the package doc for the keywords supported)
	JSONObject bool     // any JSON object (OpenAI's response_format json_object)
	Choices    []string // exactly one of these strings
	Regex      string   // text matching this regular expression (the whole output)
}

// Options configure compilation.
type Options struct {
	Whitespace Whitespace
	Budget     Budget
}

// SchemaError is an invalid or unsupported schema: where (a JSON Pointer into the schema,
// "#" its root) and what.
type SchemaError struct {
	Path    string
	Keyword string
	Msg     string
}

func (e *SchemaError) Error() string { return "json schema " + e.Where() }

// Where is the error without its "json schema" prefix: `at #/properties/a: "minimum": ...`.
func (e *SchemaError) Where() string {
	if e.Keyword != "" {
		return fmt.Sprintf("at %s: %q: %s", e.Path, e.Keyword, e.Msg)
	}
	return fmt.Sprintf("at %s: %s", e.Path, e.Msg)
}

// Compile compiles a Spec into a Grammar.
func Compile(spec Spec, o Options) (*Grammar, error) {
	set := 0
	for _, b := range []bool{spec.JSONSchema != nil, spec.JSONObject, spec.Choices != nil, spec.Regex != ""} {
		if b {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("grammar: want exactly one of a JSON schema, json_object, choices or a regex (got %d)", set)
	}
	b := newBuilder(o.Budget)
	c := &schemaCompiler{b: b, ws: o.Whitespace, memo: map[*jval]int{}, refs: map[*jval]bool{}}
	var root int
	switch {
	case spec.JSONObject:
		root = b.define("root", seq(ref(c.generic("object")), c.trailing()))
		return b.compile(root, "json_object")
	case spec.Choices != nil:
		if len(spec.Choices) == 0 {
			return nil, fmt.Errorf("grammar: empty choice list")
		}
		var alts []*node
		for _, s := range spec.Choices {
			alts = append(alts, lit(s))
		}
		root = b.define("choice", alt(alts...))
		return b.compile(root, "choice")
	case spec.Regex != "":
		n, err := regexNode(spec.Regex, false)
		if err != nil {
			return nil, err
		}
		root = b.define("regex", n)
		return b.compile(root, "regex")
	}
	v, err := parseJSON(spec.JSONSchema)
	if err != nil {
		return nil, &SchemaError{Path: "#", Msg: err.Error()}
	}
	c.root = v
	body, err := c.schema(v, "#")
	if err != nil {
		return nil, err
	}
	root = b.define("root", seq(body, c.trailing()))
	return b.compile(root, "json schema")
}

type schemaCompiler struct {
	b    *builder
	root *jval
	ws   Whitespace
	memo map[*jval]int
	refs map[*jval]bool // $refs being followed, to refuse a cycle of bare references
}

// Separators and the whitespace around them, per Whitespace.
func (c *schemaCompiler) space() *node {
	if c.ws == Pretty {
		n := &node{op: opBytes}
		for _, s := range " \t\n\r" {
			n.set.add(byte(s))
		}
		return rep(n, 0, 20)
	}
	return empty
}

func (c *schemaCompiler) sep(ch byte) *node {
	switch c.ws {
	case Spaced:
		return seq(oneByte(ch), oneByte(' '))
	case Pretty:
		return seq(c.space(), oneByte(ch), c.space())
	}
	return oneByte(ch)
}

func (c *schemaCompiler) open(ch byte) *node  { return seq(oneByte(ch), c.space()) }
func (c *schemaCompiler) close(ch byte) *node { return seq(c.space(), oneByte(ch)) }

// trailing is what may follow the document: nothing, or for Pretty a final newline.
func (c *schemaCompiler) trailing() *node {
	if c.ws == Pretty {
		return opt(oneByte('\n'))
	}
	return empty
}

var annotations = map[string]bool{
	"title": true, "description": true, "$schema": true, "$id": true, "$comment": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
	"$defs": true, "definitions": true,
}

var keywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true, "enum": true, "const": true,
	"anyOf": true, "oneOf": true, "allOf": true, "$ref": true, "minLength": true,
	"maxLength": true, "pattern": true, "format": true, "minimum": true, "maximum": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true,
}

// schema returns a node matching the documents v allows: a call of v's rule, so that a
// schema used twice ($ref) is compiled once and may be recursive.
func (c *schemaCompiler) schema(v *jval, path string) (*node, error) {
	if id, ok := c.memo[v]; ok {
		return ref(id), nil
	}
	if v.kind == 'b' && v.b {
		return ref(c.generic("value")), nil
	}
	if r := v.get("$ref"); r != nil {
		if r.kind != 's' {
			return nil, &SchemaError{path, "$ref", "must be a string"}
		}
		for _, m := range v.obj {
			if m.key != "$ref" && !annotations[m.key] {
				return nil, &SchemaError{path, m.key, "beside $ref is not supported"}
			}
		}
		target, tpath, err := c.resolve(r.str, path)
		if err != nil {
			return nil, err
		}
		if c.refs[v] {
			return nil, &SchemaError{path, "$ref", "references only itself (a $ref cycle with no schema in it)"}
		}
		c.refs[v] = true
		defer delete(c.refs, v)
		return c.schema(target, tpath)
	}
	id, _ := c.b.rule(path)
	c.memo[v] = id
	body, err := c.body(v, path)
	if err != nil {
		return nil, err
	}
	c.b.rules[id] = body
	return ref(id), nil
}

func (c *schemaCompiler) resolve(r, from string) (*jval, string, error) {
	if r != "#" && !strings.HasPrefix(r, "#/") {
		return nil, "", &SchemaError{from, "$ref", fmt.Sprintf("%q: only references into this schema (#/...) are supported", r)}
	}
	v := c.root
	if r == "#" {
		return v, "#", nil
	}
	for _, part := range strings.Split(r[2:], "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		switch {
		case v.kind == 'o':
			v = v.get(part)
		case v.kind == 'a':
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v.arr) {
				v = nil
			} else {
				v = v.arr[i]
			}
		default:
			v = nil
		}
		if v == nil {
			return nil, "", &SchemaError{from, "$ref", fmt.Sprintf("%q points at nothing", r)}
		}
	}
	return v, r, nil
}

func (c *schemaCompiler) body(v *jval, path string) (*node, error) {
	if v.kind == 'b' {
		return nil, &SchemaError{path, "", "the schema false allows no document"}
	}
	if v.kind != 'o' {
		return nil, &SchemaError{path, "", "a schema must be an object or a boolean"}
	}
	for _, m := range v.obj {
		if !keywords[m.key] && !annotations[m.key] {
			return nil, &SchemaError{path, m.key, "unsupported keyword"}
		}
	}
	if cv := v.get("const"); cv != nil {
		var sb strings.Builder
		cv.encode(&sb)
		return lit(sb.String()), nil
	}
	if ev := v.get("enum"); ev != nil {
		if ev.kind != 'a' || len(ev.arr) == 0 {
			return nil, &SchemaError{path, "enum", "must be a non-empty array"}
		}
		var alts []*node
		for _, e := range ev.arr {
			var sb strings.Builder
			e.encode(&sb)
			alts = append(alts, lit(sb.String()))
		}
		return alt(alts...), nil
	}
	for _, kw := range []string{"anyOf", "oneOf"} {
		// oneOf is compiled as anyOf: the grammar cannot see that two branches overlap.
		if av := v.get(kw); av != nil {
			if av.kind != 'a' || len(av.arr) == 0 {
				return nil, &SchemaError{path, kw, "must be a non-empty array"}
			}
			var alts []*node
			for i, sub := range av.arr {
				n, err := c.schema(sub, fmt.Sprintf("%s/%s/%d", path, kw, i))
				if err != nil {
					return nil, err
				}
				alts = append(alts, n)
			}
			return alt(alts...), nil
		}
	}
	if av := v.get("allOf"); av != nil {
		if av.kind != 'a' || len(av.arr) != 1 {
			return nil, &SchemaError{path, "allOf", "only a single-schema allOf is supported"}
		}
		return c.schema(av.arr[0], path+"/allOf/0")
	}
	var types []string
	switch tv := v.get("type"); {
	case tv == nil:
		switch {
		case v.get("properties") != nil || v.get("additionalProperties") != nil || v.get("required") != nil:
			types = []string{"object"}
		case v.get("items") != nil || v.get("minItems") != nil || v.get("maxItems") != nil:
			types = []string{"array"}
		case v.get("minLength") != nil || v.get("maxLength") != nil || v.get("pattern") != nil || v.get("format") != nil:
			types = []string{"string"}
		case v.get("minimum") != nil || v.get("maximum") != nil:
			types = []string{"number"}
		default:
			return ref(c.generic("value")), nil
		}
	case tv.kind == 's':
		types = []string{tv.str}
	case tv.kind == 'a' && len(tv.arr) > 0:
		for _, t := range tv.arr {
			if t.kind != 's' {
				return nil, &SchemaError{path, "type", "must be a string or an array of strings"}
			}
			types = append(types, t.str)
		}
	default:
		return nil, &SchemaError{path, "type", "must be a string or an array of strings"}
	}
	var alts []*node
	for _, t := range types {
		n, err := c.typed(t, v, path)
		if err != nil {
			return nil, err
		}
		alts = append(alts, n)
	}
	return alt(alts...), nil
}

func (c *schemaCompiler) typed(t string, v *jval, path string) (*node, error) {
	switch t {
	case "null":
		return lit("null"), nil
	case "boolean":
		return alt(lit("true"), lit("false")), nil
	case "integer":
		return c.integer(v, path)
	case "number":
		for _, kw := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if v.get(kw) != nil {
				return nil, &SchemaError{path, kw, "bounds are supported on integers only"}
			}
		}
		return ref(c.generic("number")), nil
	case "string":
		return c.str(v, path)
	case "array":
		return c.array(v, path)
	case "object":
		return c.object(v, path)
	}
	return nil, &SchemaError{path, "type", fmt.Sprintf("unknown type %q", t)}
}

// generic returns the rule of an unconstrained JSON construct (value, object, array, string,
// number, integer), defined once and shared by every schema that uses it: one set of states
// means one set of cached masks.
func (c *schemaCompiler) generic(name string) int {
	id, isNew := c.b.rule("json:" + name)
	if !isNew {
		return id
	}
	var body *node
	switch name {
	case "value":
		body = alt(ref(c.generic("object")), ref(c.generic("array")), ref(c.generic("string")),
			ref(c.generic("number")), lit("true"), lit("false"), lit("null"))
	case "object":
		member := seq(ref(c.generic("string")), c.sep(':'), ref(c.generic("value")))
		body = seq(c.open('{'), opt(seq(member, star(seq(c.sep(','), member)))), c.close('}'))
	case "array":
		val := ref(c.generic("value"))
		body = seq(c.open('['), opt(seq(val, star(seq(c.sep(','), val)))), c.close(']'))
	case "string":
		body = seq(oneByte('"'), star(jsonChar()), oneByte('"'))
	case "number":
		digits := rep(byteRange('0', '9'), 1, -1)
		body = seq(intPart(),
			opt(seq(oneByte('.'), digits)),
			opt(seq(alt(oneByte('e'), oneByte('E')), opt(alt(oneByte('+'), oneByte('-'))), digits)))
	case "integer":
		body = intPart()
	default:
		panic("grammar: no generic " + name)
	}
	c.b.rules[id] = body
	return id
}

func intPart() *node {
	return seq(opt(oneByte('-')), alt(oneByte('0'), seq(byteRange('1', '9'), star(byteRange('0', '9')))))
}

// jsonChar is one character of a JSON string as it is written: any character from U+0020
// except `"` and `\`, in UTF-8, or an escape.
func jsonChar() *node {
	raw := alt(runeRange(0x20, 0x21), runeRange(0x23, 0x5B), runeRange(0x5D, 0x10FFFF))
	hex := &node{op: opBytes}
	hex.set.addRange('0', '9')
	hex.set.addRange('a', 'f')
	hex.set.addRange('A', 'F')
	esc := &node{op: opBytes}
	for _, b := range `"\/bfnrt` {
		esc.set.add(byte(b))
	}
	escape := seq(oneByte('\\'), alt(esc, seq(oneByte('u'), rep(hex, 4, 4))))
	return alt(raw, escape)
}

func (c *schemaCompiler) integer(v *jval, path string) (*node, error) {
	var lo, hi *big.Int
	bound := func(kw string, adj int64, isMin bool) error {
		bv := v.get(kw)
		if bv == nil {
			return nil
		}
		if bv.kind == 'b' && (kw == "exclusiveMinimum" || kw == "exclusiveMaximum") {
			return &SchemaError{path, kw, "the draft-4 boolean form is not supported; give the bound as a number"}
		}
		if bv.kind != 'n' {
			return &SchemaError{path, kw, "must be a number"}
		}
		r, ok := new(big.Rat).SetString(bv.num.String())
		if !ok {
			return &SchemaError{path, kw, "must be a number"}
		}
		// The tightest integer bound: ceil for a minimum, floor for a maximum.
		q := new(big.Int).Quo(r.Num(), r.Denom())
		if !r.IsInt() {
			if isMin && r.Sign() > 0 {
				q.Add(q, big.NewInt(1))
			}
			if !isMin && r.Sign() < 0 {
				q.Sub(q, big.NewInt(1))
			}
			adj = 0 // a fractional exclusive bound excludes nothing more
		}
		q.Add(q, big.NewInt(adj))
		if isMin && (lo == nil || q.Cmp(lo) > 0) {
			lo = q
		}
		if !isMin && (hi == nil || q.Cmp(hi) < 0) {
			hi = q
		}
		return nil
	}
	for _, b := range []struct {
		kw    string
		adj   int64
		isMin bool
	}{{"minimum", 0, true}, {"exclusiveMinimum", 1, true}, {"maximum", 0, false}, {"exclusiveMaximum", -1, false}} {
		if err := bound(b.kw, b.adj, b.isMin); err != nil {
			return nil, err
		}
	}
	if lo == nil && hi == nil {
		return ref(c.generic("integer")), nil
	}
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return nil, &SchemaError{path, "minimum", fmt.Sprintf("no integer lies between %v and %v", lo, hi)}
	}
	return intRange(lo, hi), nil
}

func (c *schemaCompiler) str(v *jval, path string) (*node, error) {
	minLen, maxLen, err := c.lengths(v, path, "minLength", "maxLength")
	if err != nil {
		return nil, err
	}
	pat, fmtv := v.get("pattern"), v.get("format")
	if pat != nil && fmtv != nil {
		return nil, &SchemaError{path, "pattern", "together with format is not supported"}
	}
	if (pat != nil || fmtv != nil) && (minLen > 0 || maxLen >= 0) {
		return nil, &SchemaError{path, "minLength", "together with pattern or format is not supported"}
	}
	if pat != nil {
		if pat.kind != 's' {
			return nil, &SchemaError{path, "pattern", "must be a string"}
		}
		n, err := regexNode(pat.str, true)
		if err != nil {
			return nil, &SchemaError{path, "pattern", err.Error()}
		}
		return seq(oneByte('"'), n, oneByte('"')), nil
	}
	if fmtv != nil {
		if fmtv.kind != 's' {
			return nil, &SchemaError{path, "format", "must be a string"}
		}
		n, ok := formats[fmtv.str]
		if !ok {
			names := make([]string, 0, len(formats))
			for k := range formats {
				names = append(names, k)
			}
			slices.Sort(names)
			return nil, &SchemaError{path, "format", fmt.Sprintf("%q is not supported (supported: %s)", fmtv.str, strings.Join(names, ", "))}
		}
		body, err := regexNode(n, true)
		if err != nil {
			panic(err)
		}
		return seq(oneByte('"'), body, oneByte('"')), nil
	}
	if minLen == 0 && maxLen < 0 {
		return ref(c.generic("string")), nil
	}
	id, isNew := c.b.rule(fmt.Sprintf("json:string{%d,%d}", minLen, maxLen))
	if isNew {
		c.b.rules[id] = seq(oneByte('"'), rep(jsonChar(), minLen, maxLen), oneByte('"'))
	}
	return ref(id), nil
}

// date is a calendar date (RFC 3339 full-date): days per month, February 29 in leap years
// only (divisible by 4, centuries by 400).
const date = `([0-9]{4}-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|[0-9]{4}-(0[469]|11)-(0[1-9]|[12][0-9]|30)|[0-9]{4}-02-(0[1-9]|1[0-9]|2[0-8])|([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29)`

// formats are the string formats supported, as patterns over the decoded string.
var formats = map[string]string{
	"date":      date,
	"time":      `([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])`,
	"date-time": date + `T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])`,
	"uuid":      `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`,
}

func (c *schemaCompiler) lengths(v *jval, path, minKw, maxKw string) (int, int, error) {
	get := func(kw string) (int, error) {
		bv := v.get(kw)
		if bv == nil {
			return -1, nil
		}
		n, err := strconv.Atoi(bv.num.String())
		if bv.kind != 'n' || err != nil || n < 0 {
			return 0, &SchemaError{path, kw, "must be a non-negative integer"}
		}
		return n, nil
	}
	lo, err := get(minKw)
	if err != nil {
		return 0, 0, err
	}
	hi, err := get(maxKw)
	if err != nil {
		return 0, 0, err
	}
	lo = max(lo, 0)
	if hi >= 0 && lo > hi {
		return 0, 0, &SchemaError{path, minKw, fmt.Sprintf("%d is above %s %d", lo, maxKw, hi)}
	}
	return lo, hi, nil
}

func (c *schemaCompiler) array(v *jval, path string) (*node, error) {
	if v.get("prefixItems") != nil {
		return nil, &SchemaError{path, "prefixItems", "unsupported keyword"}
	}
	lo, hi, err := c.lengths(v, path, "minItems", "maxItems")
	if err != nil {
		return nil, err
	}
	item := ref(c.generic("value"))
	if iv := v.get("items"); iv != nil {
		if item, err = c.schema(iv, path+"/items"); err != nil {
			return nil, err
		}
	}
	if hi == 0 {
		return seq(c.open('['), c.close(']')), nil
	}
	more := rep(seq(c.sep(','), item), max(lo-1, 0), hi-1)
	if hi < 0 {
		more = rep(seq(c.sep(','), item), max(lo-1, 0), -1)
	}
	elems := seq(item, more)
	if lo == 0 {
		elems = opt(elems)
	}
	return seq(c.open('['), elems, c.close(']')), nil
}

func (c *schemaCompiler) object(v *jval, path string) (*node, error) {
	props := v.get("properties")
	if props != nil && props.kind != 'o' {
		return nil, &SchemaError{path, "properties", "must be an object"}
	}
	required := map[string]bool{}
	if rv := v.get("required"); rv != nil {
		if rv.kind != 'a' {
			return nil, &SchemaError{path, "required", "must be an array of strings"}
		}
		for _, r := range rv.arr {
			if r.kind != 's' {
				return nil, &SchemaError{path, "required", "must be an array of strings"}
			}
			if props.get(r.str) == nil {
				return nil, &SchemaError{path, "required", fmt.Sprintf("%q is required but not in properties", r.str)}
			}
			required[r.str] = true
		}
	}
	// Extra members: allowed by additionalProperties true or a schema, and when an object
	// schema names no properties at all; an absent additionalProperties beside properties
	// means none (the strict reading OpenAI's strict mode and XGrammar take).
	var extra *node
	switch ap := v.get("additionalProperties"); {
	case ap == nil && props == nil:
		extra = ref(c.generic("value"))
	case ap == nil, ap.kind == 'b' && !ap.b:
	case ap.kind == 'b' && ap.b:
		extra = ref(c.generic("value"))
	default:
		n, err := c.schema(ap, path+"/additionalProperties")
		if err != nil {
			return nil, err
		}
		extra = n
	}
	type prop struct {
		kv       *node
		required bool
	}
	var ps []prop
	if props != nil {
		for _, m := range props.obj {
			vn, err := c.schema(m.val, path+"/properties/"+pointerEscape(m.key))
			if err != nil {
				return nil, err
			}
			var sb strings.Builder
			writeJSONString(&sb, m.key)
			ps = append(ps, prop{seq(lit(sb.String()), c.sep(':'), vn), required[m.key]})
		}
	}
	var extras func(first bool) *node
	extras = func(first bool) *node {
		if extra == nil {
			return empty
		}
		kv := seq(ref(c.generic("string")), c.sep(':'), extra)
		if first {
			return opt(seq(kv, star(seq(c.sep(','), kv))))
		}
		return star(seq(c.sep(','), kv))
	}
	// members(i, first): the members from the i-th on, first if none was written yet. A
	// property that may be left out doubles the ways on; each (i, first) is one rule so the
	// grammar stays linear in the number of properties.
	memo := map[[2]int]int{}
	var members func(i int, first bool) *node
	members = func(i int, first bool) *node {
		if i == len(ps) {
			return extras(first)
		}
		with := func() *node {
			if first {
				return seq(ps[i].kv, members(i+1, false))
			}
			return seq(c.sep(','), ps[i].kv, members(i+1, false))
		}
		if ps[i].required {
			return with()
		}
		k := [2]int{i, 0}
		if first {
			k[1] = 1
		}
		if id, ok := memo[k]; ok {
			return ref(id)
		}
		id, _ := c.b.rule(fmt.Sprintf("%s#members%d,%v", path, i, first))
		memo[k] = id
		c.b.rules[id] = alt(with(), members(i+1, first))
		return ref(id)
	}
	return seq(c.open('{'), members(0, true), c.close('}')), nil
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
