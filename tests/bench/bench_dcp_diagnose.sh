#!/usr/bin/env bash
# `ckptdoc diagnose` of a ~1 GB FSDP2 Distributed Checkpoint (written by the judges' torch, world 2 on the CPU)
# vs torch reading every item of it in one process (dcp_read_reference.py); wall time and peak RSS of each
# (tree_memory.py), page cache warm for both.
# Usage: tests/bench/bench_dcp_diagnose.sh [BUILD_DIR] [LAYERS]   (5 layers of 4096x4096 ~ 1 GB)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
layers="${2:-5}"
python="$(bash "$root/scripts/setup-judges.sh" --path)/bin/python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# torchrun's chatter goes to a log, shown when the writer fails (set -e alone would exit without a word).
if ! CUDA_VISIBLE_DEVICES="" "$python" -m torch.distributed.run --standalone --nproc_per_node 2 \
  "$root/tests/bench/dcp_bench_checkpoint.py" "$work/ckpt" "$layers" >"$work/writer.log" 2>&1; then
  echo "the torch writer (dcp_bench_checkpoint.py) failed:" >&2
  tail -40 "$work/writer.log" >&2
  exit 1
fi
du -sh "$work/ckpt"
cat "$work/ckpt"/* >/dev/null  # warm the page cache for both readers
echo "ckptdoc diagnose: $(/usr/bin/python3 "$root/tests/bench/tree_memory.py" -- "$build/app/ckptdoc" diagnose "$work/ckpt")"
"$build/app/ckptdoc" diagnose "$work/ckpt" | sed -n 3p
echo "torch read:       $(CUDA_VISIBLE_DEVICES="" /usr/bin/python3 "$root/tests/bench/tree_memory.py" -- "$python" \
  "$root/tests/bench/dcp_read_reference.py" "$work/ckpt")"
