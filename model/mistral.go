package model

// Mistral is Llama's block with sliding-window attention: a token attends to at most
// sliding_window previous positions (Config.SlidingWindow, applied in attention).
func init() { register("mistral", loadLlama) }
