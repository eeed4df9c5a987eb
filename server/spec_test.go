package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/tokenwise/tokenwise/engine/spec"
)

// TestSpeculation: with prompt-lookup drafts and a domain index the server learns from,
// greedy answers are those without speculation; usage and the spec-decode metrics count the
// drafts, and "speculate": false turns drafting off for one request.
func TestSpeculation(t *testing.T) {
	index := spec.NewIndex(3, 1<<16)
	ts := startServer(t, Config{Speculate: spec.Chain{spec.PromptLookup{}, index}, MaxDraft: 4, DraftIndex: index})
	post := func(body map[string]any) completionResponse {
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
	// A prompt that repeats itself: its continuation is in the prompt.
	prompt := "one two three four five six seven one two three four five six seven one two three"
	want := ts.reference(t, ts.tok.Encode(prompt, true), 32)
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
