#!/usr/bin/env bash
# clang-tidy (the checks in .clang-tidy, warnings as errors) on the C++ sources changed since BASE, with the
# compile commands of a configured build. CI runs it on the last commit's changes; before a commit, run it on
# yours: `scripts/tidy.sh main` (or `HEAD` for the working tree's changes).
#
#   scripts/tidy.sh [BASE (default HEAD~1)] [BUILD_DIR (default $CKPTDOC_BUILD_DIR or build)]
#
# Only the changed .cpp files' own diagnostics count (.clang-tidy sets no HeaderFilterRegex). Test sources built
# with the tests' precompiled header are skipped. Exit 1 when any file has a finding, 2 when it cannot run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
base="${1:-HEAD~1}"
build="${2:-${CKPTDOC_BUILD_DIR:-build}}"
tidy="$(command -v clang-tidy || true)"
if [ -z "$tidy" ]; then
  echo "tidy.sh: clang-tidy is not installed (apt-get install clang-tidy)" >&2
  exit 2
fi
if [ ! -f "$build/compile_commands.json" ]; then
  echo "tidy.sh: $build/compile_commands.json is missing: configure a build first (scripts/build.sh)" >&2
  exit 2
fi
if ! git rev-parse --verify --quiet "$base^{commit}" >/dev/null; then
  echo "tidy.sh: no commit '$base' in this clone" >&2
  exit 2
fi
# Changed (added, copied, modified, renamed) .cpp files that the build compiles without a precompiled header
# (the tests' GCC .gch files are unreadable to clang); deleted files drop out.
mapfile -t files < <(git diff --name-only --diff-filter=ACMR "$base" -- '*.cpp' |
  python3 -c '
import json, os, sys
commands = json.load(open(sys.argv[1]))
plain = {os.path.realpath(c["file"]) for c in commands if "cmake_pch" not in c.get("command", "")}
for line in sys.stdin:
    f = line.strip()
    if os.path.realpath(f) in plain:
        print(f)
' "$build/compile_commands.json")
if [ "${#files[@]}" -eq 0 ]; then
  echo "tidy.sh: no compiled C++ source changed since $base"
  exit 0
fi
echo "tidy.sh: ${#files[@]} file(s) changed since $base"
failed=0
for f in "${files[@]}"; do
  # GCC-only warning flags (-Wno-restrict) are not clang's concern
  if ! "$tidy" -p "$build" --quiet --extra-arg=-Wno-unknown-warning-option "$f" 2>/dev/null; then
    echo "tidy.sh: findings in $f" >&2
    failed=1
  fi
done
exit "$failed"
