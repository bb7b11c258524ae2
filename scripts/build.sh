#!/usr/bin/env bash
# Configures and builds ckptdoc into build/ (or $CKPTDOC_BUILD_DIR). Extra arguments go to cmake configure.
# CKPTDOC_BUILD_TARGET builds one target (e.g. `apps`: the programs without the tests) instead of everything.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CKPTDOC_BUILD_DIR:-$root/build}"
jobs="${CKPTDOC_JOBS:-$(nproc)}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="${CKPTDOC_BUILD_TYPE:-RelWithDebInfo}" ${CKPTDOC_CMAKE_ARGS:-} "$@"
elif [ $# -gt 0 ]; then
  cmake "$build" "$@"
fi
cmake --build "$build" -j "$jobs" ${CKPTDOC_BUILD_TARGET:+--target "$CKPTDOC_BUILD_TARGET"}
