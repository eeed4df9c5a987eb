package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"

	"github.com/tokenwise/tokenwise/tokenizer"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatTemplate is a compiled Hugging Face chat template (the Jinja source from
// tokenizer_config.json's chat_template or GGUF's tokenizer.chat_template).
// It renders the way transformers' apply_chat_template(tokenize=False) does.
// A ChatTemplate is safe for concurrent use.
type ChatTemplate struct {
	src  string
	tmpl *jinja.Template
	bos  string
	eos  string
}

// ChatOptions are the per-render inputs beyond the messages.
type ChatOptions struct {
	// AddGenerationPrompt appends the header that opens the assistant's turn.
	AddGenerationPrompt bool
	// Vars are extra template variables, as apply_chat_template's **kwargs
	// (e.g. enable_thinking for Qwen3, date_string for Llama-3.x).
	Vars map[string]any
	// Now is the clock behind strftime_now; nil means time.Now. Tests fix it so
	// templates that print today's date (Llama-3.1/3.2) render reproducibly.
	Now func() time.Time
}

// NewChatTemplate compiles src. bos and eos are the tokenizer's BOS/EOS token
// strings (empty when the tokenizer has none); templates read them as
// bos_token and eos_token.
func NewChatTemplate(src, bos, eos string) (*ChatTemplate, error) {
	if strings.TrimSpace(src) == "" {
		return nil, fmt.Errorf("chat template: empty template")
	}
	t, err := compile(src)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	return &ChatTemplate{src: src, tmpl: t, bos: bos, eos: eos}, nil
}

// TokenizerTemplate compiles the chat template that comes with tok
// (tokenizer_config.json's chat_template, or GGUF's tokenizer.chat_template),
// with the tokenizer's BOS and EOS strings.
func TokenizerTemplate(tok *tokenizer.Tokenizer) (*ChatTemplate, error) {
	cfg := tok.Config()
	if cfg == nil || cfg.ChatTemplate == "" {
		return nil, fmt.Errorf("chat template: the tokenizer has none (no chat_template in tokenizer_config.json)")
	}
	return NewChatTemplate(cfg.ChatTemplate, cfg.BOS, cfg.EOS)
}

// ChatPrompt renders msgs with the template and encodes the text without
// adding special tokens (the template wrote them), as
// apply_chat_template(tokenize=True) does.
func (c *ChatTemplate) ChatPrompt(tok *tokenizer.Tokenizer, msgs []Message, opts ChatOptions) (ids []int, text string, err error) {
	text, err = c.Render(msgs, opts)
	if err != nil {
		return nil, "", err
	}
	return tok.Encode(text, false), text, nil
}

// Source returns the template's Jinja source.
func (c *ChatTemplate) Source() string { return c.src }

// Render renders the conversation to the prompt text. The text already holds
// every special token the model expects (BOS included when the template adds
// it), so it must be encoded without adding special tokens again — as
// apply_chat_template(tokenize=True) does.
func (c *ChatTemplate) Render(msgs []Message, opts ChatOptions) (string, error) {
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		d.AsDict().Set("role", jinja.NewString(m.Role))
		d.AsDict().Set("content", jinja.NewString(m.Content))
		list[i] = d
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	data := map[string]jinja.Value{
		"messages":              jinja.NewList(list),
		"add_generation_prompt": jinja.NewBool(opts.AddGenerationPrompt),
		"bos_token":             jinja.NewString(c.bos),
		"eos_token":             jinja.NewString(c.eos),
		// transformers passes tools=None and documents=None when not given.
		"tools":     jinja.None(),
		"documents": jinja.None(),
		"raise_exception": jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			msg := "raise_exception called"
			if len(args) > 0 {
				msg = plainString(args[0])
			}
			return jinja.Undefined(), fmt.Errorf("chat template raised: %s", msg)
		}),
		"strftime_now": jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if len(args) != 1 {
				return jinja.Undefined(), fmt.Errorf("strftime_now: want 1 argument (a format), got %d", len(args))
			}
			if !args[0].IsString() {
				return jinja.Undefined(), fmt.Errorf("strftime_now: format must be a string, got %s", args[0].String())
			}
			s, err := Strftime(now(), args[0].AsString())
			if err != nil {
				return jinja.Undefined(), err
			}
			return jinja.NewString(s), nil
		}),
	}
	// transformers passes only the special tokens the tokenizer has (its
	// special_tokens_map), so a missing one is undefined, not None or "".
	if c.bos == "" {
		delete(data, "bos_token")
	}
	if c.eos == "" {
		delete(data, "eos_token")
	}
	for k, v := range opts.Vars {
		data[k] = jinja.FromGoValue(v)
	}
	out, err := render(c.tmpl, data)
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return out, nil
}

// compile and render guard against a panic inside the template engine: a
// template comes from a model file, and bad input must give an error, never a
// crash (none was found fuzzing ardanlabs/jinja v1.8.0; this is defense in depth).
func compile(src string) (t *jinja.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("template engine failed: %v", r)
		}
	}()
	return jinja.Compile(src)
}

func render(t *jinja.Template, data map[string]jinja.Value) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("template engine failed: %v", r)
		}
	}()
	return t.RenderValues(data)
}

// plainString is v as Jinja prints it: a string without quotes.
func plainString(v jinja.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	return v.String()
}

// Strftime formats t with a Python strftime format, the directives chat
// templates use (C locale, as Python's default): %d %m %Y %y %H %I %M %S %p
// %B %b %A %a %j %e %%. Anything else is an error rather than a silent
// mismatch with Python.
func Strftime(t time.Time, format string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		ch := format[i]
		if ch != '%' {
			b.WriteByte(ch)
			continue
		}
		if i+1 >= len(format) {
			return "", fmt.Errorf("strftime: format %q ends with a lone %%", format)
		}
		i++
		switch format[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(&b, "%02d", h)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'B':
			b.WriteString(t.Month().String())
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			return "", fmt.Errorf("strftime: unsupported directive %%%c in %q", format[i], format)
		}
	}
	return b.String(), nil
}
