#!/usr/bin/env bash
# The README's first command on a fresh Debian 12, as a new user runs it: a clone of this repository (its HEAD)
# in a minimal debootstrap of bookworm, then `scripts/demo.sh` there, as root, without a display: setup.sh's
# Debian packages, the build of the programs, the demo checkpoint and its terminal report (issue #27). Prints how
# long the whole command took and checks that the report names the demo's stale masters. Run by hand, not by
# ctest: it needs root, debootstrap and deb.debian.org, downloads ~1.5 GB and builds for many minutes.
#
# Usage: tests/package/demo_on_fresh_debian.sh
# Environment: KEEP=1 keeps the fresh system (its path is printed), MIRROR (default http://deb.debian.org/debian).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
. "$repo/tests/package/fresh_debian.sh"
fresh_debian_check
work="$(mktemp -d)"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

root="$work/debian12"
make_fresh_debian "$root"
git clone -q "$repo" "$root/root/ckptdoc"
echo "clone of $(git -C "$repo" rev-parse --short HEAD) in /root/ckptdoc"
cat > "$root/tmp/inside.sh" << 'INSIDE'
set -euo pipefail
cd /root/ckptdoc
start=$(date +%s)
rc=0; bash scripts/demo.sh > /tmp/demo.log 2>&1 || rc=$?
echo "scripts/demo.sh: exit $rc in $(( $(date +%s) - start )) s on $(nproc) cores"
grep -m1 "^setup: installing" /tmp/demo.log | cut -c1-120 || true
grep -m1 "Need to get" /tmp/demo.log || true
echo "compiled: $(grep -c 'Building C' /tmp/demo.log) files"
[ $rc = 0 ] || { tail -40 /tmp/demo.log; exit 1; }
sed -n '/ckptdoc diagnose:/,/fix:/p' /tmp/demo.log | cut -c1-160
grep -q "fp32-master-mismatch" /tmp/demo.log || { echo "the report does not name the stale masters" >&2; exit 1; }
INSIDE
run_in_fresh_debian "$root" /tmp/inside.sh || fail "scripts/demo.sh on the fresh system"
[ "${KEEP:-0}" = 1 ] && echo "kept: $root"
echo "PASS: the README's demo command ran on a fresh Debian 12"
