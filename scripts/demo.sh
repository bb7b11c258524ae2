#!/usr/bin/env bash
# README command 1: install what is needed, build, write a demo checkpoint and show what is wrong with it:
# in the desktop app when a display is available, as a terminal report otherwise.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
CKPTDOC_BUILD_TARGET=apps "$root/scripts/build.sh"  # the programs only: scripts/test.sh builds the tests
build="${CKPTDOC_BUILD_DIR:-$root/build}"
demo="${1:-$root/demo-checkpoint}"
"$build/app/ckptdoc" demo "$demo" --force
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && "$build/app/ckptdoc" gui --help >/dev/null 2>&1; then
  exec "$build/app/ckptdoc" gui "$demo"
fi
"$build/app/ckptdoc" inspect "$demo"
echo
"$build/app/ckptdoc" diagnose "$demo" || true
