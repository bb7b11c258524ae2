#!/usr/bin/env bash
# `ckptdoc export` of a ~1 GB FSDP2 Distributed Checkpoint (written by the judges' torch, world 2 on the CPU) to
# safetensors vs torch's own dcp_to_torch_save of the same folder; wall time and peak RSS of each
# (tree_memory.py), page cache warm for both, one run. ckptdoc writes the model weights only; torch writes
# everything (weights, Adam moments, bytes items), so both output sizes are printed.
# Usage: tests/bench/bench_dcp_export.sh [BUILD_DIR] [LAYERS]   (5 layers of 4096x4096 ~ 1 GB)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
layers="${2:-5}"
python="$(bash "$root/scripts/setup-judges.sh" --path)/bin/python"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
CUDA_VISIBLE_DEVICES="" "$python" -m torch.distributed.run --standalone --nproc_per_node 2 \
  "$root/tests/bench/dcp_bench_checkpoint.py" "$work/ckpt" "$layers" >"$work/write.log" 2>&1 ||
  { cat "$work/write.log" >&2; echo "bench_dcp_export: torch could not write the checkpoint" >&2; exit 1; }
echo "checkpoint: $(du -sh "$work/ckpt" | cut -f1)"
cat "$work/ckpt"/* >/dev/null  # warm the page cache for both
echo "ckptdoc export:    $(/usr/bin/python3 "$root/tests/bench/tree_memory.py" -- "$build/app/ckptdoc" export \
  "$work/ckpt" -o "$work/model.safetensors" -q)  output $(du -sh "$work/model.safetensors" | cut -f1)"
echo "dcp_to_torch_save: $(CUDA_VISIBLE_DEVICES="" /usr/bin/python3 "$root/tests/bench/tree_memory.py" -- "$python" \
  "$root/tests/bench/dcp_to_torch_save_reference.py" "$work/ckpt" "$work/torch.pt")  output $(du -sh "$work/torch.pt" | cut -f1)"
"$python" "$root/tests/fixtures/dcp/check_dcp_export.py" "$work/ckpt" "$work/model.safetensors"
