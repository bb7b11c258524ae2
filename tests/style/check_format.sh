#!/usr/bin/env bash
# Every C++ source in the clone is formatted by the repo's .clang-format (CONTRIBUTING "Code style"): names the
# files clang-format would change and fails when there is one. Skipped (77) without clang-format or git.
set -euo pipefail
root="${1:?usage: check_format.sh SOURCE_DIR}"
command -v clang-format >/dev/null || { echo "clang-format not found: not checked"; exit 77; }
cd "$root"
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "not a git clone: not checked"; exit 77; }
# One clang-format per 64 files (its start-up dominates); --dry-run prints "FILE:LINE:COL: error: code should be
# clang-formatted" for each change it would make.
bad=$(git ls-files -z --cached --others --exclude-standard -- '*.cpp' '*.h' '*.cu' '*.cuh' |
  xargs -0 -r -n 64 clang-format --dry-run --Werror 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' |
  sort -u) || true
if [ -n "$bad" ]; then
  echo "$bad" | sed 's/^/not formatted (clang-format -i it): /'
  echo "$(echo "$bad" | wc -l) file(s) not formatted by .clang-format"
  exit 1
fi
echo "every C++ source is formatted by .clang-format"
