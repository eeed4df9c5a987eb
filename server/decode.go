package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Request decoding. encoding/json would ignore unknown fields (a client's "tools" or
// "logit_bias" would be dropped without a word) and names a wrongly typed field by Go's
// struct path ("samplingFields.max_tokens", without list indices) and Go type. decodeJSON
// walks the body itself instead, so that every error names the field as the client wrote it
// ("messages[3].role", "stream_options.include_usage") and a field the server does not
// implement is refused.

// unsupportedFields are OpenAI request fields this server does not implement. A request
// that sets one (to anything but null) is refused rather than served as if it were absent.
var unsupportedFields = map[string]bool{
	"tools": true, "tool_choice": true, "parallel_tool_calls": true, "functions": true, "function_call": true,
	"logit_bias": true, "best_of": true, "audio": true, "modalities": true,
	"prediction": true, "web_search_options": true, "reasoning_effort": true, "verbosity": true,
	"service_tier": true, "store": true, "metadata": true, "prompt_cache_key": true, "safety_identifier": true,
	// in messages
	"name": true, "tool_calls": true, "tool_call_id": true, "refusal": true,
}

// ignoredFields are accepted and have no effect on the output.
var ignoredFields = map[string]bool{"user": true} // an end-user id for abuse monitoring

// decodeJSON parses a request body into v (a pointer to a request struct): the body must be
// valid UTF-8 (encoding/json would silently replace bad bytes) and one JSON object whose
// fields are v's, of the right types.
func decodeJSON(body []byte, v any) *apiError {
	if !utf8.Valid(body) {
		return badRequest("", "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return badRequest("", "malformed JSON body: %v", err)
	}
	if dec.More() {
		return badRequest("", "malformed JSON body: data after the JSON object")
	}
	if jsonKind(raw) != "an object" {
		return badRequest("", "the request body must be a JSON object, not %s", jsonKind(raw))
	}
	return decodeValue("", raw, reflect.ValueOf(v).Elem())
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// decodeValue decodes raw into rv; path names rv in the request.
func decodeValue(path string, raw json.RawMessage, rv reflect.Value) *apiError {
	t := rv.Type()
	if t == rawMessageType {
		rv.SetBytes(slices.Clone(raw))
		return nil
	}
	isNull := string(raw) == "null"
	switch t.Kind() {
	case reflect.Pointer:
		if isNull {
			rv.SetZero()
			return nil
		}
		p := reflect.New(t.Elem())
		if err := decodeValue(path, raw, p.Elem()); err != nil {
			return err
		}
		rv.Set(p)
		return nil
	case reflect.Struct:
		if isNull {
			return nil
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return typeError(path, "an object", raw)
		}
		fields := structFields(t)
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			val, p := obj[k], joinPath(path, k)
			idx, ok := fields[k]
			switch {
			case ok:
				if err := decodeValue(p, val, rv.FieldByIndex(idx)); err != nil {
					return err
				}
			case string(val) == "null" || ignoredFields[k] && path == "":
			case unsupportedFields[k]:
				return &apiError{status: 400, typ: "invalid_request_error", param: p, code: "unsupported_parameter",
					msg: fmt.Sprintf("%s is not supported by this server", p)}
			default:
				return &apiError{status: 400, typ: "invalid_request_error", param: p, code: "unknown_parameter",
					msg: fmt.Sprintf("unknown parameter %s", p)}
			}
		}
		return nil
	case reflect.Slice:
		if isNull {
			rv.SetZero()
			return nil
		}
		var items []json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return typeError(path, "a list", raw)
		}
		s := reflect.MakeSlice(t, len(items), len(items))
		for i, it := range items {
			if err := decodeValue(fmt.Sprintf("%s[%d]", path, i), it, s.Index(i)); err != nil {
				return err
			}
		}
		rv.Set(s)
		return nil
	}
	if isNull {
		return nil
	}
	if json.Unmarshal(raw, rv.Addr().Interface()) != nil {
		return typeError(path, kindName(t), raw)
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func typeError(path, want string, raw json.RawMessage) *apiError {
	got := jsonKind(raw)
	if got == "a number" {
		got = "the number " + string(raw)
		if len(got) > 60 {
			got = got[:60] + "..."
		}
	}
	return badRequest(path, "%s: expected %s, got %s", path, want, got)
}

// kindName is a Go scalar type in JSON's terms.
func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a " + t.Kind().String()
}

// jsonKind names the kind of a JSON value.
func jsonKind(raw json.RawMessage) string {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "nothing"
	}
	switch s[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

var fieldCache sync.Map // reflect.Type -> map[string][]int

// structFields maps a struct's JSON field names, those of embedded structs included, to
// their field indices.
func structFields(t reflect.Type) map[string][]int {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string][]int)
	}
	m := map[string][]int{}
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous || !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Index
	}
	fieldCache.Store(t, m)
	return m
}
