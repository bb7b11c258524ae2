#!/bin/bash
# Repair memory benchmark: peak memory of `ckptdoc repair` (each action) and `convert --to universal` on a real
# ZeRO-2 fp16 dp2 checkpoint written by real DeepSpeed (../shared/deepspeed's harness; DIMS 4096 x 4 = 50.3M
# params, ~670 MB: the fp16 model file and two rank files of fp32 masters and Adam moments; generated once, ~20 s,
# kept in BUILD_DIR/bench-cache), side by side with
#   - the goal: a quarter of the checkpoint or 256 MiB, whichever is larger;
#   - the baseline any torch-based rewrite pays: torch.load + torch.save of each rank file, one at a time
#     (tests/realds/realds.py py: DeepSpeed's torch 1.13), the least a Python repair script holds.
# Every command runs under tests/bench/tree_memory.py: wall time, peak resident memory (VmRSS: mapped file pages
# this process touched and has not handed back count too) and peak anonymous memory. A ckptdoc run must exit 0
# (repair: its output verified). Exits 1 when a ckptdoc peak is above the goal. Not a ctest test.
#
# Usage: tests/bench/bench_repair_memory.sh [BUILD_DIR]
# Environment: BENCH_DIR (default /tmp), DIMS (harness --dims, default 4096,4096,4096,4096), KEEP=1 keeps outputs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
py=/usr/bin/python3
dims="${DIMS:-4096,4096,4096,4096}"
ckptdoc="$build/app/ckptdoc"
[ -x "$ckptdoc" ] || { echo "no ckptdoc binary at $ckptdoc (build first)" >&2; exit 2; }
. "$here/ds_bench_checkpoint.sh"
ck="$(bench_checkpoint "$dims")"  # written by real DeepSpeed once per DIMS
bytes=$(du -sb "$ck" | cut -f1)
goal_mib=$("$py" -c "import sys; print(max(int(sys.argv[1]) / 4, 256 * 2**20) / 2**20)" "$bytes")

tmp="$(mktemp -d "${BENCH_DIR:-/tmp}/ckptdoc-bench-repair-XXXXXX")"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
measure() { "$py" "$here/tree_memory.py" -- "$@"; }
field() { "$py" -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

"$ckptdoc" diagnose "$ck" >/dev/null || true  # one read first: every run below starts with the files cached
declare -A result
labels=()
for action in --refresh-fp32 --reset-optimizer --drop-optimizer; do
  rm -rf "$tmp/out"
  result["ckptdoc repair $action"]=$(measure "$ckptdoc" repair "$ck" -o "$tmp/out" "$action")  # exit 0: verified
  labels+=("ckptdoc repair $action")
done
rm -rf "$tmp/out"
result["ckptdoc convert --to universal"]=$(measure "$ckptdoc" convert "$ck" --to universal -o "$tmp/out" -q)
labels+=("ckptdoc convert --to universal")
rm -rf "$tmp/out"

# The baseline: torch.load + torch.save of each rank file in turn (a repair script cannot hold less).
cat >"$tmp/resave.py" <<'EOF'
import glob, os, sys, torch
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*", "*optim_states.pt"))):
    sd = torch.load(f, map_location="cpu")
    torch.save(sd, os.path.join(sys.argv[2], os.path.basename(f)))
    del sd
EOF
mkdir -p "$tmp/resaved"
result["torch.load + torch.save per rank file"]=$(measure "$py" "$realds" py -- "$tmp/resave.py" "$ck" "$tmp/resaved")
labels+=("torch.load + torch.save per rank file")
rm -rf "$tmp/resaved"

echo "checkpoint: $ck ($bytes bytes on disk), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-40s %9s %16s %16s\n' "" "wall (s)" "peak RSS (MiB)" "peak anon (MiB)"
status=0
for label in "${labels[@]}"; do
  j="${result[$label]}"
  [ "$(field "$j" exit)" = 0 ] || { echo "$label failed: $j" >&2; exit 1; }
  # The larger of the sampled tree sum and the kernel's exact peak of the largest process.
  rss=$("$py" -c "import json,sys; j=json.loads(sys.argv[1]); print(max(j['peak_rss_mib'], j['largest_process_rss_mib']))" "$j")
  printf '%-40s %9.2f %16.1f %16.1f\n' "$label" "$(field "$j" wall_s)" "$rss" "$(field "$j" peak_anon_mib)"
  if [[ "$label" == ckptdoc* ]] && "$py" -c "import sys; sys.exit(float(sys.argv[1]) <= float(sys.argv[2]))" "$rss" "$goal_mib"; then
    status=1
  fi
done
printf '%-40s %9s %16.1f\n' "goal (1/4 of the checkpoint, >= 256 MiB)" "" "$goal_mib"
[ "$status" = 0 ] || echo "a ckptdoc peak is above the goal" >&2
exit "$status"
