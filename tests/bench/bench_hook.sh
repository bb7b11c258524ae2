#!/bin/bash
# Overhead of ckptdoc_hook on a live engine: a ZeRO-2 fp16 engine of ~92M params (the harness's model with dims
# 2048,8192,8192,1024) on 2 CPU ranks of real DeepSpeed v0.12.6, per rank and per call: engine.save_checkpoint
# (baseline) vs ckptdoc_hook.dump vs dump(grads=True) between backward and step. Prints wall seconds and extra
# peak host memory (RSS) side by side, then ckptdoc diagnose on the snapshot. Not a ctest test.
#
# Usage: tests/bench/bench_hook.sh [BUILD_DIR] [DIMS]
# Environment: BENCH_DIR (default /tmp; /dev/shm measures the code rather than the disk), KEEP=1 keeps the folder.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build}"
dims="${2:-2048,8192,8192,1024}"
tmp="$(mktemp -d "${BENCH_DIR:-/tmp}/ckptdoc-bench-hook-XXXXXX")"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT

/usr/bin/python3 "$root/tests/realds/realds.py" --cache "$build/realds" launch --world 2 --logdir "$tmp/logs" -- \
  "$here/bench_hook.py" --out "$tmp" --dims "$dims" >"$tmp/launch.out"
json=$(grep '^{' "$tmp/logs/rank0.log" | tail -1)
/usr/bin/python3 - "$json" <<'EOF'
import json, sys
r = json.loads(sys.argv[1])
mb = lambda b: b / 2**20
print(f"ZeRO-{r['stage']} {r['dtype']}, {r['params']:,} params, 2 ranks; checkpoint {mb(r['bytes_on_disk']['ckpt']):.0f} MiB, "
      f"snapshot {mb(r['bytes_on_disk']['snap']):.0f} MiB on disk")
print(f"{'rank':>4} {'call':<16} {'wall s (each try)':<20} {'CPU s (each try)':<20} {'extra RSS MiB (each try)':<26}")
for rk in r["ranks"]:
    for k, label in (("save_checkpoint", "save_checkpoint"), ("dump", "hook.dump"), ("dump_grads", "dump(grads=True)")):
        s = " ".join(f"{m['seconds']:.2f}" for m in rk[k])
        c = " ".join(f"{m['cpu_seconds']:.2f}" for m in rk[k])
        x = " ".join(f"{mb(m['extra_rss_bytes']):.1f}" for m in rk[k])
        print(f"{rk['rank']:>4} {label:<16} {s:<20} {c:<20} {x:<26}")
    print(f"{rk['rank']:>4} resident set size of the training process: {mb(rk['rss_bytes']):.0f} MiB")
EOF
start=$(date +%s.%N)
"$build/app/ckptdoc" diagnose "$tmp/snap/t0" --device cpu >/dev/null || true
echo "machine load average while it ran: $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) cores)"
echo "ckptdoc diagnose of the snapshot: $(echo "$(date +%s.%N) - $start" | bc) s"
