package cli

import (
	"encoding/json"
	"strings"
	"testing"
)

// The demo prints a generate command in the base model's training format; run as printed
// (with the model folder this test can reach), it gives the answer the demo reports, a
// JSON verdict.
func TestDemoGenerateCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("specializes and generates: seconds")
	}
	out, stderr, err := runCLI(t, "demo", "--prompts", "2", "--max-tokens", "160", "--html", "", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var res struct {
		Generate       []string
		GenerateAnswer string
		Profile        string
		ProfileWhy     string
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Profile == "" || res.ProfileWhy == "" || !strings.Contains(stderr, "cost model: profile "+res.Profile+": "+res.ProfileWhy) {
		t.Errorf("profile %q, why %q; stderr:\n%s", res.Profile, res.ProfileWhy, stderr)
	}
	args := res.Generate
	if len(args) < 3 || args[0] != "generate" || args[1] != "--model" || args[2] != "demo/model" {
		t.Fatalf("command %q: want generate --model demo/model ...", args)
	}
	args[2] = repoPath("demo", "model") // the tests run in internal/cli
	gen, stderr, err := runCLI(t, append(args, "--json")...)
	if err != nil {
		t.Fatalf("%q: %v\n%s", args, err, stderr)
	}
	var g genOut
	if err := json.Unmarshal([]byte(gen), &g); err != nil {
		t.Fatal(err)
	}
	var verdict map[string]any
	if g.Text != res.GenerateAnswer || json.Unmarshal([]byte(g.Text), &verdict) != nil || verdict["verdict"] == nil {
		t.Errorf("generate answered %q; the demo reported %q; want the same JSON verdict", g.Text, res.GenerateAnswer)
	}
}
