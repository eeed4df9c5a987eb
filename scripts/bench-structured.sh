#!/usr/bin/env bash
# What structured output saves on a JSON workload (not a test: timings depend on the machine;
# the CPU is printed): the demo's 48 held-out essay-grading prompts through `tokenwise serve`,
# greedy, plain and with response_format json_schema (domain/verdict.schema.json, spaced), at
# 1 and 16 concurrent streams, on the demo's base model and on its specialized+adapted one.
# Prints decode steps and output tokens per request, the share appended by jump-forward, wall
# time per request, requests/s, and the share of answers identical to the plain 1-stream one.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'kill %1 2>/dev/null || true; rm -rf "$out"' EXIT
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores" >&2
GOEXPERIMENT=simd go build -o "$out/tokenwise" ./cmd/tokenwise
"$out/tokenwise" corpus --out "$out/corpus" --train 0 --held-out 48 >/dev/null
port=${PORT:-8097}
for m in demo/model demo/adapted; do
	"$out/tokenwise" serve --model "$m" --port "$port" --max-seqs 16 >"$out/serve.log" 2>&1 &
	for _ in $(seq 60); do curl -sf "localhost:$port/health" >/dev/null && break; sleep 1; done
	echo "== $m"
	python3 tests/grammar/workload.py "http://localhost:$port" "$out/corpus/held-out.jsonl" 48
	kill %1
	wait %1 2>/dev/null || true
done
