# Sourced by the scripts that run something on a fresh Debian 12 (install_on_fresh_debian.sh,
# demo_on_fresh_debian.sh): a minimal debootstrap of bookworm in a folder, and a way to run a script inside it
# with chroot, in a private mount namespace so that its /proc and /dev vanish with the run. Needs root,
# debootstrap and a Debian mirror (MIRROR, default http://deb.debian.org/debian).

fresh_debian_check() {
  [ "$(id -u)" = 0 ] || { echo "needs root (debootstrap, chroot)" >&2; exit 2; }
  command -v debootstrap > /dev/null || { echo "needs debootstrap: apt-get install debootstrap" >&2; exit 2; }
}

fresh_now() { date +%s.%N; }
fresh_took() { printf '%.1f s' "$(echo "$(fresh_now) - $1" | bc)"; }

# make_fresh_debian ROOT: a minbase bookworm in ROOT (a new folder), with this machine's resolv.conf.
make_fresh_debian() {
  local root="$1" t
  t=$(fresh_now)
  debootstrap --variant=minbase bookworm "$root" "${MIRROR:-http://deb.debian.org/debian}" > "$root.debootstrap.log" 2>&1 ||
    { tail -20 "$root.debootstrap.log"; echo "FAIL: debootstrap" >&2; exit 1; }
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  echo "fresh Debian $(cat "$root/etc/debian_version") (minbase): $(du -sm "$root" | cut -f1) MB ($(fresh_took "$t"))"
}

# run_in_fresh_debian ROOT SCRIPT: runs SCRIPT (a path inside ROOT) with bash, as root, chrooted into ROOT.
run_in_fresh_debian() {
  unshare --mount --propagation private bash -c '
    set -e
    mount -t proc proc "$1/proc"
    mount --rbind /dev "$1/dev"
    chroot "$1" /usr/bin/env -i HOME=/root TERM=dumb PATH=/usr/sbin:/usr/bin:/sbin:/bin /bin/bash "$2"
  ' _ "$1" "$2"
}
