#!/usr/bin/env bash
# Installs this build tree's Debian package on a fresh Debian 12 (bookworm) as a user would, `apt install
# ./ckptdoc_<version>_<arch>.deb`, and runs ckptdoc there: the fresh system is a minimal debootstrap in a
# temporary folder (nothing of this machine's libraries, build tree or Python), entered with chroot in a private
# mount namespace so that its /proc and /dev vanish with it (fresh_debian.sh). test_deb.sh checks the package's contents on every
# test run; this script is the install itself (issue #27), run by hand: it needs root, debootstrap and
# deb.debian.org, takes minutes and downloads ~150 MB, so ctest does not run it.
#
# Usage: tests/package/install_on_fresh_debian.sh BUILD_DIR [CHECKPOINT]
#   BUILD_DIR  a configured and built tree (cpack reads its CPackConfig.cmake)
#   CHECKPOINT optionally a real checkpoint folder, copied in and diagnosed by the installed CLI as well
# Environment: KEEP=1 keeps the fresh system (its path is printed), MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,12p' "$0" >&2; exit 2; }
. "$(dirname "${BASH_SOURCE[0]}")/fresh_debian.sh"
fresh_debian_check
build="$(cd "$1" && pwd)"
checkpoint="${2:-}"
[ -f "$build/CPackConfig.cmake" ] || { echo "$build has no CPackConfig.cmake: configure and build it first" >&2; exit 2; }

work="$(mktemp -d)"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

t=$(fresh_now)
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/out" > "$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log"; fail "cpack"; }
debs=("$work"/out/ckptdoc_*_*.deb)
[ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] || fail "expected one .deb, got: ${debs[*]}"
deb="${debs[0]}"
echo "package: $(basename "$deb"), $(stat -c %s "$deb") bytes ($(fresh_took "$t"))"

root="$work/debian12"
make_fresh_debian "$root"
cp "$deb" "$root/tmp/"
if [ -n "$checkpoint" ]; then cp -r "$checkpoint" "$root/tmp/checkpoint"; fi

# Everything below runs inside the fresh system, in a mount namespace of its own.
cat > "$root/tmp/inside.sh" << 'EOF'
set -euo pipefail
fail() { echo "FAIL (inside): $*" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
command -v ckptdoc > /dev/null && fail "ckptdoc is already installed on the fresh system"
apt-get install -y -qq /tmp/ckptdoc_*.deb > /tmp/apt.log 2>&1 || { tail -30 /tmp/apt.log; fail "apt install"; }
echo "installed: $(dpkg-query -W -f='${Package} ${Version}, ${Installed-Size} KiB' ckptdoc)"
echo "packages on the system: $(dpkg-query -W | wc -l)"
command -v ckptdoc
ckptdoc --version
cd /tmp
ckptdoc demo /tmp/demo > /tmp/demo.log 2>&1 || { cat /tmp/demo.log; fail "ckptdoc demo"; }
rc=0; ckptdoc diagnose /tmp/demo > /tmp/report.txt || rc=$?
sed -n '1,12p' /tmp/report.txt
[ $rc = 1 ] || fail "diagnose of the demo (stale fp32 masters) exited $rc, not 1"
rc=0; ckptdoc diagnose --json /tmp/demo > /tmp/report.json || rc=$?
grep -q '"fp32-master-mismatch"' /tmp/report.json || fail "diagnose --json did not name the stale masters"
if [ -d /tmp/checkpoint ]; then
  rc=0; ckptdoc diagnose /tmp/checkpoint > /tmp/real.txt || rc=$?
  echo "diagnose of the real checkpoint: exit $rc"; sed -n '1,8p' /tmp/real.txt
  [ $rc -le 1 ] || fail "diagnose of the real checkpoint exited $rc"
fi
if command -v ckptdoc-gui > /dev/null; then
  QT_QPA_PLATFORM=offscreen ckptdoc-gui --help > /dev/null 2>&1 || fail "ckptdoc-gui --help"
  echo "ckptdoc-gui --help: ok"
fi
EOF
t=$(fresh_now)
run_in_fresh_debian "$root" /tmp/inside.sh || fail "the run inside the fresh system"
echo "install and run inside: $(fresh_took "$t")"
[ "${KEEP:-0}" = 1 ] && echo "kept: $root"
echo "PASS: $(basename "$deb") installed with apt on a fresh Debian 12 and ran there"
