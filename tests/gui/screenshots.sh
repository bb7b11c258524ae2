#!/usr/bin/env bash
# Renders the README's screenshots of both views under Xvfb into docs/screenshots/ (or $OUT_DIR; CI keeps them as
# artefacts), every tab of each: the desktop app (Qt) and the ImGui view on `ckptdoc demo` (a checkpoint with stale fp32 masters, the DeepSpeed #762 state), its repaired copy,
# and synthetic checkpoints with one stale rank among 64 and among 1024 (the layout map, which opens shaded by
# exact fraction there, answers "which rank"), and a damaged PyTorch DCP folder (the Storage tab). Run from the repository root after building:
#   tests/gui/screenshots.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
OUT=${OUT_DIR:-docs/screenshots}
CLI=$BUILD/app/ckptdoc
QT=$BUILD/app/ckptdoc-gui
IMGUI=$BUILD/app/ckptdoc-imgui
SIZE=${SIZE:-1280x800}
command -v xvfb-run >/dev/null || { echo "xvfb-run not found (apt-get install xvfb xauth)"; exit 2; }
[ -x "$CLI" ] || { echo "$CLI not built"; exit 2; }
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export XDG_CONFIG_HOME="$WORK/config" XDG_RUNTIME_DIR="$WORK"

"$CLI" demo "$WORK/demo" >/dev/null
"$CLI" repair "$WORK/demo" -o "$WORK/demo-fixed" --refresh-fp32 --device cpu >/dev/null
# One rank's masters stale (rank dp/2) among 64 ranks (rows tall enough to label) and among 1024.
"$CLI" synth "$WORK/dp64" --stage 2 --dp 64 --layers 6 --hidden 48 --break stale_fp32_one_rank >/dev/null
"$CLI" synth "$WORK/dp1024" --stage 2 --dp 1024 --layers 167 --hidden 16 --break stale_fp32_one_rank >/dev/null
# A PyTorch DCP folder torch wrote (FSDP2 at world 2, tests/fixtures/dcp/fsdp2_ws2) without one of its .distcp files:
# the Storage tab's map with the missing file's row, the Overview with dcp-file-missing.
cp -r tests/fixtures/dcp/fsdp2_ws2 "$WORK/dcp-step"
rm "$WORK/dcp-step/__1_0.distcp"

if [ -x "$QT" ]; then
  qt() {  # qt NAME ARGS... : one screenshot of the desktop app on a fresh X server
    local name=$1; shift
    xvfb-run -a -s "-screen 0 ${SIZE}x24" env -u QT_QPA_PLATFORM "$QT" "$@" --screenshot "$OUT/$name.png" \
      --size "$SIZE"
  }
  qt overview "$WORK/demo" --view overview
  qt params "$WORK/demo" --view params
  # No --shade: the layout opens shaded by the worst finding's metric (exact fraction here), as a user sees it.
  qt layout "$WORK/dp64" --view layout
  qt layout-1024 "$WORK/dp1024" --view layout
  qt fixed-overview "$WORK/demo-fixed" --view overview
  # Diff: the demo against its repaired copy: every fp32 master changed, by the random values' size.
  qt diff "$WORK/demo" --view diff --compare "$WORK/demo-fixed"
  # Attach mode's Timeline: a folder of snapshots (tests/fixtures/make_snapshot.py, manifest last) made from the
  # repaired and the demo checkpoints with live numbers of a run going wrong: the masters stop matching the
  # weights at step 400, the loss scale falls, the gradient norm jumps and the last gradients hold NaN.
  snap() {  # snap SOURCE_TAG_DIR STEP LIVE_JSON [ARGS...]
    local src=$1 step=$2 live=$3; shift 3
    /usr/bin/python3 tests/fixtures/make_snapshot.py "$src" "$WORK/run/step$step" --step "$step" --live "$live" "$@" \
      >/dev/null
  }
  FIXED_TAG=$(find "$WORK/demo-fixed" -mindepth 1 -maxdepth 1 -type d -name 'global_step*' | head -1)
  DEMO_TAG=$(find "$WORK/demo" -mindepth 1 -maxdepth 1 -type d -name 'global_step*' | head -1)
  mkdir -p "$WORK/run"
  snap "$FIXED_TAG" 100 '{"grad_norm": 0.92, "loss_scale": 65536}'
  snap "$FIXED_TAG" 200 '{"grad_norm": 0.81, "loss_scale": 65536}'
  snap "$FIXED_TAG" 300 '{"grad_norm": 0.77, "loss_scale": 32768}'
  snap "$DEMO_TAG" 400 '{"grad_norm": 3.9, "loss_scale": 4096}'
  snap "$DEMO_TAG" 500 '{"grad_norm": 11.4, "loss_scale": 512}'
  snap "$DEMO_TAG" 600 '{"loss_scale": 64}' --grads nan
  qt timeline --watch "$WORK/run" --view timeline
  qt storage "$WORK/dcp-step" --view storage
  qt storage-overview "$WORK/dcp-step" --view overview
fi

if [ -x "$IMGUI" ]; then
  im() {  # im NAME ARGS... : one screenshot of the ImGui view
    local name=$1; shift
    xvfb-run -a -s "-screen 0 ${SIZE}x24" "$IMGUI" "$@" --screenshot "$OUT/$name.png" --size "$SIZE"
  }
  im imgui-overview "$WORK/demo" --tab overview
  im imgui-params "$WORK/demo" --tab params
  im imgui-layout "$WORK/dp1024" --tab layout
  im imgui-storage "$WORK/dcp-step" --tab storage
  printf 'wait opened 300\ncompare %s\nwait diffed 300\ntab diff\nframes 3\nscreenshot %s\nquit\n' \
    "$WORK/demo-fixed" "$OUT/imgui-diff.png" >"$WORK/diff.script"
  xvfb-run -a -s "-screen 0 ${SIZE}x24" "$IMGUI" "$WORK/demo" --script "$WORK/diff.script" --size "$SIZE" >/dev/null
fi
rm -f "$OUT/imgui.png"  # the single ImGui picture of earlier versions
# 256-colour PNGs keep the committed pictures small.
for f in "$OUT"/*.png; do /usr/bin/convert "$f" -colors 256 PNG8:"$f.tmp" && mv "$f.tmp" "$f"; done
ls -l "$OUT"
