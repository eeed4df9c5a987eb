#!/usr/bin/env bash
# Rebuilds the demo's embedded models from scratch, reproducibly (everything is seeded, and the
# trainer's sums are fixed for a given thread count, here 2):
#   base:  the essay-grading domain corpus (package domain: seed 1 train, seed 2 held out);
#          a byte-level BPE tokenizer (2048 ids asked; the corpus supports ~1986) learned on it
#          plus a little general text (demo/data/general.txt), so that the vocabulary holds
#          tokens the domain never uses; a 3-layer Llama-shape model (demo/base-config.json,
#          ~0.85M parameters) trained from seed 1 -> demo/model/
#   adapt: the specialization `tokenwise demo` runs (prune + up to 128 merged tokens, exp
#          init, fitted to the first 1000 training examples), then `tokenwise adapt`
#          (embeddings/head, first and last blocks) -> demo/adapted/
# Usage: scripts/make-demo-model.sh [all|base|adapt] [WORKDIR]   (default: all .cache/demo-build)
# Time on 2 idle cores (~1800 tokens/s): base ~20 minutes, adapt ~7 minutes. Needs the
# current tree to build (it embeds the committed demo models).
set -euo pipefail
cd "$(dirname "$0")/.."
STAGE=${1:-all}
WORK=${2:-.cache/demo-build}
STEPS=${DEMO_STEPS:-320}
ADAPT_STEPS=${DEMO_ADAPT_STEPS:-500}
STOP_AT=${DEMO_STOP_AT:-0}   # stop the base run after this many steps (0: all); the schedule still spans STEPS
mkdir -p "$WORK"
go build -o "$WORK/tokenwise" ./cmd/tokenwise
"$WORK/tokenwise" corpus --train 4000 --held-out 200 --out "$WORK"
if [[ $STAGE == all || $STAGE == base ]]; then
  "$WORK/tokenwise" train-tokenizer --corpus "$WORK/train.jsonl,demo/data/general.txt" --vocab-size 2048 --out "$WORK/tok"
  "$WORK/tokenwise" train --config demo/base-config.json --tokenizer "$WORK/tok" \
    --corpus "$WORK/train.jsonl,demo/data/general.txt" --eval "$WORK/held-out.jsonl" --eval-max 40 \
    --steps "$STEPS" --stop-at "$STOP_AT" --batch 8 --accum 2 --lr 2e-3 --min-lr 2e-4 --warmup 25 --seq-len 512 \
    --threads 2 --seed 1 --checkpoint-every 50 --dtype bf16 --out demo/model
fi
if [[ $STAGE == all || $STAGE == adapt ]]; then
  mkdir -p "$WORK/spec"
  "$WORK/tokenwise" corpus --train 1000 --held-out 1 --out "$WORK/spec"
  rm -rf "$WORK/specialized"
  "$WORK/tokenwise" specialize --model demo/model --corpus "$WORK/spec/train.jsonl" --prune --add 128 --min-docs 1 --max-token-bytes 1048576 --init exp --out "$WORK/specialized"
  "$WORK/tokenwise" adapt --model "$WORK/specialized" --corpus "$WORK/train.jsonl" --eval "$WORK/held-out.jsonl" --eval-max 40 \
    --steps "$ADAPT_STEPS" --batch 8 --accum 2 --lr 2e-3 --min-lr 2e-4 --warmup 20 --seq-len 512 \
    --threads 2 --seed 1 --checkpoint-every 25 --dtype bf16 --out demo/adapted
fi
