#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang + ASan + UBSan and runs each for a bounded time on seeds made from
# real data. Usage: tests/fuzz/run_fuzzers.sh [SECONDS_PER_HARNESS]. Prints executions per harness; exits
# non-zero when a harness finds a crash (the reproducer is left in $CKPTDOC_FUZZ_DIR/crashes).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
seconds="${1:-30}"
build="${CKPTDOC_FUZZ_BUILD:-$root/build-asan}"  # the sanitizer test build (scripts/sanitize.sh) has them
work="${CKPTDOC_FUZZ_DIR:-$build/fuzz-work}"
fixtures="${CKPTDOC_FIXTURES:-$root/tests/fixtures}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCKPTDOC_FUZZ=ON \
    -DCKPTDOC_SANITIZE=address,undefined -DCKPTDOC_WERROR=OFF -DCKPTDOC_GUI=OFF -DCKPTDOC_IMGUI=OFF \
    -DENABLE_CUDA=OFF -DCKPTDOC_MPI=OFF
fi
targets=(fuzz_zip fuzz_unpickler fuzz_torch_file fuzz_safetensors fuzz_deepspeed_catalog fuzz_dcp_metadata)
cmake --build "$build" -j "${CKPTDOC_JOBS:-$(nproc)}" --target "${targets[@]}"
rm -rf "$work/seeds" && mkdir -p "$work/crashes"
/usr/bin/python3 "$root/tests/fuzz/make_seeds.py" "$fixtures" "$work/seeds"
export CKPTDOC_FUZZ_MODEL_FILE="$fixtures/deepspeed/zero2_fp16_ws2/checkpoint/global_step5/mp_rank_00_model_states.pt"
export CKPTDOC_FUZZ_DCP_FOLDER="$fixtures/dcp/fsdp2_ws2"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# One harness per core at a time: libFuzzer runs one thread, and CI's stages are CPU-bound.
fuzz_one() {
  local t=$1 name=${1#fuzz_}
  local corpus="$work/corpus/$name" log="$work/$1.log"
  mkdir -p "$corpus"
  if "$build/tests/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -max_len=600000 \
       -artifact_prefix="$work/crashes/$t-" "$corpus" "$work/seeds/$name" "$root/tests/fuzz/regressions" >"$log" 2>&1; then
    echo ok >"$log.result"
  else
    echo "CRASH (see $log)" >"$log.result"
  fi
}
jobs="${CKPTDOC_JOBS:-$(nproc)}"
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait
status=0
printf "%-26s %12s %10s %s\n" harness executions exec/s result
for t in "${targets[@]}"; do
  log="$work/$t.log"
  result=$(cat "$log.result" 2>/dev/null || echo "no result (see $log)")
  [ "$result" = ok ] || status=1
  # libFuzzer's own total ("Done N runs"); a status line's "#N" else (the recommended dictionary it prints last
  # may hold "#<digits>" too, which once made this say 1 for 135598 runs)
  execs=$(grep -Eo '^Done [0-9]+ runs' "$log" | grep -Eo '[0-9]+' | tail -1 || true)
  [ -n "$execs" ] || execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || true)
  [ -n "$execs" ] || execs=$(grep -Eo '^#[0-9]+' "$log" | tail -1 | tr -d '#')
  rate=$(grep -Eo 'exec/s: *[0-9]+' "$log" | tail -1 | grep -Eo '[0-9]+$' || true)
  printf "%-26s %12s %10s %s\n" "$t" "${execs:-?}" "${rate:-?}" "$result"
done
exit $status
