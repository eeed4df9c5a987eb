package server

import "testing"

// FuzzRequestParsing feeds arbitrary bodies through everything that reads a request before
// it reaches the model: no input may panic, and every rejection must be a 4xx error.
func FuzzRequestParsing(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hi","max_tokens":3,"temperature":0.5,"stop":["a"],"logprobs":2}`,
		`{"prompt":[1,2,3],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"prompt":[[1,2]],"top_k":-1,"min_p":0.1,"seed":-7}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}],"logprobs":true,"top_logprobs":3}`,
		`{"messages":[{"role":"system","content":null}],"max_completion_tokens":1e400}`,
		`{"prompt":"x","stop":"\u0000","n":1,"presence_penalty":2,"frequency_penalty":-2}`,
		"{\"prompt\":\"\xff\"}", `[`, `null`, `{"prompt":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(e *apiError) {
			if e != nil && (e.status < 400 || e.status >= 500 || e.msg == "") {
				t.Fatalf("rejection %+v for %q", e, body)
			}
		}
		var c completionRequest
		if e := decodeJSON(body, &c); e != nil {
			check(e)
		} else {
			_, e := c.params("max_tokens", c.MaxTokens)
			check(e)
			_, _, e = promptInput(c.Prompt)
			check(e)
		}
		var ch chatRequest
		if e := decodeJSON(body, &ch); e != nil {
			check(e)
			return
		}
		_, e := ch.params("max_completion_tokens", ch.MaxCompletionTokens)
		check(e)
		for i, m := range ch.Messages {
			_, e := messageText(i, m.Content)
			check(e)
		}
	})
}
