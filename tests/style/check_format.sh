#!/usr/bin/env bash
# Every C++ source in the clone is formatted by the repo's .clang-format (CONTRIBUTING "Code style"): lists the
# files clang-format would change and fails when there is one. Skipped (77) without clang-format or git.
set -euo pipefail
root="${1:?usage: check_format.sh SOURCE_DIR}"
command -v clang-format >/dev/null || { echo "clang-format not found: not checked"; exit 77; }
cd "$root"
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || { echo "not a git clone: not checked"; exit 77; }
bad=0
while IFS= read -r -d '' f; do
  [ -f "$f" ] || continue
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (run: clang-format -i $f)"
    bad=$((bad + 1))
  fi
done < <(git ls-files -z --cached --others --exclude-standard -- '*.cpp' '*.h' '*.cu' '*.cuh')
[ "$bad" -eq 0 ] || { echo "$bad file(s) not formatted by .clang-format"; exit 1; }
echo "every C++ source is formatted by .clang-format"
