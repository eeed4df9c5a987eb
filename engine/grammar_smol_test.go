package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/engine/spec"
	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/grammar"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

func loadSmolLM2(t testing.TB) (*model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	path, tok := smolTokenizer(t)
	m, err := model.Load(path, model.Options{Threads: 2, KVCache: tensor.F16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, tok
}

// smolTokenizer is the reference SmolLM2-135M-Instruct GGUF's path and tokenizer.
func smolTokenizer(t testing.TB) (string, *tokenizer.Tokenizer) {
	t.Helper()
	path := testref.Path(t, "smollm2", "smollm2-135m-instruct-q4_1.gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	return path, tok
}

// smolJSONTasks are extraction prompts with a schema each, for the real-model tests.
var smolJSONTasks = []struct{ prompt, schema string }{
	{"Extract the person as JSON with keys name and age: Ann Smith is 34 years old.",
		`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`},
	{"Return JSON with keys city and country for: I live in Lyon, France.",
		`{"type":"object","properties":{"city":{"type":"string"},"country":{"type":"string"}},"required":["city","country"],"additionalProperties":false}`},
	{"Classify the sentiment of 'I love this phone' as JSON with key sentiment (positive or negative).",
		`{"type":"object","properties":{"sentiment":{"enum":["positive","negative"]}},"required":["sentiment"],"additionalProperties":false}`},
	{"Give the receipt as JSON with keys store and total: Bought bread at Lidl for 3.50.",
		`{"type":"object","properties":{"store":{"type":"string"},"total":{"type":"number"}},"required":["store","total"],"additionalProperties":false}`},
	{"Answer in JSON with keys answer and confidence: What is the capital of Italy?",
		`{"type":"object","properties":{"answer":{"type":"string"},"confidence":{"type":"number"}},"required":["answer","confidence"],"additionalProperties":false}`},
}

// TestSmolLM2GrammarKeepsText: on the real SmolLM2-135M-Instruct, greedy, structured
// output changes nothing it does not have to — with jump-forward on and off the text is the
// same, and where the unconstrained answer already is a document of the schema the
// constrained one is that answer; jump-forward saves decode steps.
func TestSmolLM2GrammarKeepsText(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real model")
	}
	// The no-distortion check below needs an unconstrained answer that happens to conform,
	// and which answers do depends on the ggml build the kernels reproduce (by default the
	// CPU's: their float orders move SmolLM2's logits by tenths). Under the AVX2 build none
	// of these three stops at its closing brace, under the AVX-512 build one does; both
	// builds run on any AVX2 CPU, so the test takes the one where the check has something to
	// check, wherever it runs.
	defer kernels.SetGGMLBuild(kernels.SetGGMLBuild(kernels.GGMLAVX512))
	m, tok := loadSmolLM2(t)
	tmpl, err := TokenizerTemplate(tok)
	if err != nil {
		t.Fatal(err)
	}
	gs := NewGrammars(tok, 0)
	conforming := 0
	for _, task := range smolJSONTasks[:3] {
		ids, _, err := tmpl.ChatPrompt(tok, []Message{{Role: "user", Content: task.prompt}}, ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		free, err := Generate(context.Background(), m, tok, ids, Options{MaxTokens: 40})
		if err != nil {
			t.Fatal(err)
		}
		for _, ws := range []grammar.Whitespace{grammar.Compact, grammar.Pretty} {
			tab, err := gs.Compile(grammar.Spec{JSONSchema: []byte(task.schema)}, grammar.Options{Whitespace: ws})
			if err != nil {
				t.Fatal(err)
			}
			jump, err := Generate(context.Background(), m, tok, ids, Options{MaxTokens: 40, Grammar: tab})
			if err != nil {
				t.Fatal(err)
			}
			plain, err := Generate(context.Background(), m, tok, ids, Options{MaxTokens: 40, Grammar: tab, NoJumpForward: true})
			if err != nil {
				t.Fatal(err)
			}
			if jump.Text != plain.Text {
				t.Errorf("%q (whitespace %d): jump-forward %q, without %q", task.prompt, ws, jump.Text, plain.Text)
			}
			if !tab.Grammar().Accepts([]byte(jump.Text)) || jump.FinishReason != FinishStop {
				t.Errorf("%q: %q (%s) is not a whole document", task.prompt, jump.Text, jump.FinishReason)
			}
			if jump.Timing.JumpedTokens == 0 || jump.Timing.DecodeSteps >= plain.Timing.DecodeSteps {
				t.Errorf("%q: jump-forward appended %d tokens, %d decode steps against %d", task.prompt,
					jump.Timing.JumpedTokens, jump.Timing.DecodeSteps, plain.Timing.DecodeSteps)
			}
			if tab.Grammar().Accepts([]byte(free.Text)) {
				conforming++
				if plain.Text != free.Text {
					t.Errorf("%q: unconstrained %q conforms, constrained %q", task.prompt, free.Text, plain.Text)
				}
			}
			t.Logf("whitespace %d: %q: %d tokens, %d jumped, decode steps %d (%d without jump-forward)", ws, jump.Text,
				len(jump.IDs), jump.Timing.JumpedTokens, jump.Timing.DecodeSteps, plain.Timing.DecodeSteps)
		}
	}
	if conforming == 0 {
		t.Error("no unconstrained answer conforms: the no-distortion check checked nothing")
	}
}

// TestSmolLM2SpeculationLossless: on the real SmolLM2-135M-Instruct, greedy output with
// drafts verified is the output without, token for token: a plain prompt and chat prompts
// with prompt-lookup drafts, and chat prompts under their schema with the grammar's forced
// text and prompt lookup as drafts (against masked decoding without jump-forward). The
// extraction prompts copy their fields into the answer, so drafts are kept and decode
// steps saved.
func TestSmolLM2SpeculationLossless(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a real model")
	}
	m, tok := loadSmolLM2(t)
	tmpl, err := TokenizerTemplate(tok)
	if err != nil {
		t.Fatal(err)
	}
	gs := NewGrammars(tok, 0)
	ctx := context.Background()
	type run struct {
		name   string
		prompt []int
		opts   Options
	}
	runs := []run{{"plain prompt", tok.Encode("The receipt said: Lidl, bread 3.50, milk 1.20, total 4.70. The receipt said: Lidl,", true), Options{MaxTokens: 32}}}
	for _, task := range smolJSONTasks {
		ids, _, err := tmpl.ChatPrompt(tok, []Message{{Role: "user", Content: task.prompt}}, ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			t.Fatal(err)
		}
		tab, err := gs.Compile(grammar.Spec{JSONSchema: []byte(task.schema)}, grammar.Options{Whitespace: grammar.Spaced})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, run{"chat: " + task.prompt, ids, Options{MaxTokens: 40}},
			run{"schema: " + task.prompt, ids, Options{MaxTokens: 40, Grammar: tab, NoJumpForward: true}})
	}
	var kept, schemaKept, steps, plainSteps int
	for _, r := range runs {
		want, err := Generate(ctx, m, tok, r.prompt, r.opts)
		if err != nil {
			t.Fatal(err)
		}
		o := r.opts
		o.Proposer, o.MaxDraft, o.FixedDraft = spec.PromptLookup{}, 6, true
		if o.Grammar != nil {
			o.NoJumpForward, o.SchemaDrafts = false, true
		}
		got, err := Generate(ctx, m, tok, r.prompt, o)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.IDs, want.IDs) {
			t.Errorf("%s: with drafts %q %v\nwithout %q %v", r.name, got.Text, got.IDs, want.Text, want.IDs)
		}
		tm := got.Timing
		kept, schemaKept = kept+tm.AcceptedDrafts, schemaKept+tm.SchemaAccepted
		steps, plainSteps = steps+tm.DecodeSteps, plainSteps+want.Timing.DecodeSteps
		t.Logf("%s: %q: decode steps %d -> %d, %d of %d drafts kept (%d of %d the schema's), by position %v of %v", r.name, got.Text,
			want.Timing.DecodeSteps, tm.DecodeSteps, tm.AcceptedDrafts, tm.DraftedTokens, tm.SchemaAccepted, tm.SchemaDrafted, tm.AcceptedAt, tm.DraftedAt)
	}
	t.Logf("decode steps %d -> %d", plainSteps, steps)
	if kept == 0 || schemaKept == 0 || steps >= plainSteps {
		t.Errorf("%d drafts kept, %d of the schema's, decode steps %d -> %d: speculation saved nothing here", kept, schemaKept, plainSteps, steps)
	}
}

// BenchmarkFewHeadRows measures what computing the LM head over the grammar's allowed
// tokens only saves on SmolLM2-135M-Instruct: the five JSON tasks under their schema (spaced
// output), masked decoding and schema drafts, each with the whole head and with the allowed
// rows, alternating within every iteration so that a busy machine slows both alike. It
// reports decode milliseconds per output token (the ids are the same: TestFewHeadRowsKeepOutput).
//
//	go test ./engine -run '^$' -bench FewHeadRows -benchtime 3x
func BenchmarkFewHeadRows(b *testing.B) {
	m, tok := loadSmolLM2(b)
	tmpl, err := TokenizerTemplate(tok)
	if err != nil {
		b.Fatal(err)
	}
	gs := NewGrammars(tok, 0)
	type job struct {
		ids []int
		tab *grammar.Table
	}
	var jobs []job
	for _, task := range smolJSONTasks {
		ids, _, err := tmpl.ChatPrompt(tok, []Message{{Role: "user", Content: task.prompt}}, ChatOptions{AddGenerationPrompt: true})
		if err != nil {
			b.Fatal(err)
		}
		tab, err := gs.Compile(grammar.Spec{JSONSchema: []byte(task.schema)}, grammar.Options{Whitespace: grammar.Pretty})
		if err != nil {
			b.Fatal(err)
		}
		jobs = append(jobs, job{ids, tab})
	}
	modes := []struct {
		name   string
		drafts bool
		whole  bool
	}{{"masked-whole", false, true}, {"masked-few", false, false}, {"drafts-whole", true, true}, {"drafts-few", true, false}}
	dec := make([]time.Duration, len(modes))
	toks := make([]int, len(modes))
	few := make([]int, len(modes))
	rows := make([]int, len(modes))
	mask := make([]float64, len(modes))
	for b.Loop() {
		for _, j := range jobs {
			for i, md := range modes {
				opts := Options{MaxTokens: 60, Grammar: j.tab, NoJumpForward: !md.drafts, SchemaDrafts: md.drafts, WholeHead: md.whole}
				r, err := Generate(context.Background(), m, tok, j.ids, opts)
				if err != nil {
					b.Fatal(err)
				}
				dec[i] += time.Duration(r.Timing.DecodeMs * float64(time.Millisecond))
				toks[i] += len(r.IDs)
				few[i] += r.Timing.FewHeadRows
				rows[i] += r.Timing.HeadRows
				mask[i] += r.Timing.MaskMs
			}
		}
	}
	for i, md := range modes {
		b.ReportMetric(float64(dec[i].Microseconds())/1e3/float64(toks[i]), md.name+"-ms/token")
		b.ReportMetric(mask[i]/float64(toks[i]), md.name+"-mask-ms/token")
		if md.name == "masked-few" {
			b.ReportMetric(float64(few[i])/float64(rows[i]), "few-rows-share")
		}
	}
}
