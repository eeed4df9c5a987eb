package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/grammar"
	"github.com/tokenwise/tokenwise/internal/testref"
)

const gradeSchema = `{"type":"object","properties":{"score":{"type":"integer","minimum":0,"maximum":10},"grade":{"enum":["A","B","C","D","F"]},"feedback":{"type":"string","maxLength":24},"tags":{"type":"array","items":{"enum":["late","한국어 \"quoted\""]},"maxItems":2}},"required":["score","grade","feedback","tags"],"additionalProperties":false}`

func gradeFormat() openai.ChatCompletionNewParamsResponseFormatUnion {
	var schema map[string]any
	if err := json.Unmarshal([]byte(gradeSchema), &schema); err != nil {
		panic(err)
	}
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "grade", Schema: schema, Strict: openai.Bool(true)}}}
}

// TestResponseFormat: through the official OpenAI client, json_schema answers of the tiny
// random model at temperature 1 — 12 seeds, concurrent under continuous batching, streamed
// and not — all validate under jsonschema, each equals engine.Generate's for its seed with
// the same grammar alone, and usage reports the forced and jumped tokens; the schema is
// compiled once.
func TestResponseFormat(t *testing.T) {
	ts := startServer(t, Config{})
	c := ts.client("")
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Grade this essay.")}
	prompt, aerr := ts.chatPrompt([]chatMessage{{Role: "user", Content: json.RawMessage(`"Grade this essay."`)}})
	if aerr != nil {
		t.Fatal(aerr)
	}
	// The client sends the schema as a Go map, so its keys in sorted order: the properties
	// are generated in that order.
	sent, err := json.Marshal(gradeFormat().OfJSONSchema.JSONSchema.Schema)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := engine.NewGrammars(ts.tok, 0).Compile(grammar.Spec{JSONSchema: sent}, grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	texts := make([]string, n)
	usages := make([]openai.CompletionUsage, n)
	finishes := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := openai.ChatCompletionNewParams{Model: "tiny", Messages: msgs, MaxTokens: openai.Int(120),
				Temperature: openai.Float(1), Seed: openai.Int(int64(i)), ResponseFormat: gradeFormat()}
			if i%2 == 0 {
				res, err := c.Chat.Completions.New(ctx, p)
				if err != nil {
					errs <- err
					return
				}
				texts[i], usages[i], finishes[i] = res.Choices[0].Message.Content, res.Usage, string(res.Choices[0].FinishReason)
				return
			}
			p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			st := c.Chat.Completions.NewStreaming(ctx, p)
			var sb strings.Builder
			for st.Next() {
				ch := st.Current()
				for _, c := range ch.Choices {
					sb.WriteString(c.Delta.Content)
					if c.FinishReason != "" {
						finishes[i] = c.FinishReason
					}
				}
				if ch.Usage.TotalTokens > 0 {
					usages[i] = ch.Usage
				}
			}
			if err := st.Err(); err != nil {
				errs <- err
				return
			}
			texts[i] = sb.String()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var docs []testref.JSONDoc
	jumped := 0
	for i := 0; i < n; i++ {
		want, err := engine.Generate(ctx, ts.m, ts.tok, prompt, engine.Options{MaxTokens: 120, Grammar: tab,
			Sampler: engine.SamplerParams{Temperature: 1, Seed: uint64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		if texts[i] != want.Text || finishes[i] != want.FinishReason {
			t.Errorf("seed %d: server %q (%s), engine.Generate %q (%s)", i, texts[i], finishes[i], want.Text, want.FinishReason)
		}
		var u struct {
			Forced int `json:"forced_tokens"`
			Jumped int `json:"jumped_tokens"`
		}
		if err := json.Unmarshal([]byte(usages[i].RawJSON()), &u); err != nil {
			t.Fatal(err)
		}
		if u.Forced != want.Timing.ForcedTokens || u.Jumped != want.Timing.JumpedTokens || u.Forced < u.Jumped {
			t.Errorf("seed %d: usage forced %d jumped %d, engine.Generate %d %d", i, u.Forced, u.Jumped, want.Timing.ForcedTokens, want.Timing.JumpedTokens)
		}
		jumped += u.Jumped
		if finishes[i] == "stop" {
			docs = append(docs, testref.JSONDoc{Schema: json.RawMessage(gradeSchema), Doc: texts[i]})
		} else if !tab.Grammar().Prefix([]byte(texts[i])) {
			t.Errorf("seed %d: cut answer %q is no prefix of a document", i, texts[i])
		}
	}
	for _, f := range testref.ValidateJSON(t, docs) {
		t.Error(f)
	}
	if len(docs) < n/2 || jumped == 0 {
		t.Errorf("%d of %d answers complete, %d tokens jumped", len(docs), n, jumped)
	}
	if got := ts.metric(t, MetricPrefix+"grammar_compile_seconds_count"); got != 1 {
		t.Errorf("compiled %v times, want once", got)
	}
	if ts.metric(t, MetricPrefix+"grammar_masks_total") == 0 || ts.metric(t, MetricPrefix+"grammar_jump_forward_tokens_total") != float64(jumped) {
		t.Error("grammar metrics not counted")
	}

	// json_object on /v1/completions; a cut answer ends with finish_reason length.
	res, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "tiny",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("JSON:")}, MaxTokens: openai.Int(3), Temperature: openai.Float(0)},
		optionJSON("response_format", map[string]any{"type": "json_object"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Choices[0]; got.FinishReason != "length" || !strings.HasPrefix(got.Text, "{") {
		t.Errorf("json_object cut at 3 tokens: %q (%s)", got.Text, got.FinishReason)
	}
}

// TestResponseFormatErrors: a schema the grammar cannot take answers 400 naming the field,
// the keyword and its place in the schema, and the OpenAI client parses the error.
func TestResponseFormatErrors(t *testing.T) {
	ts := startServer(t, Config{})
	c := ts.client("")
	cases := []struct {
		format    map[string]any
		param     string
		substring string
	}{
		{map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string", "multipleOf": 2}}}}},
			"response_format.json_schema.schema", `at #/properties/a: "multipleOf": unsupported keyword`},
		{map[string]any{"type": "json_schema", "json_schema": map[string]any{"schema": map[string]any{"type": "object"}}}, "response_format.json_schema.name", "name is required"},
		{map[string]any{"type": "json_schema"}, "response_format.json_schema", "is required"},
		{map[string]any{"type": "xml"}, "response_format.type", `"xml"`},
		{map[string]any{"type": "json_object", "whitespace": "tabs"}, "response_format.whitespace", `"tabs"`},
		{map[string]any{"type": "json_object", "extra": 1}, "response_format.extra", "extra"},
	}
	for _, tc := range cases {
		_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "tiny",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(4)},
			optionJSON("response_format", tc.format))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("%v: error %v", tc.format, err)
		}
		if apiErr.StatusCode != 400 || apiErr.Param != tc.param || !strings.Contains(apiErr.Message, tc.substring) {
			t.Errorf("%v: %d param %q message %q; want 400, %q, containing %q", tc.format, apiErr.StatusCode, apiErr.Param, apiErr.Message, tc.param, tc.substring)
		}
	}
}

// optionJSON sets a raw request field (for values the client's types do not offer).
func optionJSON(key string, v any) option.RequestOption { return option.WithJSONSet(key, v) }
