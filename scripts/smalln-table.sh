#!/usr/bin/env bash
# scripts/smalln-table.sh < bench.txt: BenchmarkSmallN's (or BenchmarkVerifyPass') medians as
# a table, one line per dtype/shape/threads: old and new time at each n, and each as a
# multiple of that line's n=1 time (old n=1 for old, new n=1 for new).
awk '
/^Benchmark(SmallN|VerifyPass)\// {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark[A-Za-z]+\//, "", name)
	n = name; sub(/.*\/n=/, "", n); key = name; sub(/\/n=[0-9]+$/, "", key)
	for (i = 2; i <= NF; i++) {
		if ($i ~ /^old-/) old[key, n] = $(i-1)
		if ($i ~ /^new-/) new[key, n] = $(i-1)
	}
	if (!(key in seen)) { seen[key] = 1; keys[++nk] = key }
	if (!((key, n) in seenN)) { seenN[key, n] = 1; ns[key] = ns[key] " " n }
}
END {
	for (k = 1; k <= nk; k++) {
		key = keys[k]; split(substr(ns[key], 2), list, " ")
		line = sprintf("%-32s", key)
		for (j = 1; list[j] != ""; j++) {
			n = list[j]
			o = old[key, n]; w = new[key, n]; o1 = old[key, 1]; w1 = new[key, 1]
			line = line sprintf(" | n=%s %.0f→%.0f (%.1f×→%.1f×)", n, o, w, o1 ? o/o1 : 0, w1 ? w/w1 : 0)
		}
		print line
	}
}'
