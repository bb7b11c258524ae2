#!/usr/bin/env bash
# Stress, not a test: `ckptdoc diagnose` stopped from outside the moment it maps a file, the file cut, the
# process resumed; the outcome depends on timing, so this runs many rounds and counts them. Every round must
# end without a signal; every "changed while being read" must name the file. The deterministic check of the
# same paths is tests/interop/test_changed_while_read.cpp (CKPTDOC_CUT_AFTER_MAP).
# Usage: tests/bench/stress_changed_while_read.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
rounds="${2:-20}"
cli="$build/app/ckptdoc"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$cli" synth "$work/ck" --stage 2 --dp 2 --params 8000000 >/dev/null
"$cli" convert "$work/ck" -o "$work/ck-u" --to universal -q
caught=0 complete=0 bad=0
for kind in rank universal; do
  if [ "$kind" = rank ]; then ck="$work/ck" name=zero_pp_rank_1_mp_rank_00_optim_states.pt tag=global_step10
  else ck="$work/ck-u" name=zero/embed.weight/exp_avg.pt tag=global_step10_universal; fi
  victim="$ck/$tag/$name"
  cp "$victim" "$work/intact"
  for ((i = 0; i < rounds; i++)); do
    cp "$work/intact" "$victim"
    "$cli" diagnose "$ck" --device cpu --threads 1 >/dev/null 2>"$work/err" &
    pid=$!
    for ((j = 0; j < 20000; j++)); do
      if grep -q "$name" "/proc/$pid/maps" 2>/dev/null; then
        kill -STOP "$pid"; truncate -s 65536 "$victim"; kill -CONT "$pid"; break
      fi
      kill -0 "$pid" 2>/dev/null || break
    done
    rc=0; wait "$pid" || rc=$?
    if [ "$rc" -eq 2 ] && grep -q "changed while being read" "$work/err"; then
      if grep -qF "$victim" "$work/err"; then caught=$((caught + 1)); else bad=$((bad + 1)); cat "$work/err"; fi
    elif [ "$rc" -eq 0 ] || [ "$rc" -eq 1 ]; then complete=$((complete + 1))
    else bad=$((bad + 1)); echo "round $kind/$i: exit $rc"; cat "$work/err"; fi
  done
done
echo "changed-while-read stress: $caught cut and named, $complete read whole before the cut, $bad wrong"
[ "$bad" -eq 0 ]
