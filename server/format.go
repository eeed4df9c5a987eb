package server

import (
	"errors"

	"github.com/tokenwise/tokenwise/grammar"
)

// responseGrammar compiles a request's response_format (nil or type text: none). Compiled
// grammars are kept by hash of the schema (engine.Grammars), so a schema sent with every
// request is compiled once. A schema the grammar cannot take answers 400 naming the
// keyword and its place in the schema.
func (s *Server) responseGrammar(f *responseFormat) (*grammar.Table, *apiError) {
	if f == nil {
		return nil, nil
	}
	ws, err := grammar.ParseWhitespace(f.Whitespace)
	if err != nil {
		return nil, badRequest("response_format.whitespace", "response_format.whitespace %q: want compact, spaced or pretty", f.Whitespace)
	}
	var spec grammar.Spec
	switch f.Type {
	case "text":
		if f.JSONSchema != nil {
			return nil, badRequest("response_format.json_schema", "response_format.json_schema is for type json_schema, not text")
		}
		return nil, nil
	case "json_object":
		if f.JSONSchema != nil {
			return nil, badRequest("response_format.json_schema", "response_format.json_schema is for type json_schema, not json_object")
		}
		spec.JSONObject = true
	case "json_schema":
		js := f.JSONSchema
		if js == nil {
			return nil, badRequest("response_format.json_schema", "response_format.json_schema is required for type json_schema")
		}
		if js.Name == "" {
			return nil, badRequest("response_format.json_schema.name", "response_format.json_schema.name is required")
		}
		if len(js.Schema) == 0 || string(js.Schema) == "null" {
			return nil, badRequest("response_format.json_schema.schema", "response_format.json_schema.schema is required")
		}
		spec.JSONSchema = js.Schema
	case "":
		return nil, badRequest("response_format.type", "response_format.type is required (text, json_object or json_schema)")
	default:
		return nil, badRequest("response_format.type", "response_format.type %q: want text, json_object or json_schema", f.Type)
	}
	tab, err := s.grammars.Compile(spec, grammar.Options{Whitespace: ws})
	if err != nil {
		param := "response_format"
		if spec.JSONSchema != nil {
			param = "response_format.json_schema.schema"
		}
		var se *grammar.SchemaError
		if errors.As(err, &se) {
			return nil, badRequest(param, "%s: %s", param, se.Where())
		}
		return nil, badRequest(param, "%s: %v", param, err)
	}
	return tab, nil
}
