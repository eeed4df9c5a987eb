#!/usr/bin/env bash
# The test command: installs what the tests need (Go modules, reference packages), then runs
# every test. Reference-parity tests fail (not skip) here because TOKENWISE_REQUIRE_REFS=1.
#
# Needs Go (see go.mod), node >= 18 with npm, and git. The first run downloads the references
# (~150 MB, under a minute) and runs HF tokenizers over the parity corpus (about a minute);
# later runs reuse both from .cache/.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in go node npm git; do
	command -v "$tool" >/dev/null || { echo "test.sh: $tool not found (need Go, node >= 18 with npm, git)" >&2; exit 1; }
done
go mod download
scripts/setup-refs.sh
export TOKENWISE_REFS="$PWD/.cache/refs"
export TOKENWISE_REQUIRE_REFS=1
# Plain build first: the pure-Go kernels must build, vet and pass without the experiment.
go vet ./...
# Other architectures build the pure-Go kernels only (the assembly is amd64's).
GOARCH=arm64 go vet ./...
go test -count=1 ./kernels
# The AVX2-only assembly, as on a CPU without AVX-512 (this is a no-op on one without it).
TOKENWISE_NO_AVX512=1 go test -count=1 ./kernels
# Everything else runs the fast path, as the README's commands do: the SIMD kernels need
# Go 1.26's GOEXPERIMENT=simd (simd/archsimd).
export GOEXPERIMENT=simd
go vet ./kernels
go test -count=1 -timeout 45m ./...
echo "test.sh: all tests passed; tokenizer parity table: .cache/parity/status.md" >&2
