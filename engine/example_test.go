package engine_test

import (
	"fmt"
	"os"

	"github.com/tokenwise/tokenwise/engine"
)

func ExampleChatTemplate_Render() {
	// SmolLM2-135M-Instruct's template (from its GGUF's tokenizer.chat_template).
	src, err := os.ReadFile("testdata/smollm2-135m-instruct.jinja")
	if err != nil {
		fmt.Println(err)
		return
	}
	tmpl, err := engine.NewChatTemplate(string(src), "<|im_start|>", "<|im_end|>")
	if err != nil {
		fmt.Println(err)
		return
	}
	text, err := tmpl.Render([]engine.Message{{Role: "user", Content: "Hi!"}}, engine.ChatOptions{AddGenerationPrompt: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(text)
	// Output:
	// <|im_start|>system
	// You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
	// <|im_start|>user
	// Hi!<|im_end|>
	// <|im_start|>assistant
}

func ExampleSampler() {
	// Logits for a 4-token vocabulary; token 3 was already said in the prompt.
	logits := []float32{1.0, 2.5, 0.3, 2.6}
	s, err := engine.NewSampler(engine.SamplerParams{RepeatPenalty: 1.3, Logprobs: true}, len(logits))
	if err != nil {
		fmt.Println(err)
		return
	}
	s.SetPrompt([]int{3})
	ch, err := s.Sample(logits) // greedy: 2.6/1.3 = 2.0 now loses to 2.5; the logprob is the model's own (before the penalty): 2.5 - logsumexp(logits)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("token %d, logprob %.3f\n", ch.ID, ch.Logprob)
	// Output: token 1, logprob -0.892
}
