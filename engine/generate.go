package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tokenwise/tokenwise/engine/sched"
	"github.com/tokenwise/tokenwise/grammar"
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
	// Processor, if set, masks the logits before each sampling step.
	Processor LogitsProcessor
	// Grammar, if set, constrains the output to a document of it, with jump-forward over
	// forced text unless NoJumpForward (Request.Grammar).
	Grammar       *grammar.Table
	NoJumpForward bool
	// WholeHead computes every logits row over the whole vocabulary (EngineConfig.WholeHead).
	WholeHead bool
	// SchemaDrafts drafts the grammar's forced text for verification instead of jumping
	// over it (Request.SchemaDrafts): the output is NoJumpForward's, in fewer passes.
	SchemaDrafts bool
	// Proposer, if set, drafts up to MaxDraft tokens (default 4) per step, verified in one
	// pass (Engine.Step); the output is what it would have been without it.
	Proposer   Proposer
	MaxDraft   int
	FixedDraft bool // draft MaxDraft every step, whatever it costs (Request.FixedDraft)
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
	DecodeTokS  float64 `json:"decode_tok_s"` // tokens after the first per second of decode
	DecodeSteps int     `json:"decode_steps"`
	// DraftedTokens were proposed for verification (Options.Proposer), AcceptedDrafts kept.
	DraftedTokens  int `json:"drafted_tokens,omitempty"`
	AcceptedDrafts int `json:"accepted_drafts,omitempty"`
	// SchemaDrafted and SchemaAccepted are those of the drafts that were the grammar's
	// forced text (Options.SchemaDrafts).
	SchemaDrafted  int `json:"schema_drafted,omitempty"`
	SchemaAccepted int `json:"schema_accepted,omitempty"`
	// AcceptedAt[i] of DraftedAt[i] drafts at position i of a step's draft were kept.
	DraftedAt  []int `json:"drafted_at,omitempty"`
	AcceptedAt []int `json:"accepted_at,omitempty"`
	// ForcedTokens were the only token the processor allowed; JumpedTokens of them were
	// appended without sampling (jump-forward), each a decode step saved.
	ForcedTokens int `json:"forced_tokens,omitempty"`
	JumpedTokens int `json:"jumped_tokens,omitempty"`
	// MaskMs is the time spent computing grammar masks (Options.Grammar), part of decode.
	MaskMs float64 `json:"mask_ms,omitempty"`
	// HeadRows logits rows were computed, FewHeadRows of them over the grammar's few allowed
	// tokens only (Stats.FewHeadRows).
	HeadRows    int `json:"head_rows,omitempty"`
	FewHeadRows int `json:"few_head_rows,omitempty"`
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

// Generate runs the prompt through the model (prefill), then samples and decodes one token
// per step until a stop token, a stop string, MaxTokens or the end of the context: a batch
// of one through the engine's step loop (Engine.Step), over a paged cache sized for this
// generation (prompt + MaxTokens, or the context without MaxTokens). On a cancelled ctx or
// an OnText error it returns the partial result with the error.
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
	maxNew := maxCtx - len(promptIDs)
	if opts.MaxTokens > 0 && opts.MaxTokens < maxNew {
		maxNew = opts.MaxTokens
	}
	// The cache holds the whole generation; one pass takes at most prefillChunk tokens of
	// the prompt, as a Sequence's Prefill does.
	const blockSize = 16
	need := len(promptIDs) + maxNew
	e, err := NewEngine(EngineConfig{Model: m, Tokenizer: tok, NumBlocks: (need + blockSize - 1) / blockSize, BlockSize: blockSize,
		Sched: sched.Config{MaxSeqs: 1, MaxBatchedTokens: prefillChunk, MaxWaiting: 1, MaxModelLen: need}, WholeHead: opts.WholeHead})
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	defer e.Close() // its cache serves the model's next generation
	if err := e.Add(Request{ID: 1, Prompt: promptIDs, MaxTokens: maxNew, Sampler: opts.Sampler, Stop: opts.Stop,
		StopIDs: opts.StopIDs, IgnoreEOS: opts.IgnoreEOS, KeepSpecial: opts.KeepSpecial, Arrival: start,
		Processor: opts.Processor, Grammar: opts.Grammar, NoJumpForward: opts.NoJumpForward, SchemaDrafts: opts.SchemaDrafts, Proposer: opts.Proposer, MaxDraft: opts.MaxDraft, FixedDraft: opts.FixedDraft}); err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}

	res := &Result{PromptIDs: slices.Clone(promptIDs), IDs: make([]int, 0, min(maxNew, 4096))}
	var text strings.Builder
	emit := func(s string) error {
		if s == "" {
			return nil
		}
		text.WriteString(s)
		if opts.OnText != nil {
			return opts.OnText(s)
		}
		return nil
	}
	finish := func(st Stats, reason string, err error) (*Result, error) {
		res.FinishReason = reason
		res.Text = text.String()
		res.Usage = Usage{PromptTokens: len(promptIDs), CompletionTokens: len(res.IDs), TotalTokens: len(promptIDs) + len(res.IDs)}
		t := &res.Timing
		t.PrefillMs, t.DecodeMs, t.DecodeSteps = ms(st.Prefill), ms(st.Decode), st.DecodeSteps
		t.TTFTMs = ms(st.TTFT)
		t.DraftedTokens, t.AcceptedDrafts = st.DraftedTokens, st.AcceptedDrafts
		t.SchemaDrafted, t.SchemaAccepted = st.SchemaDrafted, st.SchemaAccepted
		t.DraftedAt, t.AcceptedAt = st.DraftedAt, st.AcceptedAt
		t.ForcedTokens, t.JumpedTokens = st.ForcedTokens, st.JumpedTokens
		t.MaskMs = ms(st.MaskTime)
		t.HeadRows, t.FewHeadRows = st.HeadRows, st.FewHeadRows
		if t.PrefillMs > 0 {
			t.PrefillTokS = float64(len(promptIDs)) / (t.PrefillMs / 1000)
		}
		if t.DecodeMs > 0 && len(res.IDs) > 1 {
			// Tokens after the first (prefill's) per second of decode: one per step, more
			// when drafts are kept.
			t.DecodeTokS = float64(len(res.IDs)-1) / (t.DecodeMs / 1000)
		}
		return res, err
	}
	for {
		if err := ctx.Err(); err != nil {
			st, _ := e.Stats(1)
			return finish(st, "", err)
		}
		rep, err := e.Step()
		for _, tk := range rep.Tokens {
			res.IDs = append(res.IDs, tk.ID)
			if tk.Logprob != nil {
				res.Logprobs = append(res.Logprobs, *tk.Logprob)
			}
			if err := emit(tk.Text); err != nil {
				st, _ := e.Stats(1)
				return finish(st, "", err)
			}
		}
		if err != nil {
			var st Stats
			if len(rep.Finished) > 0 {
				st = rep.Finished[0].Stats
			}
			return finish(st, "", fmt.Errorf("generate: %w", err))
		}
		if len(rep.Finished) > 0 {
			f := rep.Finished[0]
			// Pass on held text: after a stop string there is none; after a stop token or at
			// the length limit it was not the start of a stop string.
			return finish(f.Stats, f.Reason, emit(f.Text))
		}
		if len(rep.Step.Work) == 0 {
			return finish(Stats{}, "", errors.New("generate: the engine scheduled nothing")) // cannot happen: the cache holds the request
		}
	}
}

// prefillChunk bounds the prompt tokens of one pass in Generate: activations grow with it,
// while the weights are already reused 512 times per read (as model's Prefill chunks).
const prefillChunk = 512

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
