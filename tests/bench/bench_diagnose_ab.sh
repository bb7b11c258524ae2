#!/usr/bin/env bash
# Diagnose throughput against `cat` of the same files, for two ckptdoc binaries (a baseline, e.g. main's, and
# the one under test) in the same run, interleaved round by round: warm (every page in the page cache) and cold
# (each file's pages evicted with POSIX_FADV_DONTNEED via dd iflag=nocache). Every command runs under
# tree_memory.py: wall time, CPU seconds (user + system, all threads) and peak RSS of the process tree (mapped file
# pages included). Prints medians over ROUNDS, each diagnose's throughput as a share of cat's (goal in issue
# #29: >= 50% warm, >= 80% cold), and the load average before and after: on a shared machine wall times follow
# the load, CPU seconds much less. Also checks that both binaries' `diagnose --json` reports are equal (the
# time taken aside). Not a ctest test.
#
# Usage: tests/bench/bench_diagnose_ab.sh BASELINE_CKPTDOC CKPTDOC [CKPT]
#   CKPT: a checkpoint folder (default: the 100.7M-param ZeRO-2 fp16 dp2 checkpoint real DeepSpeed writes for
#   the export benchmark, ds_bench_checkpoint.sh, cached in BUILD_DIR/bench-cache).
# Environment: ROUNDS (default 5), BUILD_DIR (default build, for the cached checkpoint), DIMS (harness --dims).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
[ $# -ge 2 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
base="$1"
ours="$2"
py=/usr/bin/python3
rounds="${ROUNDS:-5}"
if [ $# -ge 3 ]; then
  ck="$3"
else
  build="$(cd "${BUILD_DIR:-$root/build}" && pwd)"
  . "$here/ds_bench_checkpoint.sh"
  ck="$(bench_checkpoint "${DIMS:-4096,4096,4096,4096,4096,4096,4096}")"
fi
tag="$(cat "$ck/latest" 2>/dev/null || true)"
mapfile -t files < <(find -L "$ck/$tag" -maxdepth 1 -type f \( -name '*.pt' -o -name '*.distcp' -o -name '*.safetensors' \) | sort)
[ ${#files[@]} -gt 0 ] || { echo "no checkpoint files under $ck/$tag" >&2; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$base" diagnose --json "$ck" >"$work/base.json" || true
"$ours" diagnose --json "$ck" >"$work/ours.json" || true
same=$("$py" -c 'import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for j in (a, b): j.pop("seconds", None)
print("equal" if a == b else "DIFFERENT")' "$work/base.json" "$work/ours.json")

evict() {
  local f
  for f in "${files[@]}"; do dd if="$f" iflag=nocache count=0 status=none; done
}
measure() {  # LABEL COMMAND...
  local label="$1"
  shift
  printf '%s\t%s\n' "$label" "$("$py" "$here/tree_memory.py" -- "$@")" >>"$work/runs.tsv"
}
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < rounds; r++)); do
  evict
  measure "cat, cold" cat "${files[@]}"
  evict
  measure "baseline, cold" "$base" diagnose "$ck"
  evict
  measure "ckptdoc, cold" "$ours" diagnose "$ck"
  cat "${files[@]}" >/dev/null
  measure "cat, warm" cat "${files[@]}"
  measure "baseline, warm" "$base" diagnose "$ck"
  measure "ckptdoc, warm" "$ours" diagnose "$ck"
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

"$py" - "$work/runs.tsv" "$ck" "$load_before" "$load_after" "$same" "$base" "$ours" "${files[@]}" <<'PY'
import json, os, statistics, sys
runs, ck, before, after, same, base, ours, *files = sys.argv[1:]
by = {}
for line in open(runs):
    label, j = line.rstrip("\n").split("\t", 1)
    by.setdefault(label, []).append(json.loads(j))
size = sum(os.path.getsize(f) for f in files)
print(f"checkpoint: {ck}: {len(files)} files, {size / 1e9:.2f} GB; {len(by['cat, warm'])} rounds, medians")
print(f"baseline: {base}\nckptdoc:  {ours}\nreports (--json, time aside): {same}")
print(f"load average before: {before}, after: {after}; {os.cpu_count()} CPUs")
print(f"{'':18}{'wall s':>9}{'(min-max)':>15}{'CPU s':>8}{'GB/s':>7}{'of cat':>8}{'peak RSS':>10}")
for temp in ("warm", "cold"):
    cat = statistics.median(r["wall_s"] for r in by[f"cat, {temp}"])
    for who in ("cat", "baseline", "ckptdoc"):
        rs = by[f"{who}, {temp}"]
        wall = statistics.median(r["wall_s"] for r in rs)
        cpu = statistics.median(r["cpu_s"] for r in rs)
        rss = max(r["peak_rss_mib"] for r in rs)
        spread = f"({min(r['wall_s'] for r in rs):.2f}-{max(r['wall_s'] for r in rs):.2f})"
        share = f"{cat / wall * 100:.0f}%" if who != "cat" else ""
        print(f"{who + ', ' + temp:18}{wall:>9.3f}{spread:>15}{cpu:>8.2f}{size / wall / 1e9:>7.2f}{share:>8}"
              f"{rss:>7.0f} MiB")
PY
