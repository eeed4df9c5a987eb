#!/usr/bin/env bash
# The test command: installs what the tests need (Go modules, reference packages), then runs
# every test. Reference-parity tests fail (not skip) here because TOKENWISE_REQUIRE_REFS=1.
set -euo pipefail
cd "$(dirname "$0")/.."
go mod download
scripts/setup-refs.sh
export TOKENWISE_REFS="$PWD/.cache/refs"
export TOKENWISE_REQUIRE_REFS=1
go vet ./...
go test -count=1 -timeout 45m ./...
