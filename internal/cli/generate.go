package cli

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/engine/spec"
	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tokenizer"
)

type generateFlags struct {
	model       string
	prompt      string
	promptFile  string
	chat        bool
	system      string
	maxTokens   int
	ctxSize     int
	temperature float32
	topK        int
	topP        float32
	minP        float32
	repeat      float32
	repeatLastN int
	presence    float32
	frequency   float32
	seed        int64
	threads     int
	kvDType     string
	mmap        bool
	stop        []string
	ignoreEOS   bool
	jsonOut     bool
	speculate   string
	maxDraft    int
	draftIndex  string
	fixedDraft  bool
	grammar     grammarFlags
}

func newGenerateCmd() *cobra.Command {
	var f generateFlags
	cmd := &cobra.Command{
		Use:   "generate --model PATH (--prompt TEXT | --prompt-file FILE)",
		Short: "Generate text, streaming it, and report prefill and decode times",
		Long: `Generate runs the prompt through the model in one prefill pass, then decodes one token
per step, streaming the text to stdout. It ends with one line on stderr: prompt tokens,
prefill time and speed, time to first token, decode speed and steps.

PATH is a Hugging Face folder (config.json, safetensors, tokenizer.json) or a .gguf file.
With --chat the prompt is the user message of a conversation rendered by the model's chat
template (tokenizer_config.json's chat_template, or GGUF's tokenizer.chat_template).
Generation stops at the model's EOS ids (config.json, generation_config.json), the
tokenizer's EOS token, a --stop string (not printed), --max-tokens or the context.
--temperature 0 (the default) is greedy decoding: the same prompt gives the same text every
run. tokenwise serve follows OpenAI instead: a request without "temperature" samples at
temperature 1; send "temperature": 0 to get this command's greedy output from the server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGenerate(cmd.Context(), f, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model: a Hugging Face folder or a .gguf file")
	fl.StringVar(&f.prompt, "prompt", "", "prompt text")
	fl.StringVar(&f.promptFile, "prompt-file", "", "read the prompt from this file, byte for byte (\"-\": standard input), instead of --prompt")
	fl.BoolVar(&f.chat, "chat", false, "render the prompt as a user message with the model's chat template")
	fl.StringVar(&f.system, "system", "", "system message (with --chat)")
	fl.IntVar(&f.maxTokens, "max-tokens", 256, "most tokens to generate (0: until the context is full)")
	fl.IntVar(&f.ctxSize, "ctx-size", 0, "context length (0: the model's)")
	fl.Float32Var(&f.temperature, "temperature", 0, "sampling temperature (0: greedy; the server's default is 1, as OpenAI's)")
	fl.IntVar(&f.topK, "top-k", 0, "keep the K most likely tokens (0: off)")
	fl.Float32Var(&f.topP, "top-p", 1, "nucleus sampling: keep the most likely tokens up to this probability (1: off)")
	fl.Float32Var(&f.minP, "min-p", 0, "drop tokens below this fraction of the top token's probability (0: off)")
	fl.Float32Var(&f.repeat, "repeat-penalty", 1, "repetition penalty over the last --repeat-last-n tokens (1: off)")
	fl.IntVar(&f.repeatLastN, "repeat-last-n", 64, "window of the repetition penalty (0: whole context)")
	fl.Float32Var(&f.presence, "presence-penalty", 0, "OpenAI presence penalty over generated tokens")
	fl.Float32Var(&f.frequency, "frequency-penalty", 0, "OpenAI frequency penalty over generated tokens")
	fl.Int64Var(&f.seed, "seed", -1, "sampling seed (-1: random; the seed used is in --json output)")
	fl.IntVar(&f.threads, "threads", 0, "compute threads (0: one per CPU)")
	fl.StringVar(&f.kvDType, "kv-cache-dtype", "f32", "KV cache dtype: f32, or f16 (half the memory; attention computed as llama.cpp's default)")
	fl.BoolVar(&f.mmap, "mmap", false, "map the checkpoint from the page cache (quick to load, shared between processes) instead of reading it into huge-page memory (faster decode)")
	fl.StringArrayVar(&f.stop, "stop", nil, "stop string (repeatable); generation ends before it")
	fl.BoolVar(&f.ignoreEOS, "ignore-eos", false, "keep generating past EOS (benchmarks)")
	addSpecFlags(fl, &f.speculate, &f.maxDraft, &f.draftIndex, &f.fixedDraft)
	addGrammarFlags(fl, &f.grammar)
	fl.BoolVar(&f.jsonOut, "json", false, `print {"prompt_ids","ids","text","finish_reason","usage","timing","seed"} instead of streaming`)
	return cmd
}

// generateJSON is the --json output.
type generateJSON struct {
	*engine.Result
	Seed uint64 `json:"seed"`
}

func runGenerate(ctx context.Context, f generateFlags, stdin io.Reader, stdout, stderr io.Writer) error {
	if f.model == "" {
		return errors.New("generate: --model is required")
	}
	if f.promptFile != "" {
		if f.prompt != "" {
			return errors.New("generate: --prompt and --prompt-file both given: use one")
		}
		var b []byte
		var err error
		if f.promptFile == "-" {
			b, err = io.ReadAll(stdin)
		} else {
			b, err = os.ReadFile(f.promptFile)
		}
		if err != nil {
			return fmt.Errorf("generate: --prompt-file: %w", err)
		}
		if len(b) == 0 {
			return fmt.Errorf("generate: --prompt-file %s is empty", f.promptFile)
		}
		f.prompt = string(b)
	}
	if f.prompt == "" {
		return errors.New("generate: --prompt (or --prompt-file) is required (and must not be empty)")
	}
	if f.system != "" && !f.chat {
		return errors.New("generate: --system needs --chat")
	}
	if f.maxTokens < 0 {
		return fmt.Errorf("generate: --max-tokens %d: must be >= 0", f.maxTokens)
	}
	seed := uint64(f.seed)
	if f.seed < 0 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("generate: seed: %w", err)
		}
		seed = binary.LittleEndian.Uint64(b[:])
	}
	params := engine.SamplerParams{
		Temperature: f.temperature, TopK: f.topK, TopP: f.topP, MinP: f.minP,
		RepeatPenalty: f.repeat, RepeatLastN: f.repeatLastN,
		PresencePenalty: f.presence, FrequencyPenalty: f.frequency, Seed: seed,
	}
	if err := params.Validate(); err != nil {
		return fmt.Errorf("generate: %w", err)
	}

	tok, err := loadModelTokenizer(f.model)
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	var ids []int
	if f.chat {
		tmpl, err := engine.TokenizerTemplate(tok)
		if err != nil {
			return fmt.Errorf("generate: --chat: %s: %w", f.model, err)
		}
		var msgs []engine.Message
		if f.system != "" {
			msgs = append(msgs, engine.Message{Role: "system", Content: f.system})
		}
		msgs = append(msgs, engine.Message{Role: "user", Content: f.prompt})
		if ids, _, err = tmpl.ChatPrompt(tok, msgs, engine.ChatOptions{AddGenerationPrompt: true}); err != nil {
			return fmt.Errorf("generate: --chat: %w", err)
		}
	} else {
		ids = tok.Encode(f.prompt, true)
	}

	kv, err := model.ParseKVDType(f.kvDType)
	if err != nil {
		return fmt.Errorf("generate: --kv-cache-dtype: %w", err)
	}
	// The grammar before the weights: a schema error costs no model load.
	gram, err := f.grammar.table(engine.NewGrammars(tok, 1))
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	modelGC() // as bench measures its memory: after the tokenizer, before the weights
	m, err := model.Load(f.model, model.Options{Threads: f.threads, KVCache: kv, Mmap: f.mmap})
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	defer m.Close()

	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	opts := engine.Options{
		MaxTokens: f.maxTokens, MaxContext: f.ctxSize, Sampler: params,
		Stop: f.stop, IgnoreEOS: f.ignoreEOS, MaxDraft: f.maxDraft, FixedDraft: f.fixedDraft,
	}
	prop, _, err := proposers(f.speculate, f.draftIndex, f.model, false)
	if err != nil {
		return fmt.Errorf("generate: %w", err)
	}
	if len(prop) > 0 {
		opts.Proposer = prop
	}
	opts.Grammar, opts.NoJumpForward = gram, f.grammar.noJump
	if spec.SchemaDrafts(f.speculate) {
		if gram == nil {
			return errors.New("generate: --speculate schema drafts the text a grammar forces: give --json-schema or --grammar")
		}
		opts.SchemaDrafts = true
	}
	if !f.jsonOut {
		opts.OnText = func(s string) error {
			_, err := io.WriteString(stdout, s)
			return err
		}
	}
	// After the flags are checked: a mistyped one is reported without waiting for the
	// repacks.
	if err := m.Warm(); err != nil { // the one-time repacks, before the prefill is timed
		return fmt.Errorf("generate: %w", err)
	}
	res, err := engine.Generate(ctx, m, tok, ids, opts)
	if err != nil {
		if res == nil {
			return fmt.Errorf("generate: %s: %w", f.model, err)
		}
		// Interrupted: report what was done, then the error.
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, summaryLine(res))
		return fmt.Errorf("generate: %w", err)
	}
	if f.jsonOut {
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(generateJSON{Result: res, Seed: seed}); err != nil {
			return err
		}
	} else if res.Text != "" && !strings.HasSuffix(res.Text, "\n") {
		fmt.Fprintln(stderr) // keep the summary on its own line without changing stdout
	}
	fmt.Fprintln(stderr, summaryLine(res))
	return nil
}

// summaryLine is the one-line report that ends every generation.
func summaryLine(r *engine.Result) string {
	t := r.Timing
	line := fmt.Sprintf("prompt %d tokens | prefill %.1f ms (%.1f tok/s) | TTFT %.1f ms | decode %.1f tok/s over %d steps (%.1f ms) | %d tokens, finish %s",
		r.Usage.PromptTokens, t.PrefillMs, t.PrefillTokS, t.TTFTMs, t.DecodeTokS, t.DecodeSteps, t.DecodeMs, r.Usage.CompletionTokens, r.FinishReason)
	if t.ForcedTokens > 0 {
		line += fmt.Sprintf(" | grammar: %d forced, %d jumped (decode steps saved), mask %.1f ms", t.ForcedTokens, t.JumpedTokens, t.MaskMs)
	}
	if t.DraftedTokens > 0 {
		line += fmt.Sprintf(" | drafts: %d proposed, %d kept (%.0f%%)", t.DraftedTokens, t.AcceptedDrafts, 100*float64(t.AcceptedDrafts)/float64(t.DraftedTokens))
		if t.SchemaDrafted > 0 {
			line += fmt.Sprintf(", of them the schema's %d, %d kept", t.SchemaDrafted, t.SchemaAccepted)
		}
	}
	return line
}

// loadModelTokenizer loads the tokenizer that goes with a model path. Its errors name the
// path, not the command: each command (generate, bench, serve) puts its own name in front.
func loadModelTokenizer(path string) (*tokenizer.Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--model: %w", err)
	}
	if !st.IsDir() {
		if !strings.EqualFold(filepath.Ext(path), ".gguf") {
			return nil, fmt.Errorf("--model %s: not a model folder or .gguf file", path)
		}
		f, err := gguf.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		tok, err := tokenizer.FromGGUF(f)
		if err != nil {
			return nil, fmt.Errorf("%s: tokenizer: %w", path, err)
		}
		return tok, nil
	}
	tok, err := tokenizer.Load(path)
	if err != nil {
		return nil, fmt.Errorf("%s: tokenizer: %w", path, err)
	}
	return tok, nil
}
