#!/usr/bin/env bash
# Writes one of issue #29's 1-billion-parameter, 64-rank checkpoints with ckptdoc's synthetic writer
# (`ckptdoc synth`): a transformer of 24 layers (hidden 1776, attention qkv/out, MLP 4x, layer norms, biases), a
# 50304-row embedding tied to the head (shared_params) and a final layer norm, 1.00e9 params, saved as DeepSpeed
# 0.19.8 saves it at dp 64:
#   zero2-bf16  ZeRO-2, bf16 weights: mp_rank_00_model_states.pt + 64 bf16_zero_pp_rank_*_optim_states.pt, ~14 GB
#   zero3-fp16  ZeRO-3, fp16: 64 zero_pp_rank_*_model_states.pt (placeholders, as DeepSpeed saves them) + 64
#               *_optim_states.pt, ~12 GB
# The synthetic writer is ckptdoc's own (CONTRIBUTING: fine for scale, never evidence of DeepSpeed's format); its
# layout for this recipe is checked against real DeepSpeed 0.19.8 at a small size (test_realds_synth_layout).
# A failed or interrupted run removes what it wrote. Check the free space first: DIR's file system needs ~15 GB.
#
# Usage: tests/bench/make_1b_dp64.sh KIND DIR [BUILD_DIR]
# Environment: PARAMS (default 1000000000), VOCAB (default 50304), LAYERS (default 24), DS_VERSION (default 0.19.8,
# the DeepSpeed release whose layout is written; 0.12.6 is what the 2026-12-04 numbers in docs/benchmarks.md used).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ $# -ge 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
kind="$1"
dir="$2"
build="${3:-$root/build}"
case "$kind" in
  zero2-bf16) args=(--stage 2 --dtype bf16) ;;
  zero3-fp16) args=(--stage 3 --dtype fp16) ;;
  *) echo "KIND is zero2-bf16 or zero3-fp16, not '$kind'" >&2; exit 2 ;;
esac
[ ! -e "$dir" ] || { echo "$dir exists: give a new folder" >&2; exit 2; }
params="${PARAMS:-1000000000}"
# fp32 masters + two Adam moments (12 bytes) and 16-bit weights (2 bytes) per param, and 1 GB to spare.
need_kb=$(((params * 14 + 1000000000) / 1024))
parent="$(dirname "$dir")"
free_kb=$(df -Pk "$parent" | awk 'NR == 2 { print $4 }')
[ "$free_kb" -ge "$need_kb" ] || { echo "$parent has $((free_kb / 1048576)) GiB free, needs $((need_kb / 1048576))" >&2; exit 2; }

trap 'rm -rf "$dir"' ERR INT TERM
vocab=()
[ "${VOCAB:-50304}" = 0 ] || vocab=(--vocab "${VOCAB:-50304}")
"$build/app/ckptdoc" synth "$dir" "${args[@]}" --dp 64 --layers "${LAYERS:-24}" --params "$params" "${vocab[@]}" \
  --ds-version "${DS_VERSION:-0.19.8}"
sync  # clean pages, so a benchmark can evict them for a cold read
trap - ERR INT TERM
