package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/grammar"
)

// apiError is an error with the HTTP status and OpenAI error type it answers with.
type apiError struct {
	status int
	typ    string // invalid_request_error, authentication_error, ...
	param  string
	code   string // OpenAI's machine-readable code (unknown_parameter, model_not_found, ...); "" answers null
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *apiError {
	return &apiError{status: 400, typ: "invalid_request_error", param: param, msg: fmt.Sprintf(format, args...)}
}

// errorBody is OpenAI's error response: {"error": {"message", "type", "param", "code"}}.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    any     `json:"code"`
	} `json:"error"`
}

func (e *apiError) body() errorBody {
	var b errorBody
	b.Error.Message, b.Error.Type, b.Error.Code = e.msg, e.typ, nil
	if e.param != "" {
		b.Error.Param = &e.param
	}
	if e.code != "" {
		b.Error.Code = e.code
	}
	return b
}

// streamOptions is stream_options.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
	// IncludeTokens is tokenwise's: every chunk's choice carries "tokenwise": {"tokens": [...]},
	// each output token's id, text and source (sampled, forced, jump-forward, draft; domain when the
	// specialized vocabulary added it), and the usage chunk "tokenwise": {"steps": [...]}, the
	// engine steps the request ran in (the web page's timeline).
	IncludeTokens bool `json:"include_tokens"`
}

// samplingFields are the request fields shared by both endpoints.
type samplingFields struct {
	Model            string          `json:"model"`
	MaxTokens        *int            `json:"max_tokens"`
	Temperature      *float64        `json:"temperature"`
	TopP             *float64        `json:"top_p"`
	TopK             *int            `json:"top_k"`
	MinP             *float64        `json:"min_p"`
	Seed             *int64          `json:"seed"`
	Stop             json.RawMessage `json:"stop"`
	PresencePenalty  *float64        `json:"presence_penalty"`
	FrequencyPenalty *float64        `json:"frequency_penalty"`
	RepetitionPenal  *float64        `json:"repetition_penalty"` // vLLM's extra parameter
	N                *int            `json:"n"`
	Stream           bool            `json:"stream"`
	StreamOptions    *streamOptions  `json:"stream_options"`
	IgnoreEOS        bool            `json:"ignore_eos"` // vLLM's extra parameter, for benchmarks
	Speculate        *bool           `json:"speculate"`  // tokenwise's: false turns the server's drafting off for this request
	ResponseFormat   *responseFormat `json:"response_format"`
}

// responseFormat is OpenAI's response_format: text, json_object or json_schema. Whitespace
// is tokenwise's: where the JSON may have whitespace (compact, the default; spaced; pretty).
type responseFormat struct {
	Type       string            `json:"type"`
	JSONSchema *jsonSchemaFormat `json:"json_schema"`
	Whitespace string            `json:"whitespace"`
	// JumpForward (tokenwise's; default true) appends the text the grammar forces without
	// sampling it; false samples it token by token, masked (the output speculation's schema
	// drafts reproduce, and what an engine without jump-forward writes).
	JumpForward *bool `json:"jump_forward"`
}

type jsonSchemaFormat struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// completionRequest is POST /v1/completions.
type completionRequest struct {
	samplingFields
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"` // legacy: number of top alternatives (0–5 in OpenAI, 0–20 here)
	Echo     bool            `json:"echo"`
	Suffix   *string         `json:"suffix"`
}

// chatMessage is one message; content is a string or a list of {"type":"text","text":...} parts.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	samplingFields
	Messages            []chatMessage `json:"messages"`
	MaxCompletionTokens *int          `json:"max_completion_tokens"`
	Logprobs            bool          `json:"logprobs"`
	TopLogprobs         *int          `json:"top_logprobs"`
}

// genParams are the validated generation parameters of a request.
type genParams struct {
	maxTokens   int    // -1: to the end of the context
	maxName     string // the field that set it: max_tokens or max_completion_tokens
	sampler     engine.SamplerParams
	seeded      bool
	stop        []string
	ignoreEOS   bool
	logprobs    bool
	topLogprobs int
	speculate   bool           // draft with the server's proposers (Config.Speculate)
	tokens      bool           // stream_options.include_tokens: per-token sources and the step timeline
	grammar     *grammar.Table // response_format's, compiled (nil: free text)
	noJump      bool           // response_format.jump_forward false
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// params validates the shared fields. maxTokens is the endpoint's length limit, from the
// field maxName; logprob settings are filled in by the endpoint.
func (f *samplingFields) params(maxName string, maxTokens *int) (genParams, *apiError) {
	p := genParams{maxTokens: -1, maxName: maxName, ignoreEOS: f.IgnoreEOS, speculate: f.Speculate == nil || *f.Speculate}
	if f.N != nil && *f.N != 1 {
		return p, badRequest("n", "n = %d: only n = 1 is supported", *f.N)
	}
	if maxTokens != nil {
		if *maxTokens < 1 {
			return p, badRequest(maxName, "%s %d: must be >= 1", maxName, *maxTokens)
		}
		p.maxTokens = *maxTokens
	}
	sp := &p.sampler
	sp.Temperature = 1 // OpenAI's default
	if v := f.Temperature; v != nil {
		if !finite(*v) || *v < 0 || *v > 2 {
			return p, badRequest("temperature", "temperature %v: must be in [0, 2]", *v)
		}
		sp.Temperature = float32(*v)
	}
	if v := f.TopP; v != nil {
		if !finite(*v) || *v <= 0 || *v > 1 {
			return p, badRequest("top_p", "top_p %v: must be in (0, 1]", *v)
		}
		sp.TopP = float32(*v)
	}
	if v := f.TopK; v != nil {
		switch {
		case *v == -1 || *v == 0: // vLLM's "off" is -1
		case *v < 0:
			return p, badRequest("top_k", "top_k %d: must be >= 1, or 0 or -1 for all tokens", *v)
		default:
			sp.TopK = *v
		}
	}
	if v := f.MinP; v != nil {
		if !finite(*v) || *v < 0 || *v > 1 {
			return p, badRequest("min_p", "min_p %v: must be in [0, 1]", *v)
		}
		sp.MinP = float32(*v)
	}
	if v := f.PresencePenalty; v != nil {
		if !finite(*v) || *v < -2 || *v > 2 {
			return p, badRequest("presence_penalty", "presence_penalty %v: must be in [-2, 2]", *v)
		}
		sp.PresencePenalty = float32(*v)
	}
	if v := f.FrequencyPenalty; v != nil {
		if !finite(*v) || *v < -2 || *v > 2 {
			return p, badRequest("frequency_penalty", "frequency_penalty %v: must be in [-2, 2]", *v)
		}
		sp.FrequencyPenalty = float32(*v)
	}
	if v := f.RepetitionPenal; v != nil {
		if !finite(*v) || *v <= 0 {
			return p, badRequest("repetition_penalty", "repetition_penalty %v: must be > 0", *v)
		}
		sp.RepeatPenalty = float32(*v)
	}
	if f.Seed != nil {
		sp.Seed, p.seeded = uint64(*f.Seed), true
	}
	stops, err := stopStrings(f.Stop)
	if err != nil {
		return p, err
	}
	p.stop = stops
	return p, nil
}

// stopStrings reads stop: null, a string, or a list of up to 4 strings (OpenAI's limit).
func stopStrings(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "stop: expected a string or a list of strings")
	}
	if len(many) > 4 {
		return nil, badRequest("stop", "stop: %d strings, at most 4", len(many))
	}
	out := many[:0]
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// promptInput reads a completion prompt: a string, a list of token ids, or a list holding
// one of those (batches of prompts are not supported).
func promptInput(raw json.RawMessage) (text string, ids []int, _ *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, badRequest("prompt", "prompt is required")
	}
	if err := json.Unmarshal(raw, &text); err == nil {
		return text, nil, nil
	}
	if err := json.Unmarshal(raw, &ids); err == nil {
		return "", ids, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", nil, badRequest("prompt", "prompt: expected a string, a list of token ids, or a list of one of those")
	}
	if len(list) != 1 {
		return "", nil, badRequest("prompt", "prompt: a batch of %d prompts; send one prompt per request", len(list))
	}
	if err := json.Unmarshal(list[0], &text); err == nil {
		return text, nil, nil
	}
	if err := json.Unmarshal(list[0], &ids); err == nil {
		return "", ids, nil
	}
	return "", nil, badRequest("prompt", "prompt[0]: expected a string or a list of token ids")
}

// messageText reads a message's content: a string, or text parts joined.
func messageText(i int, raw json.RawMessage) (string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	param := fmt.Sprintf("messages[%d].content", i)
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(param, "%s: expected a string or a list of text parts", param)
	}
	var b bytes.Buffer
	for j, p := range parts {
		if p.Type != "text" {
			return "", badRequest(param, "%s[%d]: content type %q is not supported (text only)", param, j, p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// Usage is a response's token accounting: OpenAI's fields plus the request's token
// economics — how long its prompt (prefill) and its generated tokens (decode) took, in
// milliseconds and engine steps. A step batches many sequences; each sequence in it is
// charged the step's whole time, so these are latencies as that request saw them.
type Usage struct {
	PromptTokens        int           `json:"prompt_tokens"`
	CompletionTokens    int           `json:"completion_tokens"`
	TotalTokens         int           `json:"total_tokens"`
	PromptTokensDetails *tokenDetails `json:"prompt_tokens_details,omitempty"`
	QueueMs             float64       `json:"queue_ms"`
	TTFTMs              float64       `json:"ttft_ms"`
	PrefillMs           float64       `json:"prefill_ms"`
	PrefillSteps        int           `json:"prefill_steps"`
	DecodeMs            float64       `json:"decode_ms"`
	DecodeSteps         int           `json:"decode_steps"`
	// With speculation: tokens drafted for verification and those kept.
	DraftedTokens  int `json:"drafted_tokens,omitempty"`
	AcceptedDrafts int `json:"accepted_drafts,omitempty"`
	// Of those, drafts of the text the schema forces (serve --speculate schema).
	SchemaDrafted  int `json:"schema_drafted_tokens,omitempty"`
	SchemaAccepted int `json:"schema_accepted_drafts,omitempty"`
	// With response_format json_object or json_schema: output tokens the grammar forced, and
	// those of them appended by jump-forward without a decode step of their own (each one a
	// decode step saved).
	ForcedTokens int `json:"forced_tokens,omitempty"`
	JumpedTokens int `json:"jumped_tokens,omitempty"`
}

type tokenDetails struct {
	CachedTokens int `json:"cached_tokens"` // prompt tokens served from the prefix cache
}

// Completion (legacy) response and chunk.
type completionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
	Tokenwise    *chunkTokens        `json:"tokenwise,omitempty"`
}

type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type completionResponse struct {
	ID        string             `json:"id"`
	Object    string             `json:"object"`
	Created   int64              `json:"created"`
	Model     string             `json:"model"`
	Choices   []completionChoice `json:"choices"`
	Usage     *Usage             `json:"usage,omitempty"`
	Tokenwise *chunkSteps        `json:"tokenwise,omitempty"`
}

// Chat response and chunk.
type chatLogprob struct {
	Token       string        `json:"token"`
	Logprob     float32       `json:"logprob"`
	Bytes       []int         `json:"bytes"`
	TopLogprobs []chatLogprob `json:"top_logprobs,omitempty"`
}

type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
}

type chatMessageOut struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type chatChoice struct {
	Index        int             `json:"index"`
	Message      *chatMessageOut `json:"message,omitempty"`
	Delta        *chatMessageOut `json:"delta,omitempty"`
	Logprobs     *chatLogprobs   `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
	Tokenwise    *chunkTokens    `json:"tokenwise,omitempty"`
}

type chatResponse struct {
	ID        string       `json:"id"`
	Object    string       `json:"object"`
	Created   int64        `json:"created"`
	Model     string       `json:"model"`
	Choices   []chatChoice `json:"choices"`
	Usage     *Usage       `json:"usage,omitempty"`
	Tokenwise *chunkSteps  `json:"tokenwise,omitempty"`
}

// chunkTokens is a streamed choice's tokenwise extension (stream_options.include_tokens).
type chunkTokens struct {
	Tokens []streamToken `json:"tokens"`
}

// streamToken is one output token and how it came to be: "sampled" (drawn from the
// logits), "forced" (the only token the grammar allowed), "jump-forward" (forced text
// appended without a step of its own) or "draft" (proposed and verified). Domain marks a
// token the specialized vocabulary added (Config.DomainTokens); Special a special token
// (the end of the answer), whose text is not in the content.
type streamToken struct {
	ID      int    `json:"id"`
	Text    string `json:"text"`
	Source  string `json:"source"`
	Domain  bool   `json:"domain,omitempty"`
	Special bool   `json:"special,omitempty"`
}

// chunkSteps is the usage chunk's tokenwise extension: the request's engine steps.
type chunkSteps struct {
	Steps []stepSpan `json:"steps"`
}
