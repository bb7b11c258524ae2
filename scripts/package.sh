#!/usr/bin/env bash
# Builds a Release ckptdoc into BUILD_DIR (default build-package/) and makes its Debian package with cpack
# (cmake/Packaging.cmake); prints the .deb's path. Arguments after BUILD_DIR go to cmake's configure step.
# Its own build folder: a distribution build has no tests and no CLI test hooks, unlike build/ (scripts/build.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(realpath -m "${1:-$root/build-package}")"
shift $(( $# > 0 ? 1 : 0 ))
generator=()
[ -f "$build/CMakeCache.txt" ] || generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
  -DCKPTDOC_TEST_HOOKS=OFF ${CKPTDOC_CMAKE_ARGS:-} "$@" >&2
cmake --build "$build" -j "${CKPTDOC_JOBS:-$(nproc)}" >&2
rm -f "$build"/ckptdoc_*.deb  # so that the one printed below is this run's
(cd "$build" && cpack -G DEB >&2)
ls "$build"/ckptdoc_*.deb
