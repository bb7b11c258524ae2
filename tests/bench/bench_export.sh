#!/bin/bash
# Export benchmark, in one run on a >= 100M-param ZeRO-2 fp16 dp2 checkpoint written by real DeepSpeed (the
# harness in ../shared/deepspeed, 6 Linear layers of 4096x4096 = 100.7M params; generated once, ~1 min, and
# kept in BUILD_DIR/bench-cache): wall time and peak RSS of
#   - ckptdoc export -> safetensors and -> torch .bin (both fsync the output, as every ckptdoc writer does),
#   - cp of a file of the output's size (and cp followed by an fsync of the copy, the same durability),
#   - DeepSpeed's own zero_to_fp32.py (tests/realds/realds.py zero-to-fp32, the Python consolidation),
# side by side with the ratios, then checks that ckptdoc's outputs equal zero_to_fp32.py's tensor by tensor.
# The fast commands run ROUNDS times (best and median shown); zero_to_fp32.py once. Not a ctest test.
#
# Usage: tests/bench/bench_export.sh [BUILD_DIR] [ROUNDS]
# Environment: BENCH_DIR (default /tmp; /dev/shm measures the tools rather than the disk), KEEP=1 keeps the
# outputs, DIMS (harness --dims, default 4096 x 7), PYTHON (default /usr/bin/python3).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
rounds="${2:-5}"
py="${PYTHON:-/usr/bin/python3}"
dims="${DIMS:-4096,4096,4096,4096,4096,4096,4096}"
ckptdoc="$build/app/ckptdoc"
[ -x "$ckptdoc" ] || { echo "no ckptdoc binary at $ckptdoc (build first)" >&2; exit 2; }
. "$here/ds_bench_checkpoint.sh"
ck="$(bench_checkpoint "$dims")"  # written by real DeepSpeed once per DIMS
params=$("$ckptdoc" inspect "$ck" --json | "$py" -c "import json,sys; j=json.load(sys.stdin); print(sum(p['numel'] for g in j['groups'] for p in g['params']))")
echo "checkpoint: $ck, $params trainable params, $(du -sb "$ck" | cut -f1) bytes"

tmp="$(mktemp -d "${BENCH_DIR:-/tmp}/ckptdoc-bench-export-XXXXXX")"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
drop_caches() { sync; (echo 1 >/proc/sys/vm/drop_caches) 2>/dev/null || true; }

# One timed run: label, command... -> appends "wall rss_kib" to $tmp/LABEL.runs
measure() {
  local label="$1"
  shift
  /usr/bin/time -f "%e %M" -o "$tmp/$label.one" "$@" >/dev/null 2>"$tmp/$label.err" || { cat "$tmp/$label.err" >&2; exit 1; }
  cat "$tmp/$label.one" >>"$tmp/$label.runs"
}
stats() {  # label -> "best median rss_mib"
  sort -n "$tmp/$1.runs" | awk '{ w[NR] = $1; if ($2 > r) r = $2 } END { printf "%.3f %.3f %.1f\n", w[1], w[int((NR + 1) / 2)], r / 1024 }'
}

drop_caches
"$ckptdoc" export "$ck" -o "$tmp/warm.safetensors" -q  # reads the checkpoint once: every run below starts warm
cp "$tmp/warm.safetensors" "$tmp/src.bin"               # a file of the output's size, for cp
rm -f "$tmp/warm.safetensors"
for r in $(seq "$rounds"); do
  measure ckptdoc_st "$ckptdoc" export "$ck" -o "$tmp/ckptdoc.safetensors" -q
  measure ckptdoc_pt "$ckptdoc" export "$ck" -o "$tmp/ckptdoc.bin" -q
  rm -f "$tmp/cp.bin"
  measure cp cp "$tmp/src.bin" "$tmp/cp.bin"
  rm -f "$tmp/cp.bin"
  measure cp_sync sh -c "cp '$tmp/src.bin' '$tmp/cp.bin' && sync '$tmp/cp.bin'"
done
measure python "$py" "$realds" zero-to-fp32 "$ck" "$tmp/zero_to_fp32.bin"

read -r st_best st_med st_rss < <(stats ckptdoc_st)
read -r pt_best pt_med pt_rss < <(stats ckptdoc_pt)
read -r cp_best cp_med cp_rss < <(stats cp)
read -r cs_best cs_med cs_rss < <(stats cp_sync)
read -r py_best py_med py_rss < <(stats python)
echo
echo "output: $(stat -c %s "$tmp/ckptdoc.safetensors") bytes (safetensors); $rounds rounds, warm page cache, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-40s %10s %10s %15s\n' "" "best (s)" "median (s)" "peak RSS (MiB)"
printf '%-40s %10.3f %10.3f %15.1f\n' "ckptdoc export -> safetensors (fsync)" "$st_best" "$st_med" "$st_rss"
printf '%-40s %10.3f %10.3f %15.1f\n' "ckptdoc export -> torch .bin (fsync)" "$pt_best" "$pt_med" "$pt_rss"
printf '%-40s %10.3f %10.3f %15.1f\n' "cp of a file of the output's size" "$cp_best" "$cp_med" "$cp_rss"
printf '%-40s %10.3f %10.3f %15.1f\n' "cp + fsync of the copy" "$cs_best" "$cs_med" "$cs_rss"
printf '%-40s %10.3f %10s %15.1f\n' "DeepSpeed zero_to_fp32.py (.bin)" "$py_best" "-" "$py_rss"
echo
ratio() { echo "$1 / $2" | bc -l | xargs printf '%.2f'; }
printf 'ckptdoc safetensors / cp:          %sx (median %sx)   / cp + fsync: %sx (median %sx)\n' \
  "$(ratio "$st_best" "$cp_best")" "$(ratio "$st_med" "$cp_med")" "$(ratio "$st_best" "$cs_best")" "$(ratio "$st_med" "$cs_med")"
printf 'ckptdoc torch .bin  / cp:          %sx (median %sx)   / cp + fsync: %sx (median %sx)\n' \
  "$(ratio "$pt_best" "$cp_best")" "$(ratio "$pt_med" "$cp_med")" "$(ratio "$pt_best" "$cs_best")" "$(ratio "$pt_med" "$cs_med")"
printf 'zero_to_fp32.py / ckptdoc:         %sx (safetensors, median)   %sx (torch .bin, median)\n' \
  "$(ratio "$py_best" "$st_med")" "$(ratio "$py_best" "$pt_med")"
printf 'peak RSS zero_to_fp32.py / ckptdoc: %sx\n' "$(ratio "$py_rss" "$pt_rss")"
echo
echo "checking ckptdoc's outputs equal zero_to_fp32.py's ..."
"$py" "$root/tests/fixtures/compare_state_dicts.py" "$tmp/ckptdoc.bin" "$tmp/zero_to_fp32.bin"
"$py" "$root/tests/fixtures/compare_state_dicts.py" "$tmp/ckptdoc.safetensors" "$tmp/zero_to_fp32.bin"
