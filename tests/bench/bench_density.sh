#!/usr/bin/env bash
# The density plot's memory on a 1-GB param: a synthetic ZeRO-2 checkpoint whose embedding is 8H x H elements
# (H = 5800: 269M elements, 1.08 GB as float32; 3.8 GB of files), then bench_density on it.
# Usage: tests/bench/bench_density.sh [BUILD_DIR] [HIDDEN]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
hidden="${2:-5800}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$build/app/ckptdoc" synth "$work/ckpt" --stage 2 --dp 2 --layers 0 --hidden "$hidden" | tail -1
"$build/tests/bench/bench_density" "$work/ckpt" embed.weight
