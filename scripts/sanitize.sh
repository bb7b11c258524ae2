#!/usr/bin/env bash
# The test suite again under ASan + UBSan (core and interop tests; the GUI and CUDA are left out of this build).
# Built with clang, the libFuzzer harnesses included, so tests/fuzz/run_fuzzers.sh can reuse this build; the
# benchmark programs are not built (no test here runs them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CKPTDOC_SAN_BUILD:-$root/build-asan}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCKPTDOC_SANITIZE=address,undefined -DCKPTDOC_FUZZ=ON -DCKPTDOC_WERROR=OFF \
    -DCKPTDOC_GUI=OFF -DCKPTDOC_IMGUI=OFF -DENABLE_CUDA=OFF -DCKPTDOC_MPI=OFF -DCKPTDOC_REALDS_TESTS=OFF \
    -DCKPTDOC_BENCH=OFF
fi
cmake --build "$build" -j "${CKPTDOC_JOBS:-$(nproc)}"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$build" --output-on-failure --no-tests=error -j "${CKPTDOC_JOBS:-$(nproc)}" -L "core|interop" "$@"
