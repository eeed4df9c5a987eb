// Package grammar constrains generation to a formal language — a JSON Schema, any JSON
// object, a list of choices or a regular expression — one token at a time: for the parse
// state after the text so far, it says which vocabulary tokens keep the text a prefix of some
// valid document (the mask), and which text is forced next (jump-forward).
//
// It sits below the engine and knows nothing of models: a Vocab is the bytes of each token
// (byte-level BPE, SentencePiece with byte fallback, merged specialized tokens and added
// tokens alike), so a token may span several JSON tokens or end inside a UTF-8 character.
//
// Design. A Spec compiles to a Grammar: rules whose bodies are regular expressions over bytes
// and calls of other rules, each rule determinized into one automaton (compile.go). Parsing is
// a pushdown automaton over a small set of stacks (parse.go). A Table pairs a Grammar with a
// Vocab and caches, per automaton state, which tokens that state decides alone (table.go, the
// idea of XGrammar's adaptive token mask cache); a Matcher is one sequence's parse state
// (matcher.go). Compilation is bounded by a Budget (states, time).
//
// JSON Schema support: type (object, array, string, number, integer, boolean, null, and
// arrays of them), properties (generated in the schema's order), required,
// additionalProperties (false, true or a schema; absent beside properties means false, as
// in OpenAI's strict mode), items, minItems, maxItems, enum, const, anyOf, oneOf (compiled as
// anyOf: overlap between branches is not excluded), a single-schema allOf, $ref into the
// same document with $defs/definitions (recursion included), minLength, maxLength, pattern
// (RE2 syntax, see regexNode; the whole string must match), format date, time, date-time and
// uuid, and minimum, maximum, exclusiveMinimum, exclusiveMaximum on integers. Annotations
// (title, description, default, examples, ...) are ignored; any other keyword is an error
// naming it and its JSON Pointer path. Strings are generated with one spelling per
// character: `"` and `\` escaped, control characters as \b \f \n \r \t or \u00XX, all other
// characters as UTF-8 (no \u escapes); numbers as JSON writes them.
//
// Whitespace between tokens follows Options.Whitespace: Compact (none, the default), Spaced
// (one space after ':' and ',', as Python's json.dumps) or Pretty (up to 20 whitespace bytes anywhere).
package grammar
