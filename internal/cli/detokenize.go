package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/tokenizer"
)

func newDetokenizeCmd() *cobra.Command {
	var (
		tokPath, jsonlPath string
		skipSpecial        bool
	)
	cmd := &cobra.Command{
		Use:   "detokenize --tokenizer PATH [--jsonl FILE|-] [--skip-special] [ID...]",
		Short: "Turn token ids back into text",
		Long: `Decode token ids into text exactly as Hugging Face tokenizers does
(decode(ids, skip_special_tokens=False) unless --skip-special).

The ids come from the arguments, or from standard input (space-separated, or one JSON
array). With --jsonl, each input line is {"ids": [...]} (or a bare JSON array) and each
output line is {"text": ...}, in order.`,
		Example: `  tokenwise detokenize --tokenizer tokenizer.json 9707 1879
  tokenwise tokenize --tokenizer T --jsonl in.jsonl | tokenwise detokenize --tokenizer T --jsonl -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			tk, err := loadTokenizer(tokPath)
			if err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			if jsonlPath != "" {
				if len(args) > 0 {
					return errors.New("give either IDs or --jsonl, not both")
				}
				parse := func(b []byte) ([]int, error) { return parseIDsLine(tk, b) }
				err := eachJSONL(cmd, jsonlPath, parse, func(batch [][]int) error {
					for _, ids := range batch {
						if err := writeJSONLine(out, struct {
							Text string `json:"text"`
						}{tk.Decode(ids, skipSpecial)}); err != nil {
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
			var ids []int
			if len(args) > 0 {
				if ids, err = parseIDFields(tk, args, "argument"); err != nil {
					return err
				}
			} else {
				text, where, err := textArg(cmd, nil)
				if err != nil {
					return err
				}
				if t := strings.TrimSpace(text); strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{") {
					ids, err = parseIDsLine(tk, []byte(t))
				} else {
					ids, err = parseIDFields(tk, strings.Fields(text), where+" field")
				}
				if err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
			}
			out.WriteString(tk.Decode(ids, skipSpecial))
			out.WriteByte('\n')
			return out.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokPath, "tokenizer", "", tokFlagHelp)
	f.StringVar(&jsonlPath, "jsonl", "", `read {"ids": [...]} lines from FILE, or - for stdin`)
	f.BoolVar(&skipSpecial, "skip-special", false, "leave out special tokens (HF skip_special_tokens=True)")
	_ = cmd.MarkFlagRequired("tokenizer")
	return cmd
}

// parseIDsLine reads {"ids": [...]} or a bare JSON array, and checks every id.
func parseIDsLine(tk *tokenizer.Tokenizer, b []byte) ([]int, error) {
	s := strings.TrimSpace(string(b))
	var ids []int
	switch {
	case s == "":
		return nil, errors.New(`empty line: want {"ids": [...]}`)
	case s[0] == '[':
		if err := json.Unmarshal([]byte(s), &ids); err != nil {
			return nil, fmt.Errorf("bad id array: %w", err)
		}
	case s[0] == '{':
		var o struct {
			IDs *[]int `json:"ids"`
		}
		if err := json.Unmarshal([]byte(s), &o); err != nil {
			return nil, fmt.Errorf("bad JSON object: %w", err)
		}
		if o.IDs == nil {
			return nil, errors.New(`object has no "ids" array`)
		}
		ids = *o.IDs
	default:
		return nil, fmt.Errorf(`want {"ids": [...]}, got %.20q`, s)
	}
	for i, id := range ids {
		if err := checkID(tk, id); err != nil {
			return nil, fmt.Errorf("ids[%d]: %w", i, err)
		}
	}
	return ids, nil
}

func parseIDFields(tk *tokenizer.Tokenizer, fields []string, what string) ([]int, error) {
	ids := make([]int, 0, len(fields))
	for i, f := range fields {
		id, err := strconv.Atoi(strings.Trim(f, ","))
		if err != nil {
			return nil, fmt.Errorf("%s %d: %q is not a token id", what, i+1, f)
		}
		if err := checkID(tk, id); err != nil {
			return nil, fmt.Errorf("%s %d: %w", what, i+1, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// checkID rejects ids the tokenizer has no token for: Decode would silently skip them.
func checkID(tk *tokenizer.Tokenizer, id int) error {
	if _, ok := tk.Token(id); !ok {
		return fmt.Errorf("id %d has no token (vocabulary size %d)", id, tk.VocabSize())
	}
	return nil
}
