#!/usr/bin/env bash
# Issue #29's scale benchmark: a 1-billion-parameter checkpoint saved at dp 64 (make_1b_dp64.sh, 12-14 GB, written
# into a temporary folder and deleted at the end, one checkpoint at a time), and on it, side by side with a baseline
# in the same run:
#   inspect                        wall, cold and warm                       goal < 1 s
#   diagnose vs cat of the files   cold (pages evicted) and warm: wall,      goal >= 80% of cat's throughput cold,
#                                  throughput, peak RSS                      >= 50% warm; peak RSS <= 512 MiB
#   export (fp32 safetensors)      vs cp of a file of the output's size + sync of the copy; and export --force
#                                  (no stale-master check first) to show what that check costs
#   repair --refresh-fp32          wall, peak RSS, vs cold cp + sync of the input    goal: RSS <= max(256 MiB, 1/4)
#   convert --to universal         cold, vs cold cp + sync of the input      goal <= 1.3x
# ZeRO-3 has no 16-bit weights in its model files, so its repair refreshes from an fp16 export (--lp-source). Every command runs under tree_memory.py (wall, CPU, peak RSS
# of the process tree: mapped file pages it holds count too); medians of ROUNDS for inspect, diagnose and export,
# one run of repair, the floor and convert. Pages are evicted per file (POSIX_FADV_DONTNEED via dd iflag=nocache),
# not the whole page cache. Not a ctest test.
#
# Usage: tests/bench/bench_1b_dp64.sh [BUILD_DIR] [KIND...]    KIND: zero2-bf16 (default), zero3-fp16
# Environment: ROUNDS (default 3), BENCH_DIR (default $TMPDIR or /tmp; needs ~30 GB free), CKPT (an existing save
# folder to use instead of writing one; kept), PARAMS (make_1b_dp64.sh's, for a quick try).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
shift || true
kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(zero2-bf16)
py=/usr/bin/python3
ckptdoc="$build/app/ckptdoc"
[ -x "$ckptdoc" ] || { echo "no ckptdoc binary at $ckptdoc (build first)" >&2; exit 2; }
rounds="${ROUNDS:-3}"
work="$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/ckptdoc-bench-1b-XXXXXX")"
trap 'rm -rf "$work"' EXIT

evict() {
  sync
  local f
  for f in "${files[@]}"; do dd if="$f" iflag=nocache count=0 status=none; done
}
# measure LABEL COMMAND...: one tree_memory.py line, tab-separated after its label.
measure() {
  local label="$1"
  shift
  printf '%s\t%s\n' "$label" "$("$py" "$here/tree_memory.py" -- "$@")" >>"$results"
}

for kind in "${kinds[@]}"; do
  results="$work/$kind.tsv"
  : >"$results"
  load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
  if [ -n "${CKPT:-}" ]; then
    ck="$CKPT"
  else
    ck="$work/ckpt"
    echo "writing the $kind checkpoint ..." >&2
    "$here/make_1b_dp64.sh" "$kind" "$ck" "$build" >&2
  fi
  tag="$(cat "$ck/latest")"
  files=("$ck/$tag"/*)
  out="$work/out"

  echo "inspect ..." >&2
  evict
  measure "inspect, cold" "$ckptdoc" inspect "$ck"
  for ((r = 0; r < rounds; r++)); do measure "inspect, warm" "$ckptdoc" inspect "$ck"; done

  echo "diagnose, cold ..." >&2
  for ((r = 0; r < rounds; r++)); do
    evict
    measure "cat, cold" cat "${files[@]}"
    evict
    measure "diagnose, cold" "$ckptdoc" diagnose "$ck"
  done
  echo "diagnose, warm ..." >&2
  cat "${files[@]}" >/dev/null
  for ((r = 0; r < rounds; r++)); do
    measure "cat, warm" cat "${files[@]}"
    measure "diagnose, warm" "$ckptdoc" diagnose "$ck"
  done

  echo "export ..." >&2
  for ((r = 0; r < rounds; r++)); do
    rm -f "$out.safetensors" "$out.copy"
    measure "export" "$ckptdoc" export "$ck" -o "$out.safetensors" -q
    measure "cp + sync" sh -c "cp '$out.safetensors' '$out.copy' && sync '$out.copy'"
    rm -f "$out.safetensors"
    measure "export --force" "$ckptdoc" export "$ck" -o "$out.safetensors" -q --force
  done
  rm -f "$out.safetensors" "$out.copy"

  echo "cp + sync of the input, cold ..." >&2
  evict
  measure "cp + sync of the input, cold" sh -c "mkdir '$out' && cp ${files[*]@Q} '$out/' && sync"
  rm -rf "$out"

  echo "repair --refresh-fp32 ..." >&2
  lp=()
  if [ "$kind" = zero3-fp16 ]; then
    "$ckptdoc" export "$ck" -o "$work/lp.safetensors" --dtype float16 -q
    lp=(--lp-source "$work/lp.safetensors")
  fi
  measure "repair --refresh-fp32" "$ckptdoc" repair "$ck" -o "$out" --refresh-fp32 "${lp[@]}"
  rm -rf "$out" "$work/lp.safetensors"

  echo "convert --to universal ..." >&2
  evict
  measure "convert --to universal, cold" "$ckptdoc" convert "$ck" --to universal -o "$out" -q
  rm -rf "$out"

  params=$("$ckptdoc" inspect "$ck" --json | "$py" -c "import json,sys; print(json.load(sys.stdin)['trainable_numel'])")
  bytes=$(du -cb "${files[@]}" | tail -1 | cut -f1)
  [ -n "${CKPT:-}" ] || rm -rf "$ck"
  "$py" - "$results" "$kind" "$params" "$bytes" "${#files[@]}" "$(nproc)" "$load_before" \
    "$(cut -d' ' -f1-3 /proc/loadavg)" "$rounds" <<'PY'
import json, statistics, sys
path, kind, params, nbytes, nfiles, cores, load0, load1, rounds = sys.argv[1:]
nbytes = int(nbytes)
runs = {}
for line in open(path):
    label, j = line.rstrip("\n").split("\t")
    runs.setdefault(label, []).append(json.loads(j))

def wall(label):
    return statistics.median(r["wall_s"] for r in runs[label]) if label in runs else None

def rss(label):  # the larger of the sampled tree sum and the kernel's exact peak of the largest process
    return max(max(r["peak_rss_mib"], r["largest_process_rss_mib"]) for r in runs[label]) if label in runs else None

def failed(label):
    bad = sorted({r["exit"] for r in runs.get(label, []) if r["exit"] not in (0, 1 if "diagnose" in label else 0)})
    return f" FAILED (exit {bad})" if bad else ""

def secs(x):
    return "-" if x is None else f"{x:.2f}"

def mib(x):
    return "-" if x is None else f"{x:.0f}"

print(f"\n{kind}: {int(params):,} params, dp 64, {nfiles} files, {nbytes / 1e9:.2f} GB; {cores} cores, "
      f"load {load0} before, {load1} after; medians of {rounds} (repair, floor, convert: one run)")
rows = []  # work, baseline, baseline s, ckptdoc s, ratio, ckptdoc peak RSS, goal, met
ins_c, ins_w = wall("inspect, cold"), wall("inspect, warm")
rows.append(["inspect, cold / warm", "", "", f"{secs(ins_c)} / {secs(ins_w)}", "", mib(rss("inspect, cold")),
             "< 1 s", "yes" if max(ins_c, ins_w) < 1 else "NO"])
goal_rss = 512
for temp, goal in (("cold", 0.80), ("warm", 0.50)):
    c, d = wall(f"cat, {temp}"), wall(f"diagnose, {temp}")
    share = c / d
    r = rss(f"diagnose, {temp}")
    rows.append([f"diagnose, {temp}" + failed(f"diagnose, {temp}"), f"cat {nbytes / c / 1e9:.2f} GB/s", secs(c),
                 f"{secs(d)} ({nbytes / d / 1e9:.2f} GB/s)", f"{share * 100:.0f}% of cat", mib(r),
                 f">= {goal * 100:.0f}%, <= {goal_rss} MiB",
                 "yes" if share >= goal and r <= goal_rss else "NO"])
e, cs = wall("export"), wall("cp + sync")
rows.append(["export fp32 safetensors" + failed("export"), "cp + sync of the output", secs(cs), secs(e),
             f"{e / cs:.2f}x", mib(rss("export")), "", ""])
ef = wall("export --force")
rows.append(["export's stale-master check" + failed("export --force"), "export --force (no check)", secs(ef),
             secs(e), f"+{(e - ef) / ef * 100:.0f}%", "", "", ""])
floor = wall("cp + sync of the input, cold")
rep_goal = max(256, nbytes / 4 / 2**20)
rep = wall("repair --refresh-fp32")
rows.append(["repair --refresh-fp32" + failed("repair --refresh-fp32"), "cp + sync of the input, cold", secs(floor),
             secs(rep), f"{rep / floor:.2f}x", mib(rss("repair --refresh-fp32")), f"<= {rep_goal:.0f} MiB",
             "yes" if rss("repair --refresh-fp32") <= rep_goal else "NO"])
conv = wall("convert --to universal, cold")
rows.append(["convert --to universal, cold" + failed("convert --to universal, cold"),
             "cp + sync of the input, cold", secs(floor), secs(conv), f"{conv / floor:.2f}x",
             mib(rss("convert --to universal, cold")), "<= 1.3x", "yes" if conv / floor <= 1.3 else "NO"])
head = ["work", "baseline", "baseline s", "ckptdoc s", "ratio", "peak RSS MiB", "goal", "met"]
widths = [max(len(str(x[i])) for x in rows + [head]) for i in range(len(head))]
for row in [head] + rows:
    print("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
PY
done
