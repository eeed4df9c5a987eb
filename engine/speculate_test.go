package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/engine/sched"
	"github.com/tokenwise/tokenwise/engine/spec"
	"github.com/tokenwise/tokenwise/grammar"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// archSynth is a tiny random config of each architecture in model's table, over the
// Llama-3 tokenizer. A new architecture needs one here: TestSpeculationLossless fails for an
// architecture it does not cover.
var archSynth = map[string]string{
	"llama": `{"model_type":"llama","vocab_size":128256,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":512,"rms_norm_eps":1e-5,"rope_theta":500000,
		"tie_word_embeddings":true,"bos_token_id":128000,"eos_token_id":128001}`,
	"mistral": `{"model_type":"mistral","vocab_size":128256,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":512,"rms_norm_eps":1e-5,"rope_theta":1000000,
		"sliding_window":24,"tie_word_embeddings":false,"bos_token_id":128000,"eos_token_id":128001}`,
	"qwen2": `{"model_type":"qwen2","vocab_size":128256,"hidden_size":40,"intermediate_size":56,"num_hidden_layers":2,
		"num_attention_heads":5,"num_key_value_heads":1,"max_position_embeddings":512,"rms_norm_eps":1e-6,"rope_theta":1000000,
		"use_sliding_window":false,"tie_word_embeddings":true,"bos_token_id":128000,"eos_token_id":128001}`,
	"qwen3": `{"model_type":"qwen3","vocab_size":128256,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"head_dim":12,"max_position_embeddings":512,"rms_norm_eps":1e-6,
		"rope_theta":1000000,"tie_word_embeddings":true,"bos_token_id":128000,"eos_token_id":128001}`,
	"qwen3_moe": `{"model_type":"qwen3_moe","vocab_size":128256,"hidden_size":32,"intermediate_size":64,"moe_intermediate_size":24,
		"num_experts":8,"num_experts_per_tok":2,"norm_topk_prob":true,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,
		"head_dim":8,"max_position_embeddings":512,"rms_norm_eps":1e-6,"rope_theta":1000000,"tie_word_embeddings":false,
		"bos_token_id":128000,"eos_token_id":128001}`,
	"mixtral": `{"model_type":"mixtral","vocab_size":128256,"hidden_size":32,"intermediate_size":48,"num_local_experts":4,
		"num_experts_per_tok":2,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":512,
		"rms_norm_eps":1e-5,"rope_theta":1000000,"tie_word_embeddings":false,"bos_token_id":128000,"eos_token_id":128001}`,
}

// specRun is one request's output from runBatch.
type specRun struct {
	ids  []int
	text string
	st   Stats
}

// runBatch runs reqs through one engine, streams at a time, and returns their outputs in
// request order.
func runBatch(t *testing.T, m *model.Model, tok *tokenizer.Tokenizer, streams int, reqs []Request) []specRun {
	t.Helper()
	return runBatchHead(t, m, tok, streams, reqs, false)
}

// runBatchHead is runBatch with EngineConfig.WholeHead.
func runBatchHead(t *testing.T, m *model.Model, tok *tokenizer.Tokenizer, streams int, reqs []Request, whole bool) []specRun {
	t.Helper()
	maxLen := 0
	for _, r := range reqs {
		maxLen = max(maxLen, len(r.Prompt)+r.MaxTokens)
	}
	e, err := NewEngine(EngineConfig{Model: m, Tokenizer: tok, NumBlocks: streams*(maxLen/16+2) + 8, BlockSize: 16,
		Sched: sched.Config{MaxSeqs: streams, MaxBatchedTokens: 256, MaxWaiting: len(reqs), MaxModelLen: maxLen}, WholeHead: whole})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	index := map[sched.SeqID]int{}
	for i, r := range reqs {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
		index[r.ID] = i
	}
	out := make([]specRun, len(reqs))
	texts := make([]strings.Builder, len(reqs))
	for left := len(reqs); left > 0; {
		rep, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range rep.Tokens {
			i := index[tk.Seq]
			out[i].ids = append(out[i].ids, tk.ID)
			texts[i].WriteString(tk.Text)
		}
		for _, f := range rep.Finished {
			if f.Err != nil {
				t.Fatalf("sequence %d: %v", f.Seq, f.Err)
			}
			i := index[f.Seq]
			texts[i].WriteString(f.Text)
			out[i].text, out[i].st = texts[i].String(), f.Stats
			left--
		}
	}
	return out
}

// TestSpeculationLossless: greedy output is the same token for token with drafts verified
// and without, on a random checkpoint of every architecture, alone (Generate) and 8
// requests at 4 streams, with and without a schema. The drafts are prompt lookup's (a
// random model repeats itself, so they are often right) and, under a schema, the grammar's
// forced text (SchemaDrafts), against masked decoding without jump-forward. FixedDraft
// verifies drafts every step whatever the measured cost says. The verify pass's logits are
// the decode pass's bit for bit (model.TestVerifyPassEqualsDecode), so equality is exact.
func TestSpeculationLossless(t *testing.T) {
	ctx := context.Background()
	schema := boundedSchemas[1]
	for _, a := range model.Archs() {
		cfg, ok := archSynth[a.ModelType]
		if !ok {
			t.Errorf("%s: no synth config in archSynth", a.ModelType)
			continue
		}
		t.Run(a.ModelType, func(t *testing.T) {
			m, tok := synthFrom(t, "llama3", cfg, `{"bos_token_id":128000,"eos_token_id":[128001,128009]}`)
			defer m.Close()
			tab, err := NewGrammars(tok, 0).Compile(grammar.Spec{JSONSchema: []byte(schema)}, grammar.Options{Whitespace: grammar.Spaced})
			if err != nil {
				t.Fatal(err)
			}
			kept, schemaKept := 0, 0
			for _, withSchema := range []bool{false, true} {
				var plain, drafted []Request
				for i := range 8 {
					p := tok.Encode(fmt.Sprintf("Item %d: the cat sat on the mat; the cat sat on the", i), true)
					r := Request{ID: sched.SeqID(i + 1), Prompt: p, MaxTokens: 40, IgnoreEOS: !withSchema}
					if withSchema {
						r.Grammar, r.NoJumpForward = tab, true
					}
					d := r
					d.Proposer, d.MaxDraft, d.FixedDraft = spec.PromptLookup{}, 5, true
					d.SchemaDrafts, d.NoJumpForward = withSchema, false
					plain, drafted = append(plain, r), append(drafted, d)
				}
				// Alone: Generate.
				for i := range 2 {
					r, d := plain[i], drafted[i]
					opts := Options{MaxTokens: r.MaxTokens, IgnoreEOS: r.IgnoreEOS, Grammar: r.Grammar, NoJumpForward: r.NoJumpForward}
					want, err := Generate(ctx, m, tok, r.Prompt, opts)
					if err != nil {
						t.Fatal(err)
					}
					opts.NoJumpForward, opts.SchemaDrafts = false, d.SchemaDrafts
					opts.Proposer, opts.MaxDraft, opts.FixedDraft = d.Proposer, d.MaxDraft, true
					got, err := Generate(ctx, m, tok, r.Prompt, opts)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got.IDs, want.IDs) || got.Text != want.Text {
						t.Fatalf("schema=%v, alone, prompt %d: drafted %v\nplain %v", withSchema, i, got.IDs, want.IDs)
					}
					kept += got.Timing.AcceptedDrafts
					if got.Timing.DecodeSteps+got.Timing.AcceptedDrafts != want.Timing.DecodeSteps {
						t.Errorf("schema=%v, alone: %d decode steps + %d kept drafts, want the plain run's %d steps", withSchema,
							got.Timing.DecodeSteps, got.Timing.AcceptedDrafts, want.Timing.DecodeSteps)
					}
				}
				// Batched: 8 requests, 4 at a time.
				want, got := runBatch(t, m, tok, 4, plain), runBatch(t, m, tok, 4, drafted)
				for i := range want {
					if !slices.Equal(got[i].ids, want[i].ids) || got[i].text != want[i].text {
						t.Fatalf("schema=%v, batched, request %d: drafted %v\nplain %v", withSchema, i, got[i].ids, want[i].ids)
					}
					st := got[i].st
					kept += st.AcceptedDrafts
					schemaKept += st.SchemaAccepted
					if st.SchemaAccepted > st.SchemaDrafted || st.AcceptedDrafts > st.DraftedTokens || (!withSchema && st.SchemaDrafted > 0) {
						t.Errorf("schema=%v, request %d: %d of %d schema drafts, %d of %d drafts kept", withSchema, i,
							st.SchemaAccepted, st.SchemaDrafted, st.AcceptedDrafts, st.DraftedTokens)
					}
					sum := 0
					for p, n := range st.AcceptedAt {
						if n > st.DraftedAt[p] || (p > 0 && n > st.AcceptedAt[p-1]) {
							t.Errorf("request %d: accepted by position %v of drafted %v: a draft is kept only after the ones before it", i, st.AcceptedAt, st.DraftedAt)
						}
						sum += n
					}
					if sum != st.AcceptedDrafts {
						t.Errorf("request %d: accepted by position %v sums to %d, not %d", i, st.AcceptedAt, sum, st.AcceptedDrafts)
					}
				}
			}
			t.Logf("%d drafts kept, %d of them the schema's", kept, schemaKept)
			if kept == 0 || schemaKept == 0 {
				t.Errorf("%d drafts kept, %d from the schema: the test verified nothing", kept, schemaKept)
			}
		})
	}
}

// TestSchemaDraftsKeepTokenization: with a grammar, jump-forward appends the forced text as
// the tokenizer spells it, which may differ from the tokens masked decoding picks; schema
// drafts verify that spelling instead, so the ids are masked decoding's. On the demo's
// kind of schema (keys and enum values forced), drafts of forced text are mostly kept and
// save decode steps.
func TestSchemaDraftsKeepTokenization(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		load func(*testing.T) (*model.Model, *tokenizer.Tokenizer)
	}{{"llama3", synthModel}, {"qwen3", synthQwen3}} {
		t.Run(c.name, func(t *testing.T) {
			m, tok := c.load(t)
			defer m.Close()
			gs := NewGrammars(tok, 0)
			saved := 0
			for i, s := range boundedSchemas {
				tab, err := gs.Compile(grammar.Spec{JSONSchema: []byte(s)}, grammar.Options{Whitespace: grammar.Spaced})
				if err != nil {
					t.Fatal(err)
				}
				prompt := tok.Encode(fmt.Sprintf("Answer %d in JSON:", i), false)
				opts := Options{MaxTokens: 120, Grammar: tab, NoJumpForward: true}
				want, err := Generate(ctx, m, tok, prompt, opts)
				if err != nil {
					t.Fatal(err)
				}
				opts.NoJumpForward, opts.SchemaDrafts, opts.MaxDraft, opts.FixedDraft = false, true, 8, true
				got, err := Generate(ctx, m, tok, prompt, opts)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got.IDs, want.IDs) {
					t.Fatalf("schema %d: with schema drafts %v\nmasked decoding %v", i, got.IDs, want.IDs)
				}
				tm := got.Timing
				if tm.JumpedTokens != 0 || tm.SchemaAccepted != tm.AcceptedDrafts || tm.SchemaDrafted != tm.DraftedTokens {
					t.Errorf("schema %d: %d jumped, %d of %d drafts kept, %d of %d from the schema", i, tm.JumpedTokens,
						tm.AcceptedDrafts, tm.DraftedTokens, tm.SchemaAccepted, tm.SchemaDrafted)
				}
				saved += want.Timing.DecodeSteps - tm.DecodeSteps
				t.Logf("schema %d: %d tokens, decode steps %d -> %d, %d of %d schema drafts kept", i, len(got.IDs),
					want.Timing.DecodeSteps, tm.DecodeSteps, tm.SchemaAccepted, tm.SchemaDrafted)
			}
			if saved <= 0 {
				t.Errorf("schema drafts saved %d decode steps over %d schemas", saved, len(boundedSchemas))
			}
		})
	}
}

// TestFewHeadRowsKeepOutput: where the grammar allows few tokens the LM head computes only
// theirs, and the output is the same token for token as with the whole head: masked
// decoding, jump-forward, schema drafts with prompt lookup, and seeded sampling
// (temperature 0.9, top-p 0.95), 4 streams, on random Llama-3 and Qwen3 checkpoints.
func TestFewHeadRowsKeepOutput(t *testing.T) {
	for _, c := range []struct {
		name string
		load func(*testing.T) (*model.Model, *tokenizer.Tokenizer)
	}{{"llama3", synthModel}, {"qwen3", synthQwen3}} {
		t.Run(c.name, func(t *testing.T) {
			m, tok := c.load(t)
			defer m.Close()
			gs := NewGrammars(tok, 0)
			var reqs []Request
			for i, sc := range boundedSchemas {
				tab, err := gs.Compile(grammar.Spec{JSONSchema: []byte(sc)}, grammar.Options{Whitespace: grammar.Spaced})
				if err != nil {
					t.Fatal(err)
				}
				p := tok.Encode(fmt.Sprintf("Answer %d in JSON:", i), false)
				base := Request{Prompt: p, MaxTokens: 60, Grammar: tab}
				masked, jump, drafts, sampled := base, base, base, base
				masked.NoJumpForward = true
				drafts.SchemaDrafts, drafts.Proposer, drafts.MaxDraft, drafts.FixedDraft = true, spec.PromptLookup{}, 6, true
				sampled.Sampler = SamplerParams{Temperature: 0.9, TopP: 0.95, Seed: uint64(i + 1), RepeatPenalty: 1.1, FrequencyPenalty: 0.2}
				reqs = append(reqs, masked, jump, drafts, sampled)
			}
			for i := range reqs {
				reqs[i].ID = sched.SeqID(i + 1)
			}
			want, got := runBatchHead(t, m, tok, 4, reqs, true), runBatchHead(t, m, tok, 4, reqs, false)
			few, rows := 0, 0
			for i := range want {
				if !slices.Equal(got[i].ids, want[i].ids) || got[i].text != want[i].text {
					t.Fatalf("request %d: with few head rows %v\nwhole head %v", i, got[i].ids, want[i].ids)
				}
				if want[i].st.FewHeadRows != 0 {
					t.Errorf("request %d: WholeHead, yet %d rows over few tokens", i, want[i].st.FewHeadRows)
				}
				few, rows = few+got[i].st.FewHeadRows, rows+got[i].st.HeadRows
			}
			t.Logf("%d of %d logits rows over few tokens", few, rows)
			if few == 0 || few == rows {
				t.Errorf("%d of %d logits rows over few tokens: the test compared nothing", few, rows)
			}
		})
	}
}
