#!/usr/bin/env bash
# README command 2: install what is needed, build, and run every test (ctest prints the summary).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
build="${CKPTDOC_BUILD_DIR:-$root/build}"
# --no-tests=error: a filter or a build that selects no test fails instead of passing with nothing checked.
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "${CKPTDOC_JOBS:-$(nproc)}" "$@"
