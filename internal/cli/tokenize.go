package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// jsonlBatch is how many JSONL lines are encoded together: enough to keep every core busy,
// few enough that a huge file streams through in bounded memory.
const jsonlBatch = 1024

func newTokenizeCmd() *cobra.Command {
	var (
		tokPath, jsonlPath string
		noSpecial, asJSON  bool
		threads            int
	)
	cmd := &cobra.Command{
		Use:   "tokenize --tokenizer PATH [--jsonl FILE|-] [--no-special] [--json] [TEXT]",
		Short: "Turn text into token ids, and show how it fragments",
		Long: `Tokenize TEXT (or standard input when TEXT is not given) exactly as Hugging Face
tokenizers does, and print the ids and each token's piece of text.

PATH is a tokenizer.json, a model folder holding one (and tokenizer_config.json), or a
GGUF file (its embedded tokenizer, as llama.cpp reads it).

With --jsonl, each input line is a JSON string or {"text": ...} and each output line is
{"ids": [...]}, in order. --no-special is HF add_special_tokens=False: no BOS/EOS from the
post-processor; added tokens written in the text are still matched, as HF does.`,
		Example: `  tokenwise tokenize --tokenizer Qwen3-0.6B/ '{"status": "approved"}'
  tokenwise tokenize --tokenizer tokenizer.json --jsonl prompts.jsonl > ids.jsonl`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tk, err := loadTokenizer(tokPath)
			if err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			if jsonlPath != "" {
				if len(args) > 0 {
					return errors.New("give either TEXT or --jsonl, not both")
				}
				err := eachJSONL(cmd, jsonlPath, parseTextLine, func(texts []string) error {
					for _, ids := range tk.EncodeBatch(texts, !noSpecial, threads) {
						if err := writeJSONLine(out, struct {
							IDs []int `json:"ids"`
						}{nonNil(ids)}); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					return err
				}
				return out.Flush()
			}
			text, where, err := textArg(cmd, args)
			if err != nil {
				return err
			}
			if i := invalidUTF8(text); i >= 0 {
				return fmt.Errorf("%s: invalid UTF-8 at byte %d", where, i)
			}
			ids, offsets := tk.EncodeOffsets(text, !noSpecial)
			pieces := make([]string, len(ids))
			for i, id := range ids {
				pieces[i] = piece(tk, text, id, offsets[i])
			}
			if asJSON {
				tokens := make([]string, len(ids))
				for i, id := range ids {
					tokens[i], _ = tk.Token(id)
				}
				if err := writeJSONLine(out, struct {
					IDs     []int    `json:"ids"`
					Tokens  []string `json:"tokens"`
					Pieces  []string `json:"pieces"`
					Offsets [][2]int `json:"offsets"`
					Count   int      `json:"count"`
					Bytes   int      `json:"bytes"`
				}{nonNil(ids), tokens, pieces, nonNilOffsets(offsets), len(ids), len(text)}); err != nil {
					return err
				}
				return out.Flush()
			}
			fmt.Fprintf(out, "%d tokens, %d bytes\n", len(ids), len(text))
			fmt.Fprintln(out, joinInts(ids, " "))
			// The pieces separated by '|' show how the text fragments; whitespace and bytes
			// that are not whole UTF-8 are escaped so that every token stays visible.
			for i, p := range pieces {
				if i > 0 {
					out.WriteByte('|')
				}
				out.WriteString(visible(p))
			}
			out.WriteByte('\n')
			return out.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokPath, "tokenizer", "", tokFlagHelp)
	f.StringVar(&jsonlPath, "jsonl", "", `read JSONL (a JSON string or {"text": ...} per line) from FILE, or - for stdin`)
	f.BoolVar(&noSpecial, "no-special", false, "do not add BOS/EOS (HF add_special_tokens=False)")
	f.BoolVar(&asJSON, "json", false, `print {"ids","tokens","pieces","offsets","count","bytes"} as JSON`)
	f.IntVar(&threads, "threads", 0, "encoding threads for --jsonl (0: all cores)")
	_ = cmd.MarkFlagRequired("tokenizer")
	return cmd
}

const tokFlagHelp = "tokenizer.json, a model folder holding one, or a GGUF file (required)"

// loadTokenizer loads --tokenizer PATH: a tokenizer.json, a model folder or a GGUF file.
func loadTokenizer(path string) (*tokenizer.Tokenizer, error) {
	if path == "" {
		return nil, errors.New("--tokenizer PATH is required (a tokenizer.json or a model folder)")
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("--tokenizer: %w", err)
	}
	if !st.IsDir() && strings.HasSuffix(strings.ToLower(path), ".gguf") {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--tokenizer: %w", err)
		}
		defer f.Close() // the tokenizer keeps no reference to the mapping
		tk, err := tokenizer.FromGGUF(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return tk, nil
	}
	tk, err := tokenizer.Load(path)
	if err != nil {
		if st.IsDir() {
			return nil, fmt.Errorf("--tokenizer %s: %w", path, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tk, nil
}

// textArg returns the text to work on: the argument, or all of standard input, and a name
// for it in error messages.
func textArg(cmd *cobra.Command, args []string) (string, string, error) {
	if len(args) == 1 {
		return args[0], "TEXT", nil
	}
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok && isTerminal(f) {
		return "", "", errors.New("no TEXT given: pass it as an argument, on standard input, or use --jsonl FILE")
	}
	b, err := io.ReadAll(in)
	if err != nil {
		return "", "", fmt.Errorf("stdin: %w", err)
	}
	return string(b), "stdin", nil
}

// eachJSONL reads JSONL from path ("-" = stdin), parses every line with parse and hands the
// values to flush in batches, in order. Errors name the file and line.
func eachJSONL[T any](cmd *cobra.Command, path string, parse func([]byte) (T, error), flush func([]T) error) error {
	var in io.Reader
	name := path
	if path == "-" {
		in, name = cmd.InOrStdin(), "stdin"
	} else {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("--jsonl: %w", err)
		}
		defer f.Close()
		in = f
	}
	r := bufio.NewReaderSize(in, 1<<20)
	var batch []T
	for line := 1; ; line++ {
		b, err := r.ReadBytes('\n')
		if len(b) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		b = trimEOL(b)
		if i := invalidUTF8(string(b)); i >= 0 {
			return fmt.Errorf("%s:%d: invalid UTF-8 at byte %d of the line", name, line, i)
		}
		v, perr := parse(b)
		if perr != nil {
			return fmt.Errorf("%s:%d: %w", name, line, perr)
		}
		batch = append(batch, v)
		if len(batch) == jsonlBatch {
			if err := flush(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
		if err == io.EOF {
			break
		}
	}
	if len(batch) > 0 {
		return flush(batch)
	}
	return nil
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
		if n := len(b); n > 0 && b[n-1] == '\r' {
			b = b[:n-1]
		}
	}
	return b
}

// parseTextLine reads one tokenize input line: a JSON string or an object with "text".
func parseTextLine(b []byte) (string, error) {
	b = []byte(strings.TrimSpace(string(b)))
	if len(b) == 0 {
		return "", errors.New(`empty line: want a JSON string or {"text": ...}`)
	}
	switch b[0] {
	case '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return "", fmt.Errorf("bad JSON string: %w", err)
		}
		return s, nil
	case '{':
		var o struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(b, &o); err != nil {
			return "", fmt.Errorf("bad JSON object: %w", err)
		}
		if o.Text == nil {
			return "", errors.New(`object has no "text" string`)
		}
		return *o.Text, nil
	}
	return "", fmt.Errorf(`want a JSON string or {"text": ...}, got %.20q`, b)
}

// piece is the text a token stands for: the token decoded alone. A byte-level token that
// holds only part of a character decodes to U+FFFD; then its bytes are taken from the text at
// the token's offsets instead, so the split inside the character stays visible. (Offsets
// alone would not do: with trim_offsets they leave out a token's leading spaces.)
func piece(tk *tokenizer.Tokenizer, text string, id int, off [2]int) string {
	s := tk.Decode([]int{id}, false)
	if strings.ContainsRune(s, utf8.RuneError) && off[0] < off[1] && off[1] <= len(text) {
		if t := text[off[0]:off[1]]; !strings.ContainsRune(t, utf8.RuneError) {
			return t
		}
	}
	return s
}

// visible escapes what would hide token boundaries: whitespace other than ' ', '|', '\\',
// control characters and bytes that are not whole UTF-8.
func visible(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '|':
			b.WriteString(`\|`)
		case r == '\\':
			b.WriteString(`\\`)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			fmt.Fprintf(&b, `\u%04x`, r)
		case r != ' ' && isSpace(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func isSpace(r rune) bool {
	switch r {
	case '\v', '\f', 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0x200b, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// invalidUTF8 returns the byte offset of the first invalid UTF-8 sequence in s, or -1.
func invalidUTF8(s string) int {
	if utf8.ValidString(s) {
		return -1
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

func writeJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func joinInts(xs []int, sep string) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteString(sep)
		}
		fmt.Fprint(&b, x)
	}
	return b.String()
}

// nonNil makes an empty id list print as [] rather than null.
func nonNil(ids []int) []int {
	if ids == nil {
		return []int{}
	}
	return ids
}

func nonNilOffsets(o [][2]int) [][2]int {
	if o == nil {
		return [][2]int{}
	}
	return o
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
