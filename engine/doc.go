// Package engine turns a model and a tokenizer into text: the sampler (greedy,
// temperature, top-k/top-p/min-p, penalties, seeded), chat templates rendered
// as Hugging Face transformers renders them, and the generation loop — the one
// place where prefill and decode are timed.
package engine
