#!/usr/bin/env bash
# Draft-free speculation on a base and on a specialized vocabulary (not a test: timings depend
# on the machine). The specialized model is `tokenwise specialize --prune` of the base on a
# corpus of the speculation bench's prompts and the base model's greedy answers (what
# scripts/bench-speculate.sh saved in .cache/bench-speculate; run it first). tokenwise export
# writes no Q4_1, so both sides are Q8_0: the base through `export --format hf` and back, the
# specialized model from its folder. Each runs scripts/bench-speculate.sh at STREAMS streams
# (default 1; "1 16": both) with
# `--speculate prompt,domain` (the domain index empty at start on both sides), the two
# alternating ROUNDS times (default 2); the lines printed are each run's speedup over the
# same model's plain decoding.
#
#   scripts/bench-speculate-vocab.sh
#   KINDS=extraction ROUNDS=3 scripts/bench-speculate-vocab.sh
#   STREAMS=16 KINDS="extraction sampled" ROUNDS=1 scripts/bench-speculate-vocab.sh
set -euo pipefail
cd "$(dirname "$0")/.."
refs=${TOKENWISE_REFS:-$PWD/.cache/refs}
base=${MODEL:-$refs/smollm2/smollm2-135m-instruct-q4_1.gguf}
answers=.cache/bench-speculate
out=${OUT:-.cache/bench-speculate-vocab}
mkdir -p "$out"
tw="$out/tokenwise"
GOEXPERIMENT=simd go build -o "$tw" ./cmd/tokenwise

python3 - "$answers" "$out/corpus.jsonl" <<'PY'
import json, os, sys
src, dst = sys.argv[1], sys.argv[2]
n = 0
with open(dst, "w") as f:
    for kind in ("extraction", "code-edit", "free"):
        prompts = os.path.join(src, f"prompts-{kind}.json")
        ans = [os.path.join(src, f"ref-tokenwise-{kind}-{s}.json") for s in (1, 16)]
        ans = [a for a in ans if os.path.exists(a)]
        if not os.path.exists(prompts) or not ans:
            sys.exit(f"no saved prompts or answers for {kind} in {src}: run scripts/bench-speculate.sh first")
        for p, a in zip(json.load(open(prompts)), json.load(open(ans[0]))):
            f.write(json.dumps({"prompt": p, "completion": a}) + "\n")
            n += 1
print(f"corpus: {n} prompts and answers", file=sys.stderr)
PY
rm -rf "$out/pruned" "$out/base-hf"
"$tw" specialize --model "$base" --corpus "$out/corpus.jsonl" --prune --out "$out/pruned" >"$out/specialize.txt"
grep -E "^vocabulary|^LM head" "$out/specialize.txt" >&2
rm -f "$out/pruned/draft_index.bin" # the domain index starts empty on both sides
"$tw" export --model "$base" --format hf --out "$out/base-hf" >/dev/null
"$tw" export --model "$out/base-hf" --format gguf --dtype q8_0 --out "$out/base-q8_0.gguf" >/dev/null
"$tw" export --model "$out/pruned" --format gguf --dtype q8_0 --out "$out/pruned-q8_0.gguf" >/dev/null
for _ in $(seq "${ROUNDS:-2}"); do
	for m in base pruned; do
		OUT="$out/run-$m" TW="$tw" MODEL="$out/$m-q8_0.gguf" MODES=prompt,domain KINDS="${KINDS:-extraction code-edit}" \
			N="${N:-16}" STREAMS="${STREAMS:-1}" LLAMA=0 scripts/bench-speculate.sh 2>&1 | grep -E "x \(" | sed "s/^ */$m vocabulary: /"
	done
done
