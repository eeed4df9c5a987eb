package train

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/tokenwise/tokenwise/tokenizer"
)

// Pair is one corpus record: a prompt and its completion, or a plain text (Prompt empty,
// Completion the text).
type Pair struct {
	Prompt, Completion string
	Plain              bool
}

// ReadPairs reads corpus files: JSONL with {"prompt","completion"} or {"text"} lines, or any
// other file as plain text, one record per paragraph.
func ReadPairs(paths ...string) ([]Pair, error) {
	var out []Pair
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		trimmed := bytes.TrimSpace(data)
		if len(trimmed) == 0 || trimmed[0] != '{' {
			// A text file: one record per paragraph (blank-line separated).
			for _, para := range strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n\n") {
				if strings.TrimSpace(para) != "" {
					out = append(out, Pair{Completion: strings.TrimSpace(para), Plain: true})
				}
			}
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 1<<20), 1<<30)
		line := 0
		for sc.Scan() {
			line++
			b := bytes.TrimSpace(sc.Bytes())
			if len(b) == 0 {
				continue
			}
			var rec struct {
				Prompt     *string `json:"prompt"`
				Completion *string `json:"completion"`
				Text       *string `json:"text"`
			}
			if err := json.Unmarshal(b, &rec); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", p, line, err)
			}
			switch {
			case rec.Prompt != nil && rec.Completion != nil:
				out = append(out, Pair{Prompt: *rec.Prompt, Completion: *rec.Completion})
			case rec.Text != nil:
				out = append(out, Pair{Completion: *rec.Text, Plain: true})
			default:
				return nil, fmt.Errorf("%s:%d: want {\"prompt\",\"completion\"} or {\"text\"}", p, line)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("corpus: no records in %v", paths)
	}
	return out, nil
}

// ChatPrompt renders a user prompt in ChatML up to the assistant's turn: the text a chat
// template with add_generation_prompt writes, and what generation starts from.
func ChatPrompt(prompt string) string {
	return "<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n"
}

// EndOfTurn closes the assistant's turn; its token is the one generation stops at.
const EndOfTurn = "<|im_end|>"

// Encode turns a pair into a training sequence: ChatPrompt(prompt) + completion + <|im_end|>,
// with the loss on the completion and the end-of-turn token when completionOnly (on every
// token otherwise). Plain texts are trained on whole, followed by <|endoftext|> when the
// tokenizer has it. Sequences longer than maxLen are cut (maxLen <= 0: no limit).
func Encode(tok *tokenizer.Tokenizer, p Pair, completionOnly bool, maxLen int) Sequence {
	var ids []int
	var mask []bool
	if p.Plain {
		ids = tok.Encode(p.Completion, false)
		if id, ok := tok.TokenID("<|endoftext|>"); ok {
			ids = append(ids, id)
		}
	} else {
		ids = tok.Encode(ChatPrompt(p.Prompt), false)
		n := len(ids)
		ids = append(ids, tok.Encode(p.Completion+EndOfTurn, false)...)
		if completionOnly {
			mask = make([]bool, len(ids))
			for i := n; i < len(ids); i++ {
				mask[i] = true
			}
		}
	}
	if maxLen > 0 && len(ids) > maxLen {
		ids = ids[:maxLen]
		if mask != nil {
			mask = mask[:maxLen]
		}
	}
	return Sequence{IDs: ids, Mask: mask}
}
