#!/usr/bin/env bash
# `ckptdoc inspect` for two binaries (a baseline, e.g. main's, and the one under test) in the same run,
# interleaved round by round, on each checkpoint given: cold (each file's pages evicted with POSIX_FADV_DONTNEED
# via dd iflag=nocache, not the whole page cache) and warm. Every command runs under tree_memory.py: wall time,
# CPU seconds and peak RSS of the process tree (mapped file pages included). Prints medians over ROUNDS, how many
# MB of the checkpoint a cold inspect left in the page cache (what it read), the load average before and after,
# and whether both binaries print the same `inspect` text and `inspect --json`, byte for byte. Issue #29's goal:
# < 1 s cold and warm on the 1B-param dp-64 checkpoints (make_1b_dp64.sh). Not a ctest test.
#
# Usage: tests/bench/bench_inspect_ab.sh BASELINE_CKPTDOC CKPTDOC CKPT...
# Environment: ROUNDS (default 5).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -ge 3 ] || { sed -n '2,11p' "$0" >&2; exit 2; }
base="$1"
ours="$2"
shift 2
py=/usr/bin/python3
rounds="${ROUNDS:-5}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cached_mb() {  # MB of the files in the page cache (fincore, util-linux)
  fincore -b -n -o RES "${files[@]}" | awk '{ s += $1 } END { printf "%.0f", s / 1e6 }'
}
evict() {
  local f
  for f in "${files[@]}"; do dd if="$f" iflag=nocache count=0 status=none; done
}
measure() {  # LABEL COMMAND...
  local label="$1"
  shift
  printf '%s\t%s\n' "$label" "$("$py" "$here/tree_memory.py" -- "$@")" >>"$runs"
}

for ck in "$@"; do
  tag="$(cat "$ck/latest" 2>/dev/null || true)"
  mapfile -t files < <(find -L "$ck/$tag" -maxdepth 1 -type f | sort)
  [ ${#files[@]} -gt 0 ] || { echo "no checkpoint files under $ck/$tag" >&2; exit 2; }
  runs="$work/runs.tsv"
  : >"$runs"
  same=same
  for args in "" "--json"; do
    # shellcheck disable=SC2086  # args: no option or one
    "$base" inspect $args "$ck" >"$work/base.out" 2>&1 || true
    # shellcheck disable=SC2086
    "$ours" inspect $args "$ck" >"$work/ours.out" 2>&1 || true
    cmp -s "$work/base.out" "$work/ours.out" || same="DIFFERENT (inspect $args)"
  done
  sync
  load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
  read_base=() read_ours=()
  for ((r = 0; r < rounds; r++)); do
    evict
    measure "baseline, cold" "$base" inspect "$ck"
    read_base+=("$(cached_mb)")
    evict
    measure "ckptdoc, cold" "$ours" inspect "$ck"
    read_ours+=("$(cached_mb)")
    measure "baseline, warm" "$base" inspect "$ck"
    measure "ckptdoc, warm" "$ours" inspect "$ck"
  done
  load_after="$(cut -d' ' -f1-3 /proc/loadavg)"
  "$py" - "$runs" "$ck" "$load_before" "$load_after" "$same" "$base" "$ours" "${read_base[*]}" "${read_ours[*]}" \
    "${files[@]}" <<'PY'
import json, os, statistics, sys
runs, ck, before, after, same, base, ours, read_base, read_ours, *files = sys.argv[1:]
by = {}
for line in open(runs):
    label, j = line.rstrip("\n").split("\t", 1)
    by.setdefault(label, []).append(json.loads(j))
size = sum(os.path.getsize(f) for f in files)
read = {"baseline": read_base.split(), "ckptdoc": read_ours.split()}
print(f"checkpoint: {ck}: {len(files)} files, {size / 1e9:.2f} GB; {len(by['ckptdoc, warm'])} rounds, medians")
print(f"baseline: {base}\nckptdoc:  {ours}\ninspect text and --json, byte for byte: {same}")
print(f"load average before: {before}, after: {after}; {os.cpu_count()} CPUs")
print(f"{'':18}{'wall s':>9}{'(min-max)':>15}{'CPU s':>8}{'peak RSS':>11}{'read (cold)':>13}")
for temp in ("cold", "warm"):
    for who in ("baseline", "ckptdoc"):
        rs = by[f"{who}, {temp}"]
        wall = statistics.median(r["wall_s"] for r in rs)
        cpu = statistics.median(r["cpu_s"] for r in rs)
        rss = max(r["peak_rss_mib"] for r in rs)
        spread = f"({min(r['wall_s'] for r in rs):.2f}-{max(r['wall_s'] for r in rs):.2f})"
        mb = f"{statistics.median(int(m) for m in read[who]):.0f} MB" if temp == "cold" else ""
        print(f"{who + ', ' + temp:18}{wall:>9.3f}{spread:>15}{cpu:>8.2f}{rss:>7.0f} MiB{mb:>13}")
print()
PY
done
