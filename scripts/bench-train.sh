#!/usr/bin/env bash
# Training tokens/s on a SmolLM2-135M-shaped net (BenchmarkTrainStep: 2 sequences × 256
# tokens per optimizer step, all CPUs), this tree against a base commit's trainer, the two
# alternated ROUNDS times in one script run so that the neighbours' load falls on both alike.
# Sets: "all" (every tensor trainable) and "adaptivocab" (embeddings = tied head, first and
# last blocks: `tokenwise adapt`'s default). The base tree gets this tree's benchmark file
# (it only calls New, NewTrainer and Step, which every version has).
#
#   scripts/bench-train.sh                  # base cd818e3 (the per-token loops), 2 rounds
#   BASE=HEAD~1 ROUNDS=1 NEW_STEPS=5 scripts/bench-train.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:-cd818e3}
ROUNDS=${ROUNDS:-2}
NEW_STEPS=${NEW_STEPS:-3}
OLD_STEPS=${OLD_STEPS:-1}
export GOEXPERIMENT=simd
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$BASE" | tar -x -C "$tmp"
sed '/^\/\/ BenchmarkLinear/,$d' train/bench_test.go | grep -v '"github.com/tokenwise/tokenwise/kernels"' > "$tmp/train/bench_test.go"
(cd "$tmp" && go test -c -o "$tmp/old.test" ./train)
go test -c -o "$tmp/new.test" ./train
lscpu | grep 'Model name'
for r in $(seq "$ROUNDS"); do
	for set in all adaptivocab; do
		for which in old new; do
			n=$NEW_STEPS
			[ "$which" = old ] && n=$OLD_STEPS
			line=$(cd train && "$tmp/$which.test" -test.run '^$' -test.bench "TrainStep/$set\$" -test.benchtime "${n}x" | grep Benchmark)
			echo "round $r $which $line"
		done
	done
done
