#!/usr/bin/env bash
# The Debian package of this build tree (cmake/Packaging.cmake), made by cpack into a temporary folder and unpacked
# there, not installed: the CLI runs from the unpacked usr/bin without the build tree's libraries or paths, the
# desktop entry and icon are where desktops look, and the README's PYTHONPATH finds the hook and, through PATH,
# the packaged CLI. Builds nothing. Usage: test_deb.sh CPACK BUILD_DIR HAVE_GUI PYTHON
set -euo pipefail
cpack=$1 build=$2 gui=$3 python=${4:-}
if ! command -v dpkg-deb >/dev/null; then
  echo "SKIP: no dpkg-deb (not a Debian system)"; exit 77
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" > "$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack"; }
debs=("$tmp"/out/ckptdoc_*_*.deb)
[ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] || fail "expected one ckptdoc_<version>_<arch>.deb, got: ${debs[*]}"
deb=${debs[0]}
dpkg-deb -f "$deb" Package Version Architecture Depends
dpkg-deb -f "$deb" Depends | grep -q libhdf5 || fail "Depends lacks the HDF5 library (dpkg-shlibdeps did not run?)"
dpkg-deb -x "$deb" "$tmp/root"
usr="$tmp/root/usr"

# Only the apps, the plugin and data: no tests, fuzzers or benchmarks.
extra=$(cd "$tmp/root" && find . -type f | grep -Ev '^\./usr/(bin/ckptdoc(-gui|-imgui)?|lib/ckptdoc/[^/]+\.so|share/.*)$' || true)
[ -z "$extra" ] || fail "unexpected files in the package: $extra"

run() { env -u LD_LIBRARY_PATH -u CKPTDOC -u CKPTDOC_BUILD_DIR "$@"; }
version=$(run "$usr/bin/ckptdoc" --version)
echo "$version"
[[ "$version" == "ckptdoc $(dpkg-deb -f "$deb" Version)"* ]] || fail "--version says '$version'"
run "$usr/bin/ckptdoc" demo "$tmp/demo" > /dev/null
rc=0; run "$usr/bin/ckptdoc" diagnose "$tmp/demo" --json > "$tmp/report.json" || rc=$?
[ $rc = 1 ] || fail "diagnose of the (broken) demo exited $rc, not 1"
grep -q '"fp32-master-mismatch"' "$tmp/report.json" || fail "diagnose did not name the stale masters"

if [ "$gui" = ON ]; then
  [ -x "$usr/bin/ckptdoc-gui" ] || fail "no usr/bin/ckptdoc-gui"
  grep -qx 'Exec=ckptdoc-gui %f' "$usr/share/applications/ckptdoc.desktop" || fail "desktop entry"
  [ -s "$usr/share/icons/hicolor/scalable/apps/ckptdoc.svg" ] || fail "no icon"
  run env QT_QPA_PLATFORM=offscreen "$usr/bin/ckptdoc-gui" --help > /dev/null 2>&1 || fail "ckptdoc-gui --help"
fi

hook="$usr/share/ckptdoc/python"
[ -f "$hook/ckptdoc_hook.py" ] || fail "no ckptdoc_hook.py"
if [ -n "$python" ] && "$python" -c 'import torch, numpy' 2>/dev/null; then
  found=$(run env PYTHONPATH="$hook" PATH="$usr/bin:$PATH" "$python" -c \
    'import ckptdoc_hook; print(ckptdoc_hook.find_ckptdoc())')
  [ "$found" = "$usr/bin/ckptdoc" ] || fail "the hook found '$found', not the packaged CLI"
  echo "the hook, imported from usr/share/ckptdoc/python, runs $found"
else
  echo "(no python with torch and numpy: the hook's import is not checked)"
fi
echo "PASS: $(basename "$deb"), $(stat -c %s "$deb") bytes"
