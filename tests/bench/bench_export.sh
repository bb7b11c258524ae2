#!/bin/bash
# Export benchmark: ckptdoc export vs a Python/torch consolidation doing the same work (load every rank
# file, concatenate, split, save; tests/bench/export_reference.py), on a generated ZeRO-2 fp16 dp2
# checkpoint of ~100M params. Each side runs as a child process under /usr/bin/time -v; prints wall time
# and peak RSS side by side with ratios, and checks both outputs are equal. Not a ctest test.
#
# Usage: tests/bench/bench_export.sh [BUILD_DIR] [LAYERS]
#   BUILD_DIR  where the ckptdoc binary is (default: build)
#   LAYERS     generator --layers (default 4096 x 7: 6 Linear layers, 100.7M params)
# Environment: KEEP=1 keeps the temp folder; PYTHON (default /usr/bin/python3).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build}"
layers="${2:-4096,4096,4096,4096,4096,4096,4096}"
py="${PYTHON:-/usr/bin/python3}"
ckptdoc="$build/app/ckptdoc"
[ -x "$ckptdoc" ] || { echo "no ckptdoc binary at $ckptdoc (build first)" >&2; exit 2; }

# BENCH_DIR=/dev/shm measures the tools rather than the disk (both outputs are fsynced; on tmpfs that is free).
tmp="$(mktemp -d "${BENCH_DIR:-/tmp}/ckptdoc-bench-export-XXXXXX")"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT

echo "generating a ZeRO-2 fp16 dp2 checkpoint (--layers $layers) in $tmp ..."
gen_start=$(date +%s.%N)
"$py" "$root/tests/fixtures/make_deepspeed_checkpoint.py" "$tmp/ck" --stage 2 --dtype fp16 --dp 2 \
  --layers "$layers" >"$tmp/gen.json"
gen_end=$(date +%s.%N)
tag_dir="$tmp/ck/$(cat "$tmp/ck/latest")"
params=$("$py" -c "import json,sys; print(json.load(open(sys.argv[1]))['trainable_numel'])" "$tmp/gen.json")
ckpt_bytes=$(du -sb "$tag_dir" | cut -f1)
printf 'generated %s trainable params, %s bytes on disk, in %.1f s\n' "$params" "$ckpt_bytes" \
  "$(echo "$gen_end - $gen_start" | bc)"

# Drop what the generator left in the page cache for fairness where allowed (needs root; ignored otherwise).
sync; (echo 1 > /proc/sys/vm/drop_caches) 2>/dev/null || true

measure() {  # label, output file, command... -> "wall_s rss_kib"
  local log="$tmp/$1.time"
  shift
  /usr/bin/time -v -o "$log" "$@" >/dev/null
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$log" |
    awk -F: '{ if (NF==3) print $1*3600+$2*60+$3; else print $1*60+$2 }')
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
  echo "$wall $rss"
}

read -r c_wall c_rss < <(measure ckptdoc "$ckptdoc" export "$tmp/ck" -o "$tmp/ckptdoc.safetensors" -q)
sync; (echo 1 > /proc/sys/vm/drop_caches) 2>/dev/null || true
read -r t_wall t_rss < <(measure ckptdoc_torch "$ckptdoc" export "$tmp/ck" -o "$tmp/ckptdoc.bin" -q)
sync; (echo 1 > /proc/sys/vm/drop_caches) 2>/dev/null || true
read -r p_wall p_rss < <(measure python "$py" "$here/export_reference.py" "$tag_dir" "$tmp/python.bin")

echo
printf '%-34s %12s %14s\n' "" "wall (s)" "peak RSS (MiB)"
printf '%-34s %12.2f %14.1f\n' "ckptdoc export -> safetensors" "$c_wall" "$(echo "$c_rss/1024" | bc -l)"
printf '%-34s %12.2f %14.1f\n' "ckptdoc export -> torch (.bin)" "$t_wall" "$(echo "$t_rss/1024" | bc -l)"
printf '%-34s %12.2f %14.1f\n' "python/torch consolidation (.bin)" "$p_wall" "$(echo "$p_rss/1024" | bc -l)"
printf '%-34s %12.2fx %13.1fx\n' "python / ckptdoc (safetensors)" "$(echo "$p_wall/$c_wall" | bc -l)" \
  "$(echo "$p_rss/$c_rss" | bc -l)"
printf '%-34s %12.2fx %13.1fx\n' "python / ckptdoc (torch)" "$(echo "$p_wall/$t_wall" | bc -l)" \
  "$(echo "$p_rss/$t_rss" | bc -l)"
echo
echo "checking the outputs are equal ..."
"$py" "$root/tests/fixtures/compare_state_dicts.py" "$tmp/ckptdoc.bin" "$tmp/python.bin"
"$py" "$root/tests/fixtures/compare_state_dicts.py" "$tmp/ckptdoc.safetensors" "$tmp/python.bin"
