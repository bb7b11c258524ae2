#!/usr/bin/env bash
# Device check for the CUDA backend, for one call on a GPU machine (under 8 minutes in all): configure and
# build only the CUDA test and benchmark (sm_90), run the gpu-labelled tests, print the bandwidth table.
# Without a usable GPU it says why and exits 0. Usage: tests/gpu/device_check.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build-gpu}
JOBS=${JOBS:-$(nproc)}
ELEMENTS=${ELEMENTS:-$((256 << 20))}   # 1.5 GB per divergence pass: many times the 50 MB L2

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "device_check: skipped: no GPU (nvidia-smi missing or failing)"
  exit 0
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv

GEN=()
command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
start=$SECONDS
timeout 180 cmake -S . -B "$BUILD" "${GEN[@]}" -DENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_BUILD_TYPE=Release -DCKPTDOC_GUI=OFF -DCKPTDOC_IMGUI=OFF > "$BUILD.configure.log" 2>&1 \
  || { tail -40 "$BUILD.configure.log"; exit 1; }
grep -E "CUDA backend|MPI:" "$BUILD.configure.log" || true
timeout 240 cmake --build "$BUILD" -j "$JOBS" --target test_compute_cuda bench_cuda
echo "device_check: configure+build took $((SECONDS - start)) s"

# ctest counts a QSKIP as passed: run one function directly too, so a skip (and its reason) is visible.
timeout 120 ctest --test-dir "$BUILD" -L gpu --output-on-failure --timeout 100
timeout 120 "$BUILD/tests/test_compute_cuda" conversions_bit_exact

timeout 120 "$BUILD/tests/bench/bench_cuda" "$ELEMENTS" 5
echo "device_check: done in $((SECONDS - start)) s"
