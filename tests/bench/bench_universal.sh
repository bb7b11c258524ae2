#!/bin/bash
# Universal-checkpoint benchmark: `ckptdoc convert --to universal` vs DeepSpeed's own ds_to_universal.py (v0.12.6,
# unmodified, default workers) on the same real checkpoint, written by real DeepSpeed through the harness
# (tests/realds/client_state_driver.py: the toy MLP with --dims, ZeRO-2 fp16, dp 2, one step, with the
# universal_checkpoint_info and iteration client state Megatron-DeepSpeed saves, which ds_to_universal.py needs).
# Each side runs under tests/bench/tree_memory.py: wall time, CPU time, and peak memory summed over the whole
# process tree (ds_to_universal.py forks workers), resident and anonymous. On a busy machine the wall times
# swing with the load (ds_to_universal.py's several processes get a larger share of it); CPU time does not. Then both outputs are compared file by file
# (tests/realds/compare_universal.py). Not a ctest test.
#
# Usage: tests/bench/bench_universal.sh [BUILD_DIR] [DIMS]
#   BUILD_DIR  where the ckptdoc binary is (default: build)
#   DIMS       the MLP's layer widths. Without it, two models run one after the other (no alignment padding at
#              dp 2, which ds_to_universal.py of v0.12.6 needs with torch's Adam):
#                4096,8192,8192,4096    134.3M params in 8 tensors (the fewest files: ds_to_universal's best case)
#                1024 x 101             105.0M params in 200 tensors (a transformer-like count of params)
# Environment: BENCH_DIR (default /tmp; /dev/shm measures the tools rather than the disk), KEEP=1 keeps the
# outputs, REGEN=1 rewrites the cached checkpoint ($BUILD_DIR/bench-universal-<dims>).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
if [ $# -lt 2 ]; then
  "$0" "$build" 4096,8192,8192,4096
  echo
  "$0" "$build" "$(printf '1024,%.0s' {1..100})1024"
  exit
fi
dims="$2"
py=/usr/bin/python3
ckptdoc="$build/app/ckptdoc"
[ -x "$ckptdoc" ] || { echo "no ckptdoc binary at $ckptdoc (build first)" >&2; exit 2; }
shared="${CKPTDOC_SHARED:-$root/../shared}"
export DS_SRC
DS_SRC="$("$shared/deepspeed/setup.sh")"
harness="$shared/deepspeed/harness"
ds_path="$DS_SRC:$harness/stubs"

ckpt="$build/bench-universal-${dims//,/x}"
[ ${#ckpt} -lt 200 ] || ckpt="$build/bench-universal-$(printf '%s' "$dims" | md5sum | cut -c1-12)"  # long dims lists
if [ "${REGEN:-0}" = 1 ] || [ ! -f "$ckpt/latest" ]; then
  rm -rf "$ckpt"
  echo "writing the checkpoint with real DeepSpeed $(cat "$DS_SRC/version.txt" 2>/dev/null || true) (dims $dims, dp 2) ..."
  "$py" "$harness/launch.py" --world 2 --logdir "$ckpt.logs" -- "$root/tests/realds/client_state_driver.py" \
    --out "$ckpt" --stage 2 --dtype fp16 --steps 1 --dims "$dims" --universal-info --iteration global_steps >/dev/null
fi
tag="$(cat "$ckpt/latest")"
params=$("$ckptdoc" inspect "$ckpt" --json | "$py" -c "import json,sys; print(json.load(sys.stdin)['trainable_numel'])")
printf 'checkpoint: %s (%s trainable params, %s on disk)\n' "$ckpt/$tag" "$params" "$(du -sh "$ckpt/$tag" | cut -f1)"

tmp="$(mktemp -d "${BENCH_DIR:-/tmp}/ckptdoc-bench-universal-XXXXXX")"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
drop_caches() { sync; (echo 1 > /proc/sys/vm/drop_caches) 2>/dev/null || true; }

drop_caches
ours=$("$py" "$here/tree_memory.py" -- "$ckptdoc" convert "$ckpt" -o "$tmp/ours" --to universal -q --device cpu)
drop_caches
mkdir -p "$tmp/theirs"
theirs=$(PYTHONPATH="$ds_path" DS_ACCELERATOR=cpu "$py" "$here/tree_memory.py" -- "$py" -m \
  deepspeed.checkpoint.ds_to_universal --input_folder "$ckpt/$tag" --output_folder "$tmp/theirs/${tag}_universal")
# ckptdoc's time includes fsync of every file it writes (outputs are durable when it returns); ds_to_universal.py
# leaves its output in the page cache. The time a `sync` then takes is shown beside it.
sync_start=$(date +%s.%N)
sync
sync_s=$("$py" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$sync_start" "$(date +%s.%N)")

# The I/O floor: copying the rank and model files (the bytes a conversion reads, and about what it writes) from a cold
# cache, made durable with sync. No durable converter can beat it; ds_to_universal / floor is the largest speed-up
# any could show here.
drop_caches
floor_start=$(date +%s.%N)
mkdir "$tmp/floor"
cp "$ckpt/$tag"/*.pt "$tmp/floor/"
sync
floor_s=$("$py" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$floor_start" "$(date +%s.%N)")
rm -rf "$tmp/floor"

field() { "$py" -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }
[ "$(field "$ours" exit)" = 0 ] || { echo "ckptdoc convert failed: $ours" >&2; exit 1; }
[ "$(field "$theirs" exit)" = 0 ] || { echo "ds_to_universal.py failed: $theirs" >&2; exit 1; }

echo
printf '%-30s %10s %9s %16s %16s\n' "" "wall (s)" "CPU (s)" "peak RSS (MiB)" "peak anon (MiB)"
row() {
  printf '%-30s %10.2f %9.2f %16.1f %16.1f\n' "$1" "$(field "$2" wall_s)" "$(field "$2" cpu_s)" \
    "$(field "$2" peak_rss_mib)" "$(field "$2" peak_anon_mib)"
}
row "ds_to_universal.py (0.12.6)" "$theirs"
printf '%-30s %10.2f\n' "  then sync of its output" "$sync_s"
row "ckptdoc convert --to universal" "$ours"
ratio() { "$py" -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.1f}x')" "$1" "$2"; }
printf '%-30s %10s %9s %16s %16s\n' "ds_to_universal / ckptdoc" "$(ratio "$(field "$theirs" wall_s)" "$(field "$ours" wall_s)")" \
  "$(ratio "$(field "$theirs" cpu_s)" "$(field "$ours" cpu_s)")" \
  "$(ratio "$(field "$theirs" peak_rss_mib)" "$(field "$ours" peak_rss_mib)")" \
  "$(ratio "$(field "$theirs" peak_anon_mib)" "$(field "$ours" peak_anon_mib)")"
printf '%-30s %10.2f %9s %16s %16s\n' "cp + sync of the input (floor)" "$floor_s" "" "" ""
printf '%-30s %10s\n' "ds_to_universal / floor" "$(ratio "$(field "$theirs" wall_s)" "$floor_s")"
printf '%-30s %10s\n' "ckptdoc / floor" "$(ratio "$(field "$ours" wall_s)" "$floor_s")"
durable=$("$py" -c "import sys; print(float(sys.argv[1]) + float(sys.argv[2]))" "$(field "$theirs" wall_s)" "$sync_s")
printf '%-30s %10s\n' "  counting its sync" "$(ratio "$durable" "$(field "$ours" wall_s)")"
echo
echo "comparing the two outputs file by file ..."
PYTHONPATH="$ds_path:$root/tests/realds" DS_ACCELERATOR=cpu "$py" "$root/tests/realds/compare_universal.py" \
  "$tmp/theirs/${tag}_universal" "$tmp/ours/${tag}_universal" --json "$tmp/compare.json" 2>/dev/null
