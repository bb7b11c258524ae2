#!/usr/bin/env bash
# Device check of the CUDA backend, for one call on a GPU machine (under 8 minutes in all):
#   1. nvidia-smi: which GPU, driver, clocks
#   2. gpu_check: CUDA vs CPU backend on random and edge data (counts and conversions exact, sums 1e-9)
#   3. bench_cuda: each kernel's bandwidth as a fraction of the device's D2D copy bandwidth (goal >= 70%)
#   4. end to end on a synthetic ZeRO-2 fp16 checkpoint with stale fp32 masters: `diagnose --json` on CPU vs
#      CUDA (same findings and counts, sums within 1e-9) and `repair --refresh-fp32` on CPU vs CUDA (every
#      output file byte-identical), each timed
# then a table and PASS/FAIL (exit 1 on any failure; a CUDA step finding no usable device while nvidia-smi sees a
# GPU is a failure too).
#
# Programs: from .device-bundle/ when it exists (tests/gpu/make_device_bundle.sh builds it on the build
# machine; a bare GPU machine has no Qt/spdlog/CLI11/HDF5 to build with), else built here from source into
# build-gpu/ (a machine with the Debian build dependencies). NCCL is taken from python3's nvidia.nccl package.
# Without a GPU it says so and exits 0; DEVICE_CHECK_FORCE=1 runs everything anyway (the CPU halves run, the
# CUDA halves report SKIP), to try the script on a machine without one.
#
# usage: tests/gpu/device_check.sh [build-dir]     ($OUT set: everything is also written to $OUT/device_check.log)
# knobs: DEVICE_CHECK_FORCE=1, DEVICE_CHECK_PARAMS (120000000), DEVICE_CHECK_DP (4), ELEMENTS (bench, 256Mi),
#        DEVICE_CHECK_MIN_PCT (70: divergence kernel vs copy bandwidth goal), DEVICE_CHECK_BUDGET (450 s),
#        DEVICE_CHECK_WORK (scratch folder; default /dev/shm when it has room, else /tmp), JOBS,
#        DEVICE_CHECK_E2E_DEVICE (cuda; cpu runs the end-to-end comparisons CPU against CPU, without a GPU)
set -uo pipefail
export LC_ALL=C
cd "$(dirname "$0")/../.." || exit 2
ROOT=$PWD
BUILD=${1:-build-gpu}
FORCE=${DEVICE_CHECK_FORCE:-0}
PARAMS=${DEVICE_CHECK_PARAMS:-120000000}
DP=${DEVICE_CHECK_DP:-4}
ELEMENTS=${ELEMENTS:-$((256 << 20))}  # 1.5 GB per divergence pass: many times the 60 MB L2
MIN_PCT=${DEVICE_CHECK_MIN_PCT:-70}
E2E_DEVICE=${DEVICE_CHECK_E2E_DEVICE:-cuda}  # cpu: compare CPU with CPU, to try the comparisons without a GPU
BUDGET=${DEVICE_CHECK_BUDGET:-450}
DEADLINE=$((SECONDS + BUDGET))

W="" TMPD="" TEE_PID=""
cleanup() {
  [ -n "$W" ] && rm -rf "$W"
  [ -n "$TMPD" ] && rm -rf "$TMPD"
  if [ -n "$TEE_PID" ]; then  # let tee write the last lines before the call collects $OUT
    exec 1>&3 2>&4
    wait "$TEE_PID" 2>/dev/null
  fi
}
trap cleanup EXIT
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  exec 3>&1 4>&2
  exec > >(tee -a "$OUT/device_check.log") 2>&1
  TEE_PID=$!
fi

say() { echo "device_check: $*"; }
now() { echo "$EPOCHREALTIME"; }
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
# timeout for a step: its own limit, cut to what is left of the whole budget
limit() {
  local left=$((DEADLINE - SECONDS))
  [ "$left" -lt 5 ] && left=5
  [ "$1" -lt "$left" ] && echo "$1" || echo "$left"
}
FAILED=0
SKIPPED=0
ROWS=()
BENCH_ROWS=()
declare -A SECS RC
row() {  # row NAME RESULT [DETAIL]
  ROWS+=("$(printf '%-44s %-5s %s' "$1" "$2" "${3:-}")")
  case $2 in FAIL) FAILED=1 ;; SKIP) SKIPPED=1 ;; esac
}

# A CUDA step that finds no usable device: SKIP without a GPU, FAIL when nvidia-smi sees one (CUDA unusable).
no_cuda() {
  if [ "$HAVE_GPU" = 1 ]; then row "$1" FAIL "nvidia-smi sees a GPU but CUDA is not usable (reason above)"
  else row "$1" SKIP "no usable CUDA device"; fi
}
HAVE_GPU=1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  if [ "$FORCE" != 1 ]; then
    say "skipped: no GPU (nvidia-smi missing or failing); DEVICE_CHECK_FORCE=1 runs the CPU halves anyway"
    exit 0
  fi
  HAVE_GPU=0
  say "no GPU (nvidia-smi missing or failing), DEVICE_CHECK_FORCE=1: the CPU halves run, the CUDA halves will SKIP"
else
  timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem,temperature.gpu \
    --format=csv
fi
start=$SECONDS

# ---- the programs --------------------------------------------------------------------------------------------
LIBPATH=
if [ -f .device-bundle/bin/ckptdoc ]; then
  chmod u+x .device-bundle/bin/* 2>/dev/null  # in case a copy dropped the mode bits
  BIN=$ROOT/.device-bundle/bin
  CKPTDOC=$BIN/ckptdoc GPU_CHECK=$BIN/gpu_check BENCH_CUDA=$BIN/bench_cuda
  LIBPATH=$ROOT/.device-bundle/lib
  say "programs from .device-bundle (no build here):"
  sed 's/^/  /' .device-bundle/MANIFEST 2>/dev/null | head -4
  echo "  this machine: $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME"), $(ldd --version 2>/dev/null | head -1)"
else
  say "no .device-bundle: building from source into $BUILD"
  mkdir -p "$BUILD"
  GEN=()
  command -v ninja >/dev/null 2>&1 && GEN=(-G Ninja)
  if ! timeout "$(limit 180)" cmake -S . -B "$BUILD" "${GEN[@]}" -DENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DCMAKE_BUILD_TYPE=Release -DCKPTDOC_GUI=OFF -DCKPTDOC_IMGUI=OFF -DCKPTDOC_MPI=OFF > "$BUILD/configure.log" 2>&1; then
    tail -40 "$BUILD/configure.log"
    say "FAIL: configure failed (a bare machine lacks the build dependencies: run tests/gpu/make_device_bundle.sh on the build machine and carry .device-bundle)"
    exit 1
  fi
  grep -E "CUDA backend|MPI:" "$BUILD/configure.log" || true
  if ! timeout "$(limit 300)" cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target ckptdoc gpu_check bench_cuda; then
    say "FAIL: build failed"
    exit 1
  fi
  CKPTDOC=$BUILD/app/ckptdoc GPU_CHECK=$BUILD/tests/gpu_check BENCH_CUDA=$BUILD/tests/bench/bench_cuda
  say "configure+build took $((SECONDS - start)) s"
fi
if nccl=$(python3 -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "lib"))' 2>/dev/null) &&
    [ -d "$nccl" ]; then
  LIBPATH=${LIBPATH:+$LIBPATH:}$nccl
  say "NCCL from python3's nvidia.nccl: $nccl"
else
  say "no python3 nvidia.nccl package: NCCL is not on the library path (only multi-process runs use it)"
fi
# Only our programs see the bundle's libraries (its libstdc++ may be older than the one python3's torch wants).
run() { LD_LIBRARY_PATH="$LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"; }

if ! run "$CKPTDOC" --version; then
  say "FAIL: $CKPTDOC does not start here; its libraries:"
  run ldd "$CKPTDOC"
  exit 1
fi
TMPD=$(mktemp -d)

# ---- 2. gpu_check ----------------------------------------------------------------------------------------------
echo
say "gpu_check: CUDA backend vs CPU backend"
t=$(now)
run timeout "$(limit 240)" "$GPU_CHECK"
rc=$?
case $rc in
  0) row "gpu_check (CUDA vs CPU, all cases)" PASS "$(since "$t") s" ;;
  77) no_cuda "gpu_check (CUDA vs CPU, all cases)" ;;
  124) row "gpu_check (CUDA vs CPU, all cases)" FAIL "timed out" ;;
  *) row "gpu_check (CUDA vs CPU, all cases)" FAIL "exit $rc (FAIL lines above)" ;;
esac
if [ "$HAVE_GPU" = 0 ]; then  # prove the cases themselves on the CPU: SIMD path vs scalar path
  if run timeout "$(limit 120)" "$GPU_CHECK" --self-test | grep -E "^FAIL|^gpu_check:"; then
    row "gpu_check --self-test (CPU SIMD vs scalar)" PASS
  else
    row "gpu_check --self-test (CPU SIMD vs scalar)" FAIL
  fi
fi

# ---- 3. bench_cuda -----------------------------------------------------------------------------------------------
echo
say "bench_cuda $ELEMENTS elements: kernel bandwidth vs device copy bandwidth"
run timeout "$(limit 240)" "$BENCH_CUDA" "$ELEMENTS" 5 | tee "$TMPD/bench.txt"
rc=${PIPESTATUS[0]}
if grep -q "skipped" "$TMPD/bench.txt"; then
  no_cuda "bench_cuda"
elif [ "$rc" -ne 0 ]; then
  row "bench_cuda" FAIL "exit $rc"
else
  # rows: NAME... ms GB/s PCT%
  while IFS= read -r line; do BENCH_ROWS+=("$line"); done < <(awk '$NF ~ /%$/ && $1 != "kernel" {
      name = $1; for (i = 2; i <= NF - 3; ++i) name = name " " $i
      printf "%-40s %10s GB/s %6s of copy\n", name, $(NF - 1), $NF }' "$TMPD/bench.txt")
  worst=$(awk '$1 == "divergence" && $NF ~ /%$/ { p = $NF + 0; if (min == "" || p < min) min = p } END { print min }' "$TMPD/bench.txt")
  if [ -z "$worst" ]; then
    row "bench_cuda divergence >= $MIN_PCT% of copy" FAIL "no divergence rows in bench_cuda's table"
  elif [ "$worst" -ge "$MIN_PCT" ]; then
    row "bench_cuda divergence >= $MIN_PCT% of copy" PASS "slowest divergence kernel at $worst%"
  else
    row "bench_cuda divergence >= $MIN_PCT% of copy" FAIL "slowest divergence kernel at $worst%"
  fi
fi

# ---- 4. end to end -------------------------------------------------------------------------------------------
echo
need_kb=$(( PARAMS * 14 * 3 / 1024 + 1048576 ))  # checkpoint (~14 B/param) + two repaired copies + 1 GiB
WORK=${DEVICE_CHECK_WORK:-}
if [ -z "$WORK" ]; then
  WORK=/tmp
  shm_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')
  [ -n "$shm_kb" ] && [ "$shm_kb" -gt "$need_kb" ] && WORK=/dev/shm
fi
W=$(mktemp -d "$WORK/ckptdoc-device-check.XXXXXX")
say "end to end in $W: synth $PARAMS params, ZeRO-2 fp16, dp $DP, stale fp32 masters"
t=$(now)
if ! run timeout "$(limit 240)" "$CKPTDOC" synth "$W/ckpt" --stage 2 --dtype fp16 --dp "$DP" --params "$PARAMS" \
    --break stale_fp32; then
  row "synth checkpoint" FAIL
else
  SYNTH_S=$(since "$t")
  row "synth checkpoint" PASS "$(du -sh "$W/ckpt" | cut -f1) in $SYNTH_S s"

  for side in cpu gpu; do
    dev=cpu
    [ "$side" = gpu ] && dev=$E2E_DEVICE
    t=$(now)
    run timeout "$(limit 120)" "$CKPTDOC" diagnose "$W/ckpt" --json --device "$dev" > "$W/diagnose_$side.json" \
      2> "$W/diagnose_$side.err"
    RC[d$side]=$?
    SECS[d$side]=$(since "$t")
    cat "$W/diagnose_$side.err"
    say "diagnose --device $dev: exit ${RC[d$side]} (1 = error findings, expected here) in ${SECS[d$side]} s"
  done
  if [ "${RC[dcpu]}" -gt 1 ]; then
    row "diagnose cpu" FAIL "exit ${RC[dcpu]}"
  else
    row "diagnose cpu" PASS "exit ${RC[dcpu]} (1: error findings, as planted)"
  fi
  if [ "${RC[dcpu]}" -gt 1 ]; then
    :
  elif [ "${RC[dgpu]}" -eq 2 ] && grep -q "no usable CUDA device" "$W/diagnose_gpu.err"; then
    no_cuda "diagnose $E2E_DEVICE vs cpu (json)"
  elif [ "${RC[dgpu]}" -ne "${RC[dcpu]}" ]; then
    row "diagnose $E2E_DEVICE vs cpu (json)" FAIL "exit ${RC[dgpu]} vs ${RC[dcpu]}"
  elif python3 tests/gpu/compare_reports.py "$W/diagnose_gpu.json" "$W/diagnose_cpu.json" --rel 1e-9 \
      --ignore backend --ignore seconds --ignore devices; then
    row "diagnose $E2E_DEVICE vs cpu (json)" PASS "findings, counts same; sums within 1e-9"
  else
    row "diagnose $E2E_DEVICE vs cpu (json)" FAIL "reports differ (above)"
  fi
  # one host thread per GPU against the default (up to 4): how much the staging copies limit the GPU path
  if [ "$E2E_DEVICE" = cuda ] && [ "${RC[dgpu]}" -le 1 ]; then
    t=$(now)
    run timeout "$(limit 120)" "$CKPTDOC" diagnose "$W/ckpt" --json --device cuda --gpu-workers 1 \
      > "$W/diagnose_gpu1.json" 2> /dev/null
    RC[dgpu1]=$?
    SECS[dgpu1]=$(since "$t")
    say "diagnose --device cuda --gpu-workers 1: exit ${RC[dgpu1]} in ${SECS[dgpu1]} s"
    if python3 tests/gpu/compare_reports.py "$W/diagnose_gpu1.json" "$W/diagnose_cpu.json" --rel 1e-9 \
        --ignore backend --ignore seconds --ignore devices; then
      row "diagnose cuda, 1 host thread vs cpu (json)" PASS
    else
      row "diagnose cuda, 1 host thread vs cpu (json)" FAIL "reports differ (above)"
    fi
  fi
  [ "${RC[dcpu]}" -le 1 ] && python3 - "$W/diagnose_cpu.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print("  cpu report: %d findings (%s), %d params, %.2f GB scanned" % (len(r["findings"]),
      ", ".join(f["code"] for f in r["findings"]), len(r["params"]), r["bytes_scanned"] / 1e9))
EOF

  for side in cpu gpu; do
    dev=cpu
    [ "$side" = gpu ] && dev=$E2E_DEVICE
    t=$(now)
    run timeout "$(limit 180)" "$CKPTDOC" repair "$W/ckpt" -o "$W/repaired_$side" --refresh-fp32 --device "$dev" --json \
      > "$W/repair_$side.json" 2> "$W/repair_$side.err"
    RC[r$side]=$?
    SECS[r$side]=$(since "$t")
    cat "$W/repair_$side.err"
    say "repair --refresh-fp32 --device $dev: exit ${RC[r$side]} in ${SECS[r$side]} s"
  done
  if [ "${RC[rcpu]}" -ne 0 ]; then
    row "repair cpu (written + verified)" FAIL "exit ${RC[rcpu]}"
  elif [ "${RC[rgpu]}" -eq 2 ] && grep -q "no usable CUDA device" "$W/repair_gpu.err"; then
    row "repair cpu (written + verified)" PASS
    no_cuda "repair $E2E_DEVICE vs cpu (cmp every file)"
  elif [ "${RC[rgpu]}" -ne 0 ]; then
    row "repair $E2E_DEVICE (written + verified)" FAIL "exit ${RC[rgpu]}"
  else
    row "repair cpu, $E2E_DEVICE (written + verified)" PASS
    (cd "$W/repaired_cpu" && find . -type f | sort) > "$W/files_cpu"
    (cd "$W/repaired_gpu" && find . -type f | sort) > "$W/files_gpu"
    differ=0
    if ! cmp -s "$W/files_cpu" "$W/files_gpu"; then
      echo "  file lists differ:"; diff "$W/files_cpu" "$W/files_gpu" | sed 's/^/    /'; differ=1
    fi
    nfiles=0
    while IFS= read -r f; do
      [ -f "$W/repaired_gpu/$f" ] || continue
      nfiles=$((nfiles + 1))
      if ! cmp -s "$W/repaired_cpu/$f" "$W/repaired_gpu/$f"; then
        differ=1
        echo "  differs: $f: $(cmp "$W/repaired_cpu/$f" "$W/repaired_gpu/$f" 2>&1 | head -1);" \
          "$(cmp -l "$W/repaired_cpu/$f" "$W/repaired_gpu/$f" 2>/dev/null | wc -l) bytes differ," \
          "sizes $(stat -c %s "$W/repaired_cpu/$f") vs $(stat -c %s "$W/repaired_gpu/$f")"
      fi
    done < "$W/files_cpu"
    if [ "$differ" = 0 ]; then
      row "repair $E2E_DEVICE vs cpu (cmp every file)" PASS "$nfiles files byte-identical"
    else
      row "repair $E2E_DEVICE vs cpu (cmp every file)" FAIL "outputs differ (above)"
    fi
    if python3 tests/gpu/compare_reports.py "$W/repair_gpu.json" "$W/repair_cpu.json" --rel 1e-9 --ignore backend \
        --ignore seconds --ignore output --ignore path; then
      row "repair $E2E_DEVICE vs cpu (json)" PASS
    else
      row "repair $E2E_DEVICE vs cpu (json)" FAIL "reports differ (above)"
    fi
  fi
fi

# ---- summary -----------------------------------------------------------------------------------------------------
echo
echo "==================================== device check ===================================="
if [ ${#BENCH_ROWS[@]} -gt 0 ]; then
  printf '%-40s %15s %14s\n' "kernel ($ELEMENTS elements)" "bandwidth" "of D2D copy"
  printf '%s\n' "${BENCH_ROWS[@]}"
  echo
fi
printf '%-40s %10s %10s\n' "end to end ($PARAMS params, dp $DP)" "CPU s" "${E2E_DEVICE^^} s"
printf '%-40s %10s %10s\n' "diagnose --json" "${SECS[dcpu]:--}" "$([ "${RC[dgpu]:-2}" -le 1 ] && echo "${SECS[dgpu]}" || echo -)"
[ -n "${SECS[dgpu1]:-}" ] && printf '%-40s %10s %10s\n' "diagnose --json --gpu-workers 1" "-" "${SECS[dgpu1]}"
printf '%-40s %10s %10s\n' "repair --refresh-fp32" "${SECS[rcpu]:--}" "$([ "${RC[rgpu]:-2}" -eq 0 ] && echo "${SECS[rgpu]}" || echo -)"
echo
printf '%s\n' "${ROWS[@]}"
echo
if [ "$FAILED" = 1 ]; then
  say "FAIL ($((SECONDS - start)) s)"
  exit 1
elif [ "$SKIPPED" = 1 ]; then
  say "PASS of what ran; CUDA steps SKIPPED: no usable CUDA device ($((SECONDS - start)) s)"
else
  say "PASS ($((SECONDS - start)) s)"
fi
exit 0
