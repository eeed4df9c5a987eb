package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// Options control one generation.
type Options struct {
	// MaxTokens caps the generated tokens; <= 0 means until the context is full.
	MaxTokens int
	// MaxContext caps prompt + generated tokens; <= 0 means the model's
	// context (max_position_embeddings).
	MaxContext int
	Sampler    SamplerParams
	// StopIDs end generation when sampled, in addition to the model's EOS ids
	// (config.json and generation_config.json) and the tokenizer's EOS token.
	StopIDs []int
	// IgnoreEOS keeps generating through EOS (benchmarks); StopIDs still stop.
	IgnoreEOS bool
	// Stop strings end generation before their first occurrence in the text;
	// the stop string itself is not part of the output.
	Stop []string
	// KeepSpecial keeps special tokens (other than the stopping one) in the
	// text; by default they are skipped, as HF's skip_special_tokens=True.
	KeepSpecial bool
	// OnText receives the text as it is produced, in whole UTF-8 pieces that
	// concatenate to Result.Text. Returning an error stops generation.
	OnText func(piece string) error
}

// FinishReason says why generation ended.
const (
	FinishStop   = "stop"   // a stop token or stop string
	FinishLength = "length" // MaxTokens or the context was reached
)

// Usage counts tokens, as the OpenAI API does.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Timing splits the time of a generation into its two phases. Prefill runs the
// whole prompt in one batched pass; decode runs one token per step. Sampling
// is counted in the phase whose logits it reads; the OnText callback is not
// counted.
type Timing struct {
	PrefillMs   float64 `json:"prefill_ms"`
	PrefillTokS float64 `json:"prefill_tok_s"`
	// TTFTMs is from the start of Generate to the first token sampled
	// (prefill plus the first sampling step).
	TTFTMs      float64 `json:"ttft_ms"`
	DecodeMs    float64 `json:"decode_ms"`
	DecodeTokS  float64 `json:"decode_tok_s"`
	DecodeSteps int     `json:"decode_steps"`
}

// TokenLogprobs is one generated token's logprob and its top alternatives.
type TokenLogprobs struct {
	ID      int            `json:"id"`
	Logprob float32        `json:"logprob"`
	Top     []TokenLogprob `json:"top_logprobs,omitempty"`
}

// Result is a finished (or interrupted) generation.
type Result struct {
	PromptIDs []int `json:"prompt_ids"`
	// IDs are every sampled token, including a final stop token.
	IDs          []int           `json:"ids"`
	Text         string          `json:"text"`
	FinishReason string          `json:"finish_reason"`
	Usage        Usage           `json:"usage"`
	Timing       Timing          `json:"timing"`
	Logprobs     []TokenLogprobs `json:"logprobs,omitempty"`
}

// StopIDs are the ids that end generation for this model and tokenizer: the
// model's EOS ids (config.json, generation_config.json) and the tokenizer's
// EOS token.
func StopIDs(m *model.Model, tok *tokenizer.Tokenizer) []int {
	ids := slices.Clone(m.Config().EOS)
	if cfg := tok.Config(); cfg != nil && cfg.EOS != "" {
		if id, ok := tok.TokenID(cfg.EOS); ok && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// Generate runs the prompt through the model (one prefill), then samples and
// decodes one token per step until a stop token, a stop string, MaxTokens or
// the end of the context. On a cancelled ctx or an OnText error it returns the
// partial result with the error.
func Generate(ctx context.Context, m *model.Model, tok *tokenizer.Tokenizer, promptIDs []int, opts Options) (*Result, error) {
	start := time.Now()
	cfg := m.Config()
	if len(promptIDs) == 0 {
		return nil, errors.New("generate: empty prompt")
	}
	maxCtx := cfg.MaxPositions
	if opts.MaxContext > 0 && opts.MaxContext < maxCtx {
		maxCtx = opts.MaxContext
	}
	if len(promptIDs) >= maxCtx {
		return nil, fmt.Errorf("generate: the prompt has %d tokens; the context holds %d, leaving no room to generate", len(promptIDs), maxCtx)
	}
	vocab := min(cfg.VocabSize, tok.VocabSize())
	for i, id := range promptIDs {
		if id < 0 || id >= cfg.VocabSize {
			return nil, fmt.Errorf("generate: prompt token %d at position %d is outside the model's vocabulary (%d)", id, i, cfg.VocabSize)
		}
	}
	for _, s := range opts.Stop {
		if s == "" {
			return nil, errors.New("generate: empty stop string")
		}
	}
	maxNew := maxCtx - len(promptIDs)
	if opts.MaxTokens > 0 && opts.MaxTokens < maxNew {
		maxNew = opts.MaxTokens
	}
	// The sampler only sees ids the tokenizer knows: the LM head may have
	// padding rows beyond them (vocab_size rounded up) that mean nothing.
	sampler, err := NewSampler(opts.Sampler, vocab)
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	sampler.SetPrompt(promptIDs)
	var stops []int
	if !opts.IgnoreEOS {
		stops = StopIDs(m, tok)
	}
	stops = append(stops, opts.StopIDs...)

	res := &Result{PromptIDs: slices.Clone(promptIDs), IDs: make([]int, 0, min(maxNew, 4096))}
	out := newStopWriter(opts.Stop, opts.OnText)
	stream := tok.NewStreamDecoder(!opts.KeepSpecial)
	wantLogprobs := opts.Sampler.Logprobs || opts.Sampler.TopLogprobs > 0
	finish := func(reason string, err error) (*Result, error) {
		if reason != "" {
			res.FinishReason = reason
			// Pass on held text: after a stop string there is none; after a stop
			// token or at the length limit it was not the start of a stop string.
			if ferr := out.flush(); ferr != nil && err == nil {
				err = ferr
			}
		}
		res.Text = out.text.String()
		res.Usage = Usage{PromptTokens: len(promptIDs), CompletionTokens: len(res.IDs), TotalTokens: len(promptIDs) + len(res.IDs)}
		t := &res.Timing
		if t.PrefillMs > 0 {
			t.PrefillTokS = float64(len(promptIDs)) / (t.PrefillMs / 1000)
		}
		if t.DecodeMs > 0 {
			t.DecodeTokS = float64(t.DecodeSteps) / (t.DecodeMs / 1000)
		}
		return res, err
	}

	seq := m.NewSequence(maxCtx)
	defer seq.Release() // its cache serves the model's next generation
	t0 := time.Now()
	logits, err := m.Prefill(seq, promptIDs)
	if err != nil {
		return nil, fmt.Errorf("generate: prefill: %w", err)
	}
	// Sampling the first token belongs to prefill: it reads prefill's logits.
	var decodeDur time.Duration
	for step := 0; ; step++ {
		if err := ctx.Err(); err != nil {
			return finish("", err)
		}
		ts := time.Now()
		ch, err := sampler.Sample(logits)
		if err != nil {
			return finish("", fmt.Errorf("generate: step %d: %w", step, err))
		}
		if step == 0 {
			now := time.Now()
			res.Timing.PrefillMs = ms(now.Sub(t0))
			res.Timing.TTFTMs = ms(now.Sub(start))
		} else {
			decodeDur += time.Since(ts)
			res.Timing.DecodeMs = ms(decodeDur)
		}
		sampler.Accept(ch.ID)
		res.IDs = append(res.IDs, ch.ID)
		if wantLogprobs {
			res.Logprobs = append(res.Logprobs, TokenLogprobs{ID: ch.ID, Logprob: ch.Logprob, Top: slices.Clone(ch.TopLogprobs)})
		}
		if slices.Contains(stops, ch.ID) {
			return finish(FinishStop, nil)
		}
		if piece := stream.Next(ch.ID); piece != "" {
			stopped, err := out.write(piece)
			if err != nil {
				return finish("", err)
			}
			if stopped {
				return finish(FinishStop, nil)
			}
		}
		if len(res.IDs) >= maxNew {
			return finish(FinishLength, nil)
		}
		td := time.Now()
		logits, err = m.DecodeInto(logits, seq, ch.ID) // the sampler is done with them
		decodeDur += time.Since(td)
		res.Timing.DecodeSteps++
		res.Timing.DecodeMs = ms(decodeDur)
		if err != nil {
			return finish("", fmt.Errorf("generate: decode step %d: %w", res.Timing.DecodeSteps, err))
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// stopWriter feeds the stop-string rule (StopText) and passes what it releases to onText,
// keeping the whole text for the Result.
type stopWriter struct {
	rule    StopText
	onText  func(string) error
	text    strings.Builder
	stopped bool
}

func newStopWriter(stops []string, onText func(string) error) *stopWriter {
	return &stopWriter{rule: StopText{Stops: stops}, onText: onText}
}

// write adds piece and reports whether a stop string was found (the text
// before it has been emitted, the rest dropped).
func (w *stopWriter) write(piece string) (bool, error) {
	out, stopped := w.rule.Write(piece)
	w.stopped = w.stopped || stopped
	return stopped, w.emit(out)
}

// flush emits the held text at the end of generation.
func (w *stopWriter) flush() error { return w.emit(w.rule.Flush()) }

func (w *stopWriter) emit(s string) error {
	if s == "" {
		return nil
	}
	w.text.WriteString(s)
	if w.onText != nil {
		return w.onText(s)
	}
	return nil
}
