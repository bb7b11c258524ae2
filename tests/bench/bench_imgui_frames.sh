#!/usr/bin/env bash
# Frame times of the ImGui view on Mesa llvmpipe under Xvfb, 1024 ranks x 2000 params (a synthetic ZeRO-2
# checkpoint, one rank's exp_avg_sq holding NaNs), per tab and while panning the layout map, beside the same
# window with nothing open (the floor: clearing and presenting a 1280x800 frame). Each frame is timed to the end
# of llvmpipe's rendering (glFinish); "building" is the view's own share (ImGui, pictures, uploads).
# Goal: median under 16 ms. The machine's load average is printed too: llvmpipe shares the CPU.
# Usage: tests/bench/bench_imgui_frames.sh [BUILD_DIR] [FRAMES] [STAGE]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
frames="${2:-200}"
stage="${3:-2}"
command -v xvfb-run >/dev/null || { echo "xvfb-run not found (apt-get install xvfb xauth)"; exit 2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export XDG_CONFIG_HOME="$work/config"
"$build/app/ckptdoc" synth "$work/ckpt" --stage "$stage" --dp 1024 --layers 167 --hidden 16 \
  --break nan_in_exp_avg_sq | tail -1
params=$("$build/app/ckptdoc" inspect --json "$work/ckpt" | /usr/bin/python3 -c \
  'import json,sys; d=json.load(sys.stdin); print(sum(len(g["params"]) for g in d["groups"]))' 2>/dev/null || echo "?")
echo "ZeRO-$stage, 1024 ranks, $params params; 1280x800; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
run() { xvfb-run -a -s "-screen 0 1280x800x24" "$build/app/ckptdoc-imgui" "$@" --bench "$frames" --size 1280x800; }
echo "baseline (nothing open):"
run | sed 's/^/  /'
echo "ckptdoc-imgui with the checkpoint:"
run "$work/ckpt" | sed 's/^/  /'
echo "layout picture alone (session::layout_raster, what one panning step recomputes off the UI thread):"
"$build/tests/bench/bench_pictures" | sed 's/^/  /'
