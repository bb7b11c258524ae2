#!/usr/bin/env bash
# Renders screenshots of the desktop app's main views (and of the ImGui view) under Xvfb into
# docs/screenshots/. Uses `ckptdoc demo` for a checkpoint with stale fp32 masters (the DeepSpeed #762 state)
# and `ckptdoc repair` for its fixed copy. Run from the repository root after building:
#   tests/gui/screenshots.sh [BUILD_DIR]
set -euo pipefail
BUILD=${1:-build}
OUT=${OUT_DIR:-docs/screenshots}
CLI=$BUILD/app/ckptdoc
IMGUI=$BUILD/app/ckptdoc-imgui
SIZE=${SIZE:-1280x800}
command -v xvfb-run >/dev/null || { echo "xvfb-run not found (apt-get install xvfb xauth)"; exit 2; }
[ -x "$CLI" ] || { echo "$CLI not built"; exit 2; }
mkdir -p "$OUT"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

"$CLI" demo "$WORK/demo" >/dev/null
"$CLI" repair "$WORK/demo" -o "$WORK/demo-fixed" --refresh-fp32 --device cpu >/dev/null
# More ranks make the layout picture say more: ZeRO-2 over 8 ranks.
"$CLI" synth "$WORK/dp8" --stage 2 --dp 8 --layers 3 --hidden 96 --break stale_fp32 >/dev/null

shot() {  # shot NAME ARGS... : one Qt screenshot on a fresh X server
  local name=$1; shift
  xvfb-run -a -s "-screen 0 ${SIZE}x24" env -u QT_QPA_PLATFORM XDG_RUNTIME_DIR="$WORK" \
    "$CLI" gui "$@" --screenshot "$OUT/$name.png"
}
shot overview "$WORK/demo" --view overview
shot layout "$WORK/dp8" --view layout
shot params "$WORK/demo" --view params
shot fixed-overview "$WORK/demo-fixed" --view overview

# The whole X root window as a user would see it (no window manager: the window sits at 0,0).
xvfb-run -a -s "-screen 0 ${SIZE}x24" bash -c '
  env -u QT_QPA_PLATFORM XDG_RUNTIME_DIR="$3" "$1" gui "$2" & app=$!
  sleep 5; import -window root "$3/root.png"; kill $app; wait $app || true' _ "$CLI" "$WORK/demo" "$WORK"
[ -s "$WORK/root.png" ] && echo "root window captured ($(stat -c %s "$WORK/root.png") bytes)"

if [ -x "$IMGUI" ]; then
  xvfb-run -a -s "-screen 0 ${SIZE}x24" "$IMGUI" "$WORK/demo" --screenshot "$OUT/imgui.png" --frames 5 \
    --size "$SIZE"
fi
# 256-colour PNGs keep the committed pictures small.
for f in "$OUT"/*.png; do /usr/bin/convert "$f" -colors 256 PNG8:"$f.tmp" && mv "$f.tmp" "$f"; done
ls -l "$OUT"
