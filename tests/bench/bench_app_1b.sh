#!/usr/bin/env bash
# The Qt app (ckptdoc-gui) on issue #29's 1-billion-parameter, 64-rank checkpoint (make_1b_dp64.sh), under Xvfb,
# beside the same window with nothing open. ckptdoc-gui --bench N prints the time from process start to the
# first paint of the overview (with the checkpoint open), then N frames each of panning the layout map (a mouse
# drag, zoomed in 8x) and of scrolling the params table, each timed from the input to the end of the paint that
# shows it. Qt widgets paint in software (QPainter into the backing store, put to the X server): no OpenGL, so
# llvmpipe is not on this path. Then the ImGui view (ckptdoc-imgui --bench, OpenGL on Mesa llvmpipe) on the
# same checkpoint, beside its own empty window. Goals (#29): first paint < 2 s, median frame < 16 ms.
# The checkpoint (~14 GB, ~12 GB for zero3-fp16) is written into a temporary folder and removed at the end.
# Usage: tests/bench/bench_app_1b.sh [BUILD_DIR] [zero2-bf16|zero3-fp16]
# Environment: FRAMES (default 200), BENCH_DIR (where the checkpoint goes, default $TMPDIR), CKPT (an existing
# checkpoint to use instead: nothing is written or removed), IMGUI=0 skips the ImGui view.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
kind="${2:-zero2-bf16}"
frames="${FRAMES:-200}"
command -v xvfb-run >/dev/null || { echo "xvfb-run not found (apt-get install xvfb xauth)"; exit 2; }
[ -x "$build/app/ckptdoc-gui" ] || { echo "$build/app/ckptdoc-gui not built"; exit 2; }
work="$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/bench_app_1b.XXXXXX")"
trap 'rm -rf "$work"' EXIT
export XDG_CONFIG_HOME="$work/config"  # no recent files or window state from the user's settings
unset QT_QPA_PLATFORM                  # xcb, the X server xvfb-run starts
ckpt="${CKPT:-}"
if [ -z "$ckpt" ]; then
  echo "writing the $kind checkpoint (make_1b_dp64.sh) ..."
  bash "$root/tests/bench/make_1b_dp64.sh" "$kind" "$work/ckpt" "$build" | tail -1
  ckpt="$work/ckpt"
fi
echo "$kind: $(du -sh "$ckpt" | cut -f1) in $(find "$ckpt" -type f | wc -l) files; 1280x800; frames per scenario: $frames"
x() { xvfb-run -a -s "-screen 0 1280x800x24" "$@"; }
cat "$ckpt"/*/*optim_states.pt >/dev/null  # warm: the app's analysis then reads from the page cache
echo "ckptdoc-gui, baseline (the same window, nothing open); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
x "$build/app/ckptdoc-gui" --bench "$frames" | sed 's/^/  /'
echo "ckptdoc-gui with the checkpoint; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
x "$build/app/ckptdoc-gui" "$ckpt" --bench "$frames" | sed 's/^/  /'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "${IMGUI:-1}" != 0 ] && [ -x "$build/app/ckptdoc-imgui" ]; then
  echo "ckptdoc-imgui (OpenGL through GLFW on Xvfb's GLX: Mesa llvmpipe), baseline (nothing open: one overview frame):"
  x "$build/app/ckptdoc-imgui" --bench "$frames" --size 1280x800 | sed 's/^/  /'
  echo "ckptdoc-imgui with the checkpoint; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  x "$build/app/ckptdoc-imgui" "$ckpt" --bench "$frames" --size 1280x800 | sed 's/^/  /'
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
