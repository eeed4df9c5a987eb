package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tokenwise/tokenwise/engine"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// Chat prompts. A chat template writes each message's role and content between the
// model's control tokens, and the rendered text is then encoded with those tokens
// recognised, so a client's text could otherwise write the structure itself: a role
// "user<|end_header_id|>..." or a content holding "<|eot_id|><|start_header_id|>system..."
// opens turns the client has no right to. Hence:
//   - roles are system, user and assistant, plus tool when the template handles it;
//   - content holding the text of a special token is refused (400 naming
//     messages[i].content) unless Config.AllowSpecialInContent is set, for trusted clients
//     that write control tokens on purpose. Refusing is the default rather than encoding
//     such text as plain characters because the template renders one string: once rendered,
//     the client's "<|eot_id|>" and the template's cannot be told apart, and encoding each
//     message apart would bypass the template's own whitespace and BOS rules.

// chatRoles are the roles a template accepts.
func chatRoles(tmpl *engine.ChatTemplate) []string {
	roles := []string{"system", "user", "assistant"}
	if tmpl != nil {
		src := tmpl.Source()
		if strings.Contains(src, `'tool'`) || strings.Contains(src, `"tool"`) {
			roles = append(roles, "tool")
		}
	}
	return roles
}

// specialTexts finds the text of special tokens in a string.
type specialTexts struct {
	set     map[string]bool
	lengths []int     // distinct lengths in set
	first   [256]bool // first bytes of the texts
}

func newSpecialTexts(tok *tokenizer.Tokenizer) *specialTexts {
	st := &specialTexts{set: map[string]bool{}}
	for id := range tok.VocabSize() {
		if !tok.IsSpecial(id) {
			continue
		}
		text, ok := tok.Token(id)
		if !ok || text == "" || st.set[text] {
			continue
		}
		st.set[text] = true
		st.first[text[0]] = true
		if !slices.Contains(st.lengths, len(text)) {
			st.lengths = append(st.lengths, len(text))
		}
	}
	return st
}

// find returns the first special token's text in s.
func (st *specialTexts) find(s string) (string, bool) {
	for i := range len(s) {
		if !st.first[s[i]] {
			continue
		}
		for _, n := range st.lengths {
			if i+n <= len(s) && st.set[s[i:i+n]] {
				return s[i : i+n], true
			}
		}
	}
	return "", false
}

// chatPrompt renders messages with the tokenizer's chat template.
func (s *Server) chatPrompt(msgs []chatMessage) ([]int, *apiError) {
	if s.tmpl == nil {
		return nil, badRequest("messages", "this model has no chat template (%v); use /v1/completions", s.tmplErr)
	}
	if len(msgs) == 0 {
		return nil, badRequest("messages", "messages must not be empty")
	}
	em := make([]engine.Message, len(msgs))
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d].role", i)
		if m.Role == "" {
			return nil, badRequest(param, "%s is required", param)
		}
		if !slices.Contains(s.roles, m.Role) {
			return nil, badRequest(param, "%s %q: this model's chat template takes the roles %s", param, m.Role, strings.Join(s.roles, ", "))
		}
		text, aerr := messageText(i, m.Content)
		if aerr != nil {
			return nil, aerr
		}
		if !s.cfg.AllowSpecialInContent {
			if tok, ok := s.specials.find(text); ok {
				param := fmt.Sprintf("messages[%d].content", i)
				return nil, badRequest(param, "%s holds the special token %q, which the server would read as the chat template's own; "+
					"such text is refused unless the server runs with --allow-special-in-content", param, tok)
			}
		}
		em[i] = engine.Message{Role: m.Role, Content: text}
	}
	ids, _, err := s.tmpl.ChatPrompt(s.tok, em, engine.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		return nil, badRequest("messages", "rendering the chat template: %v", err)
	}
	return ids, nil
}
