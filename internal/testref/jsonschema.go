package testref

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// JSONDoc is a document to check against a JSON Schema (nil Schema: any JSON object).
type JSONDoc struct {
	Schema json.RawMessage
	Doc    string
}

// ValidateJSON checks each document with the reference validator (Python jsonschema, Draft
// 2020-12 with formats; tests/grammar/validate.py) and returns one message per invalid one.
func ValidateJSON(t testing.TB, docs []JSONDoc) []string {
	t.Helper()
	py := os.Getenv("TOKENWISE_PYTHON")
	if py == "" {
		py = filepath.Join(filepath.Dir(Dir()), "py", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		Missing(t, "python venv with jsonschema at %s", py)
	}
	var in bytes.Buffer
	for _, d := range docs {
		line, err := json.Marshal(map[string]any{"schema": d.Schema, "doc": d.Doc})
		if err != nil {
			t.Fatal(err)
		}
		in.Write(line)
		in.WriteByte('\n')
	}
	cmd := exec.Command(py, filepath.Join(RepoRoot(), "tests", "grammar", "validate.py"))
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tests/grammar/validate.py: %v\n%s", err, stderr.String())
	}
	var fails []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	i := 0
	for sc.Scan() {
		var r struct {
			OK    bool
			Error string
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if !r.OK {
			fails = append(fails, docs[i].Doc+": "+r.Error)
		}
		i++
	}
	if i != len(docs) {
		t.Fatalf("tests/grammar/validate.py answered %d of %d", i, len(docs))
	}
	return fails
}

// Schemas are the structured-output tests' JSON Schemas: nested objects, arrays of objects,
// enums, bounded integers, strings with escapes and non-Latin text, anyOf, recursive $ref,
// formats.
var Schemas = []string{
	`{"type":"object","properties":{"store":{"type":"string"},"date":{"type":"string","format":"date"},"total":{"type":"number"},"items":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string"},"qty":{"type":"integer","minimum":1,"maximum":99},"price":{"type":"number"}},"required":["name","qty","price"],"additionalProperties":false},"minItems":1,"maxItems":4}},"required":["store","date","total","items"],"additionalProperties":false}`,
	`{"type":"object","properties":{"score":{"type":"integer","minimum":0,"maximum":10},"grade":{"enum":["A","B","C","D","F"]},"feedback":{"type":"string","maxLength":60},"flags":{"type":"array","items":{"enum":["plagiarism","off-topic","late"]},"maxItems":3}},"required":["score","grade","feedback"],"additionalProperties":false}`,
	`{"type":"object","properties":{"label":{"enum":["billing","bug","feature request","질문"]},"confidence":{"type":"number"},"urgent":{"type":"boolean"},"id":{"type":"string","format":"uuid"},"note":{"type":["string","null"]}},"required":["label","confidence","urgent","id","note"],"additionalProperties":false}`,
	`{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string","pattern":"^[a-z]{1,8}$"},"children":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["name","children"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
	`{"anyOf":[{"type":"object","properties":{"kind":{"const":"point"},"x":{"type":"integer","minimum":-1000,"maximum":1000},"y":{"type":"integer","exclusiveMinimum":-5,"exclusiveMaximum":5}},"required":["kind","x","y"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"text"},"body":{"type":"string","minLength":1},"when":{"type":"string","format":"date-time"}},"required":["kind","body","when"],"additionalProperties":false}]}`,
}
