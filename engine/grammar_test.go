package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/engine/sched"
	"github.com/tokenwise/tokenwise/grammar"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// synthQwen3 is a random-weight Qwen3 with the real Qwen3 tokenizer (151,936 LM-head rows,
// padding past the tokenizer's).
func synthQwen3(t *testing.T) (*model.Model, *tokenizer.Tokenizer) {
	cfg := `{"model_type":"qwen3","vocab_size":151936,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"head_dim":8,"max_position_embeddings":512,"rms_norm_eps":1e-6,
		"rope_theta":1000000,"tie_word_embeddings":true,"bos_token_id":151643,"eos_token_id":151645}`
	return synthFrom(t, "qwen3", cfg, `{"eos_token_id":[151645,151643]}`)
}

type grammarRun struct {
	text, reason string
	st           Stats
}

// runGrammar generates one completion per request under its grammar, n at a time in one
// engine (continuous batching), and returns them in request order.
func runGrammar(t *testing.T, m *model.Model, tok *tokenizer.Tokenizer, streams int, reqs []Request) []grammarRun {
	t.Helper()
	maxLen := 0
	for _, r := range reqs {
		maxLen = max(maxLen, len(r.Prompt)+r.MaxTokens)
	}
	e, err := NewEngine(EngineConfig{Model: m, Tokenizer: tok, NumBlocks: streams*(maxLen/16+2) + 8, BlockSize: 16,
		Sched: sched.Config{MaxSeqs: streams, MaxBatchedTokens: 256, MaxWaiting: len(reqs), MaxModelLen: maxLen}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, r := range reqs {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]grammarRun, len(reqs))
	index := map[sched.SeqID]int{}
	for i, r := range reqs {
		index[r.ID] = i
	}
	texts := make([]strings.Builder, len(reqs))
	for left := len(reqs); left > 0; {
		rep, err := e.Step()
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range rep.Tokens {
			texts[index[tk.Seq]].WriteString(tk.Text)
		}
		for _, f := range rep.Finished {
			if f.Err != nil {
				t.Fatalf("sequence %d: %v", f.Seq, f.Err)
			}
			i := index[f.Seq]
			texts[i].WriteString(f.Text)
			out[i] = grammarRun{texts[i].String(), f.Reason, f.Stats}
			left--
		}
	}
	return out
}

// boundedSchemas are testref.Schemas with bounded strings, so that a random model's
// completions end within max_tokens: a random model closes a free string with about one
// token in a hundred.
var boundedSchemas = []string{
	`{"type":"object","properties":{"store":{"type":"string","maxLength":16},"date":{"type":"string","format":"date"},"items":{"type":"array","items":{"type":"object","properties":{"name":{"type":"string","maxLength":12},"qty":{"type":"integer","minimum":1,"maximum":99},"cents":{"type":"integer","minimum":0,"maximum":100000}},"required":["name","qty","cents"],"additionalProperties":false},"minItems":1,"maxItems":3}},"required":["store","date","items"],"additionalProperties":false}`,
	`{"type":"object","properties":{"score":{"type":"integer","minimum":0,"maximum":10},"grade":{"enum":["A","B","C","D","F"]},"feedback":{"type":"string","maxLength":30},"flags":{"type":"array","items":{"enum":["plagiarism","off-topic","late"]},"maxItems":2}},"required":["score","grade","feedback"],"additionalProperties":false}`,
	`{"type":"object","properties":{"label":{"enum":["billing","bug","feature request","질문"]},"urgent":{"type":"boolean"},"id":{"type":"string","format":"uuid"},"note":{"anyOf":[{"type":"string","maxLength":10},{"type":"null"}]}},"required":["label","urgent","id","note"],"additionalProperties":false}`,
	`{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string","pattern":"^[a-z]{1,6}$"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["name","kids"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
	`{"anyOf":[{"type":"object","properties":{"kind":{"const":"point"},"x":{"type":"integer","minimum":-1000,"maximum":1000},"y":{"type":"integer","exclusiveMinimum":-5,"exclusiveMaximum":5}},"required":["kind","x","y"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"text"},"body":{"type":"string","minLength":1,"maxLength":20},"when":{"type":"string","format":"date-time"}},"required":["kind","body","when"],"additionalProperties":false}]}`,
}

// TestGrammarOutputsValidate: random-weight models of two tokenizers (Llama-3, Qwen3),
// sampling at temperature 1 with a different seed per request, 16 streams, under the test
// schemas and json_object: every completion that ends (not cut by max_tokens) validates
// under Python jsonschema, and every one cut by max_tokens is a prefix of a valid document.
func TestGrammarOutputsValidate(t *testing.T) {
	var docs []testref.JSONDoc
	cut := 0
	for _, c := range []struct {
		name string
		load func(*testing.T) (*model.Model, *tokenizer.Tokenizer)
	}{{"llama3", synthModel}, {"qwen3", synthQwen3}} {
		m, tok := c.load(t)
		gs := NewGrammars(tok, 0)
		var reqs []Request
		var raws []json.RawMessage
		var tables []*grammar.Table
		schemas := append(append([]string{}, boundedSchemas...), "")
		n := 64
		if os.Getenv("TOKENWISE_LONG") != "" {
			n = 512
		}
		for i := 0; i < n; i++ {
			s := schemas[i%len(schemas)]
			spec := grammar.Spec{JSONSchema: []byte(s)}
			if s == "" {
				spec = grammar.Spec{JSONObject: true}
			}
			tab, err := gs.Compile(spec, grammar.Options{Whitespace: grammar.Whitespace(i / len(schemas) % 3)})
			if err != nil {
				t.Fatal(err)
			}
			var raw json.RawMessage
			if s != "" {
				raw = json.RawMessage(s)
			}
			raws, tables = append(raws, raw), append(tables, tab)
			reqs = append(reqs, Request{ID: sched.SeqID(i + 1), Prompt: tok.Encode(fmt.Sprintf("Answer %d in JSON:", i), false),
				MaxTokens: 160, Sampler: SamplerParams{Temperature: 1, Seed: uint64(i)}, Grammar: tab})
		}
		runs := runGrammar(t, m, tok, 16, reqs)
		for i, r := range runs {
			if r.reason == FinishLength {
				cut++
				if !tables[i].Grammar().Prefix([]byte(r.text)) {
					t.Errorf("%s %d: cut at max_tokens, %q is no prefix of a document", c.name, i, r.text)
				}
				continue
			}
			docs = append(docs, testref.JSONDoc{Schema: raws[i], Doc: r.text})
		}
	}
	fails := testref.ValidateJSON(t, docs)
	for _, f := range fails[:min(10, len(fails))] {
		t.Error(f)
	}
	t.Logf("%d completions valid, %d cut by max_tokens", len(docs)-len(fails), cut)
	if len(docs) < (len(docs)+cut)*2/3 {
		t.Errorf("only %d of %d completions ended", len(docs), len(docs)+cut)
	}
}
