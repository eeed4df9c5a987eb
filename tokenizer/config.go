package tokenizer

import (
	"encoding/json"
	"fmt"
)

// parseConfig reads the fields of tokenizer_config.json that tokenwise uses. Token fields may
// be a string or an AddedToken object ({"content": ...}); chat_template may be a string or a
// list of {"name", "template"} (the one named "default" becomes ChatTemplate).
func parseConfig(data []byte) (*Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("tokenizer_config.json: %w", jsonErr(err))
	}
	o := obj{path: "tokenizer_config.json", m: raw}
	c := &Config{}
	if r, ok := raw["chat_template"]; ok && !isNull(r) {
		var s string
		if err := json.Unmarshal(r, &s); err == nil {
			c.ChatTemplate = s
		} else {
			var list []struct {
				Name     *string `json:"name"`
				Template *string `json:"template"`
			}
			if err := json.Unmarshal(r, &list); err != nil {
				return nil, fmt.Errorf("tokenizer_config.json: chat_template: want a string or a list of {name, template}")
			}
			c.ChatTemplates = map[string]string{}
			for i, e := range list {
				if e.Name == nil || e.Template == nil {
					return nil, fmt.Errorf("tokenizer_config.json: chat_template[%d]: want name and template", i)
				}
				c.ChatTemplates[*e.Name] = *e.Template
			}
			c.ChatTemplate = c.ChatTemplates["default"]
		}
	}
	for key, dst := range map[string]*string{"bos_token": &c.BOS, "eos_token": &c.EOS,
		"pad_token": &c.PAD, "unk_token": &c.UNK} {
		r, ok := raw[key]
		if !ok || isNull(r) {
			continue
		}
		var s string
		if err := json.Unmarshal(r, &s); err == nil {
			*dst = s
			continue
		}
		var at struct {
			Content *string `json:"content"`
		}
		if err := json.Unmarshal(r, &at); err != nil || at.Content == nil {
			return nil, fmt.Errorf("tokenizer_config.json: %s: want a string or {\"content\": ...}", key)
		}
		*dst = *at.Content
	}
	if _, ok := raw["add_bos_token"]; ok {
		if err := o.get("add_bos_token", &c.AddBOS); err != nil {
			return nil, err
		}
		c.HasAddBOS = !isNull(raw["add_bos_token"])
	}
	if _, ok := raw["add_eos_token"]; ok {
		if err := o.get("add_eos_token", &c.AddEOS); err != nil {
			return nil, err
		}
		c.HasAddEOS = !isNull(raw["add_eos_token"])
	}
	return c, nil
}
