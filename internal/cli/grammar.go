package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/grammar"
)

// grammarFlags are the structured-output flags.
type grammarFlags struct {
	schema     string
	kind       string
	whitespace string
	noJump     bool
}

func addGrammarFlags(fl *pflag.FlagSet, g *grammarFlags) {
	fl.StringVar(&g.schema, "json-schema", "", "constrain the output to a JSON document of this JSON Schema file (see the grammar package for the keywords)")
	fl.StringVar(&g.kind, "grammar", "", "constrain the output: json (any JSON object), regex:PATTERN (the whole output matches), or choice:A|B|C")
	fl.StringVar(&g.whitespace, "whitespace", "compact", "whitespace the JSON may have: compact (none), spaced (one space after : and ,) or pretty (indented)")
	fl.BoolVar(&g.noJump, "no-jump-forward", false, "sample the text the grammar forces instead of appending it in one pass (for comparison)")
}

// table compiles the flags' grammar for tok (nil when none is set).
func (g grammarFlags) table(gs *engine.Grammars) (*grammar.Table, error) {
	ws, err := grammar.ParseWhitespace(g.whitespace)
	if err != nil {
		return nil, fmt.Errorf("--whitespace: %w", err)
	}
	var spec grammar.Spec
	flag := "--grammar"
	switch {
	case g.schema != "" && g.kind != "":
		return nil, fmt.Errorf("--json-schema and --grammar: give one")
	case g.schema != "":
		flag = "--json-schema " + g.schema
		b, err := os.ReadFile(g.schema)
		if err != nil {
			return nil, fmt.Errorf("--json-schema: %w", err)
		}
		spec.JSONSchema = b
	case g.kind == "":
		return nil, nil
	case g.kind == "json":
		spec.JSONObject = true
	case strings.HasPrefix(g.kind, "regex:"):
		spec.Regex = strings.TrimPrefix(g.kind, "regex:")
	case strings.HasPrefix(g.kind, "choice:"):
		spec.Choices = strings.Split(strings.TrimPrefix(g.kind, "choice:"), "|")
	default:
		return nil, fmt.Errorf("--grammar %q: want json, regex:PATTERN or choice:A|B|C", g.kind)
	}
	t, err := gs.Compile(spec, grammar.Options{Whitespace: ws})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return t, nil
}
