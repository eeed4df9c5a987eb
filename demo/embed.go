// Package demo is tokenwise's one-command demonstration and its embedded models: a small
// Llama-shape base model trained by tokenwise itself (package train) on the essay-grading
// domain task (package domain) with its own 2k byte-level BPE vocabulary, and the same model
// after vocabulary specialization and adaptation. Both are built reproducibly by
// scripts/make-demo-model.sh and compiled into the binary, so `tokenwise demo` and
// `tokenwise serve` work with no download.
//
// Run measures the effect of specialization on held-out prompts: output tokens, decode
// steps, prefill and decode time, LM-head rows, task accuracy (the verdict field of the JSON
// answer is computable from the essay) and the cost model's price per request.
package demo

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

//go:embed model/config.json model/generation_config.json model/model.safetensors model/tokenizer.json model/tokenizer_config.json
var baseFS embed.FS

//go:embed adapted/config.json adapted/generation_config.json adapted/model.safetensors adapted/tokenizer.json adapted/tokenizer_config.json adapted/vocab_map.json
var adaptedFS embed.FS

// BaseFS is the embedded base model: a Hugging Face folder under "model".
func BaseFS() fs.FS { sub, _ := fs.Sub(baseFS, "model"); return sub }

// ExtractModel writes the embedded base model into dir (created if needed) and returns dir,
// a folder model.Load and tokenizer.Load open.
func ExtractModel(dir string) (string, error) { return extract(baseFS, "model", dir) }

// ExtractAdapted writes the embedded specialized and adapted model into dir and returns dir.
func ExtractAdapted(dir string) (string, error) { return extract(adaptedFS, "adapted", dir) }

func extract(fsys embed.FS, root, dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	entries, err := fsys.ReadDir(root)
	if err != nil {
		return "", fmt.Errorf("embedded %s: %w", root, err)
	}
	for _, e := range entries {
		data, err := fsys.ReadFile(root + "/" + e.Name())
		if err != nil {
			return "", fmt.Errorf("embedded %s/%s: %w", root, e.Name(), err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}
