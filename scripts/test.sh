#!/usr/bin/env bash
# The test command: installs what the tests need (Go modules, reference packages), then runs
# every test. Reference-parity tests fail (not skip) here because TOKENWISE_REQUIRE_REFS=1.
#
# Needs Go (see go.mod), node >= 18 with npm, git and python3 (venv, pip); setup-refs.sh
# installs chromium with apt-get (as root or with sudo) for the web page's browser tests. The first run
# downloads the references (~150 MB, about a minute) into .cache/; later runs reuse them.
# Every step runs even when an earlier one fails; the end names each failed step, package
# and test. The full log is .cache/test.log, the slowest packages are listed at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
for tool in go node npm git python3; do
	command -v "$tool" >/dev/null || { echo "test.sh: $tool not found (need Go, node >= 18 with npm, git, python3)" >&2; exit 1; }
done
mkdir -p .cache
log=.cache/test.log
: >"$log"
start=$(date +%s)
failed=()

# step NAME CMD...: runs CMD with its output shown and appended to the log.
step() {
	local name=$1
	shift
	echo "test.sh: $name" | tee -a "$log" >&2
	if ! "$@" 2>&1 | tee -a "$log"; then
		failed+=("$name")
	fi
}

step "go mod download" go mod download
step "setup-refs" scripts/setup-refs.sh
export TOKENWISE_REFS="$PWD/.cache/refs"
export TOKENWISE_REQUIRE_REFS=1
# Plain build first: the pure-Go kernels must build, vet and pass without the experiment.
step "go vet" go vet ./...
# Other architectures build the pure-Go kernels only (the assembly is amd64's).
step "go vet (arm64)" env GOARCH=arm64 go vet ./...
# The kernel tests run under every instruction set the CPU has (kernels.SetISA: pure Go,
# AVX2 as on a CPU without AVX-512, AVX-512) in one process: TestKernelsEveryISA.
step "kernels (no GOEXPERIMENT)" go test -count=1 ./kernels
# Everything else runs the fast path, as the README's commands do: the SIMD kernels need
# Go 1.26's GOEXPERIMENT=simd (simd/archsimd).
export GOEXPERIMENT=simd
step "go vet (simd)" go vet ./kernels
step "go test ./..." go test -count=1 -timeout 45m ./...
# The README's "Try it yourself" commands, in a fresh clone of HEAD (about 2 minutes).
step "README commands (scripts/newcomer.sh)" scripts/newcomer.sh

secs=$(($(date +%s) - start))
echo >&2
echo "test.sh: slowest packages:" >&2
grep -E '^ok[[:space:]]+[^[:space:]]+[[:space:]]+[0-9.]+s' "$log" | awk '{print $3, $2}' | sort -rn | head -8 | sed 's/^/  /' >&2
if [ ${#failed[@]} -eq 0 ]; then
	echo "test.sh: all tests passed in ${secs}s; tokenizer parity table: .cache/parity/status.md" >&2
	exit 0
fi
echo "test.sh: FAILED after ${secs}s (full log: $log)" >&2
for f in "${failed[@]}"; do echo "  step failed: $f" >&2; done
grep -E '^FAIL[[:space:]]+[^ ]+' "$log" | awk '{print "  package failed: " $2}' | sort -u >&2
grep -E '^ *--- FAIL: ' "$log" | sed -E 's/^ *--- FAIL: /  test failed: /' >&2
grep -E '^panic: ' "$log" | sort -u | sed 's/^/  /' >&2
exit 1
