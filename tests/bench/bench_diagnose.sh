#!/usr/bin/env bash
# Diagnose throughput vs the raw read bandwidth of the same files (page cache) vs a numpy/torch script doing
# the same statistics, in one run; then what --verify-checksums (CRC-32 of every record) adds, and the peak
# resident memory of both (tree_memory.py: the mapped pages a process keeps count too).
# Usage: tests/bench/bench_diagnose.sh [BUILD_DIR] [PARAMS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
params="${2:-100000000}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$build/app/ckptdoc" synth "$work/ckpt" --stage 2 --dtype fp16 --dp 2 --params "$params" --break stale_fp32 >/dev/null
tag="$work/ckpt/$(cat "$work/ckpt/latest")"
files=("$tag"/*.pt)
cat "${files[@]}" >/dev/null  # warm the page cache for all three readers
raw=$("$build/tests/bench/bench_read_bandwidth" "${files[@]}")
raw=$("$build/tests/bench/bench_read_bandwidth" "${files[@]}")
ours=$("$build/app/ckptdoc" diagnose --json "$work/ckpt" || true)
ours_bytes=$(echo "$ours" | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["bytes_scanned"], d["seconds"], d["backend"])')
crc=$("$build/app/ckptdoc" diagnose --json --verify-checksums "$work/ckpt" || true)
crc_seconds=$(echo "$crc" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])')
ref=$(/usr/bin/python3 "$root/tests/bench/diagnose_reference.py" "$tag")
ours_mem=$(/usr/bin/python3 "$root/tests/bench/tree_memory.py" -- "$build/app/ckptdoc" diagnose "$work/ckpt" || true)  # exit 1: the error it finds
ref_mem=$(/usr/bin/python3 "$root/tests/bench/tree_memory.py" -- /usr/bin/python3 "$root/tests/bench/diagnose_reference.py" "$tag")
/usr/bin/python3 - "$raw" "$ours_bytes" "$ref" "$params" "$crc_seconds" "$ours_mem" "$ref_mem" <<'PY'
import json, sys
raw = json.loads(sys.argv[1]); b, s, *backend = sys.argv[2].split(); ref = json.loads(sys.argv[3])
crc = float(sys.argv[5])
ours_mem, ref_mem = json.loads(sys.argv[6]), json.loads(sys.argv[7])
ours = int(b) / float(s) / 1e9
print(f"checkpoint: ZeRO-2 fp16 dp2, {int(sys.argv[4]):,} params; files {raw['bytes']/1e9:.2f} GB")
print(f"{'':28}{'GB/s':>10}{'seconds':>10}")
print(f"{'raw read (page cache)':28}{raw['gb_per_s']:>10.2f}{raw['seconds']:>10.2f}")
print(f"{'ckptdoc diagnose':28}{ours:>10.2f}{float(s):>10.2f}   ({' '.join(backend)})")
print(f"{'numpy/torch script':28}{ref['gb_per_s']:>10.2f}{ref['seconds']:>10.2f}")
print(f"diagnose / raw read: {ours / raw['gb_per_s'] * 100:.0f}%   (goal >= 60%)")
print(f"diagnose / script:   {ours / ref['gb_per_s']:.1f}x  (goal >= 5x)")
print(f"with --verify-checksums: {crc:.2f} s ({raw['bytes'] / (crc - float(s)) / 1e9:.2f} GB/s of CRC-32 on top)"
      if crc > float(s) else f"with --verify-checksums: {crc:.2f} s")
print(f"peak RSS: ckptdoc diagnose {ours_mem['peak_rss_mib']:.0f} MiB, script {ref_mem['peak_rss_mib']:.0f} MiB "
      f"(files {raw['bytes'] / 2**20:.0f} MiB)")
PY
