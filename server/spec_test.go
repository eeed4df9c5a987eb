package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/engine/spec"
	"github.com/tokenwise/tokenwise/grammar"
)

// TestSpeculation: with prompt-lookup drafts and a domain index the server learns from,
// greedy answers are those without speculation; usage and the spec-decode metrics count the
// drafts, and "speculate": false turns drafting off for one request. The server drafts
// MaxDraft tokens every step (FixedDraft): how many drafts pay on the machine the test
// runs on is what the measured step costs decide, and on a slow one they say none for this
// tiny model (CI: "no token drafted over three runs"). A server that weighs drafts by
// their costs measures its decode steps of 1..MaxDraft+1 tokens (and longer, for batches)
// before serving, and its answers are the same.
func TestSpeculation(t *testing.T) {
	index := spec.NewIndex(3, 1<<16)
	ts := startServer(t, Config{Speculate: spec.Chain{spec.PromptLookup{}, index}, MaxDraft: 4, DraftIndex: index, FixedDraft: true})
	if c := ts.Calibration(); c != nil {
		t.Errorf("a server drafting a fixed length measured step costs: %v", c)
	}
	measured := startServer(t, Config{Speculate: spec.Chain{spec.PromptLookup{}}, MaxDraft: 4})
	if c := measured.Calibration(); len(c) < 5 || c[0].Tokens != 1 || c[4].Tokens != 5 {
		t.Errorf("step costs measured at start: %v, want lengths 1..5 at least", c)
	}
	if c := startServer(t, Config{}).Calibration(); c != nil {
		t.Errorf("a server without speculation measured step costs: %v", c)
	}
	postTo := func(ts *testServer, body map[string]any) completionResponse {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out completionResponse
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		return out
	}
	post := func(body map[string]any) completionResponse { t.Helper(); return postTo(ts, body) }
	// A prompt that repeats itself: its continuation is in the prompt.
	prompt := "one two three four five six seven one two three four five six seven one two three"
	want := ts.reference(t, ts.tok.Encode(prompt, true), 32)
	if got := postTo(measured, map[string]any{"prompt": prompt, "max_tokens": 32, "temperature": 0}); got.Choices[0].Text != want.Text {
		t.Errorf("drafts weighed by measured costs: %q\nwithout drafts: %q", got.Choices[0].Text, want.Text)
	}
	drafted := 0
	for i := range 3 {
		res := post(map[string]any{"prompt": prompt, "max_tokens": 32, "temperature": 0})
		if res.Choices[0].Text != want.Text {
			t.Fatalf("run %d with drafts: %q\nwithout: %q", i, res.Choices[0].Text, want.Text)
		}
		u := res.Usage
		if u.AcceptedDrafts > u.DraftedTokens || u.DecodeSteps+u.AcceptedDrafts != u.CompletionTokens-1 {
			t.Errorf("run %d: usage %+v: want decode steps + kept drafts = completion tokens - 1", i, *u)
		}
		drafted += u.DraftedTokens
	}
	if drafted == 0 {
		t.Error("no token drafted over three runs of a repeating prompt")
	}
	if index.Len() == 0 {
		t.Error("the draft index learned nothing from three finished answers")
	}
	if m := ts.metric(t, "tokenwise:spec_decode_num_draft_tokens_total"); m != float64(drafted) {
		t.Errorf("draft tokens metric %g, usage says %d", m, drafted)
	}
	off := post(map[string]any{"prompt": prompt, "max_tokens": 32, "temperature": 0, "speculate": false})
	if off.Usage.DraftedTokens != 0 || off.Choices[0].Text != want.Text {
		t.Errorf(`"speculate": false: %d drafted, text %q`, off.Usage.DraftedTokens, off.Choices[0].Text)
	}
}

// TestSchemaSpeculation: with SchemaDrafts (serve --speculate schema,prompt) a
// response_format request drafts the text its schema forces and verifies it, so its greedy
// answer is masked decoding's without jump-forward, token for token; usage counts the
// schema's drafts, and the per-position acceptance metric sums to the accepted drafts.
func TestSchemaSpeculation(t *testing.T) {
	ts := startServer(t, Config{Speculate: spec.Chain{spec.PromptLookup{}}, MaxDraft: 6, SchemaDrafts: true, FixedDraft: true})
	schema := `{"type":"object","properties":{"label":{"enum":["billing","bug","feature request"]},"urgent":{"type":"boolean"},"note":{"type":"string","maxLength":12}},"required":["label","urgent","note"],"additionalProperties":false}`
	tab, err := engine.NewGrammars(ts.tok, 0).Compile(grammar.Spec{JSONSchema: []byte(schema)}, grammar.Options{})
	if err != nil {
		t.Fatal(err)
	}
	schemaDrafted, accepted := 0, 0
	for i, prompt := range []string{"Classify the ticket: my invoice is wrong.", "Classify: the app crashes on start.", "Ticket: add dark mode"} {
		ids := ts.tok.Encode(prompt, true)
		want, err := engine.Generate(context.Background(), ts.m, ts.tok, ids, engine.Options{MaxTokens: 48, Grammar: tab, NoJumpForward: true})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 48, "temperature": 0,
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "ticket", "schema": json.RawMessage(schema)}}})
		resp, err := http.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		var out completionResponse
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		u := out.Usage
		if out.Choices[0].Text != want.Text || u.CompletionTokens != len(want.IDs) {
			t.Fatalf("request %d with schema drafts: %q (%d tokens)\nmasked decoding: %q (%d tokens)", i, out.Choices[0].Text, u.CompletionTokens, want.Text, len(want.IDs))
		}
		if u.JumpedTokens != 0 || u.SchemaAccepted > u.SchemaDrafted || u.SchemaDrafted > u.DraftedTokens || u.DecodeSteps+u.AcceptedDrafts != u.CompletionTokens-1 {
			t.Errorf("request %d: usage %+v", i, *u)
		}
		schemaDrafted += u.SchemaDrafted
		accepted += u.AcceptedDrafts
		// Without speculation, "jump_forward": false is masked decoding too.
		b, _ = json.Marshal(map[string]any{"prompt": prompt, "max_tokens": 48, "temperature": 0, "speculate": false,
			"response_format": map[string]any{"type": "json_schema", "jump_forward": false, "json_schema": map[string]any{"name": "ticket", "schema": json.RawMessage(schema)}}})
		resp, err = http.Post(ts.url+"/v1/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		var masked completionResponse
		err = json.NewDecoder(resp.Body).Decode(&masked)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d: %v", resp.StatusCode, err)
		}
		if masked.Choices[0].Text != want.Text || masked.Usage.JumpedTokens != 0 || masked.Usage.DraftedTokens != 0 || masked.Usage.DecodeSteps != len(want.IDs)-1 {
			t.Errorf(`request %d, "jump_forward": false: %q, usage %+v; masked decoding %q`, i, masked.Choices[0].Text, *masked.Usage, want.Text)
		}
	}
	if schemaDrafted == 0 {
		t.Error("no schema draft over three schema requests")
	}
	if m := ts.metric(t, "tokenwise:spec_decode_num_accepted_tokens_per_pos_total"); m != float64(accepted) {
		t.Errorf("accepted tokens by position sum to %g, usage says %d", m, accepted)
	}
	if m := ts.metric(t, "tokenwise:spec_decode_num_schema_draft_tokens_total"); m != float64(schemaDrafted) {
		t.Errorf("schema draft tokens metric %g, usage says %d", m, schemaDrafted)
	}
}
