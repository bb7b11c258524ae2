#!/usr/bin/env bash
# Runs `inspect` and `diagnose`, each as text and --json, with two ckptdoc binaries on the same checkpoints
# and reports every output that differs, after masking the run's own timings ("in 0.01 s", "seconds").
# For a refactor that must not change what a user sees (#27's moves):
#   scripts/compare_cli_outputs.sh BASE_CLI NEW_CLI PATH...
# Prints one line per checkpoint and command that differs (and a diff), then "N of M outputs identical";
# exits 1 when any differs.
set -u
if [ $# -lt 3 ]; then
  sed -n '2,7p' "$0"
  exit 2
fi
base=$1 new=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mask() { sed -E -e 's/ in [0-9]+\.[0-9]+ s / in T s /g' -e 's/"seconds": [0-9.e+-]+/"seconds": T/'; }
same=0 total=0
for path in "$@"; do
  for cmd in "inspect" "inspect --json" "diagnose" "diagnose --json"; do
    total=$((total + 1))
    # shellcheck disable=SC2086 # cmd is a subcommand and its flag
    "$base" $cmd "$path" 2>&1 | mask >"$work/base"
    b=${PIPESTATUS[0]}
    # shellcheck disable=SC2086
    "$new" $cmd "$path" 2>&1 | mask >"$work/new"
    n=${PIPESTATUS[0]}
    if [ "$b" = "$n" ] && cmp -s "$work/base" "$work/new"; then
      same=$((same + 1))
    else
      echo "DIFFERS: $cmd $path (exit $b vs $n)"
      diff "$work/base" "$work/new" | head -20
    fi
  done
done
echo "$same of $total outputs identical"
[ "$same" = "$total" ]
