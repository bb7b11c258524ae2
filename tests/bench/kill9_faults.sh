#!/bin/bash
# Fault injection, not a ctest test: kill -9 at random points of every ckptdoc command that writes a checkpoint
# or weights (repair --refresh-fp32 / --drop-optimizer / --reset-optimizer, convert --to universal, export to
# one safetensors file, export --max-shard-size into a folder), on a >= 500 MB ZeRO-2 fp16 dp2 checkpoint
# written by real DeepSpeed (the harness in ../shared/deepspeed, 3 Linear layers of 4096x4096 = 50M params,
# ~700 MB with the fp32 masters and Adam moments; generated once, ~1 min, kept in BUILD_DIR/bench-cache).
# Each command runs three times whole (the reference output, the same each time, and the median duration T),
# then is killed (SIGKILL to its process group) after a time uniform in (0, T), KILLS times over all commands
# (a run that ends before its kill point is redrawn). After each kill:
#   - the input is unchanged (type, mode, size, mtime, ctime, inode and BLAKE2 hash of every entry),
#   - OUT is absent, or complete: the same entries with the same modes and hashes as the reference,
#   - anything else in OUT's folder (or in TMPDIR) is a leftover, recorded,
#   - the same command run again (with --force only where it refuses an OUT that is already there) exits 0,
#     leaves OUT equal to the reference and nothing beside it.
# Prints a table; exits 1 on any partial OUT, changed input, leftover after the next run, failed rerun or
# surviving process, with the command, the kill time and what was wrong.
#
# Every ckptdoc writer holds a lock (flock) on its partial folder or temp file, so on a local file system the next
# run removes a killed writer's "<OUT>.ckptdoc-{partial,tmp}-<pid>" at once; the reruns here start right after the
# kill. On a network file system the lock proves nothing (the writer may run on another host) and leftovers go only
# once a minute old: AGE_LEFTOVERS=1 backdates them two minutes before each rerun to stand for that.
#
# Usage: tests/bench/kill9_faults.sh [CKPTDOC]   (default BUILD_DIR/app/ckptdoc)
# Environment: BUILD_DIR (default <repo>/build: the checkpoint cache and CKPTDOC_REALDS_CACHE), KILLS (default
# 60, spread over the 6 commands), SEED (for $RANDOM, default the pid; printed), DIMS (harness --dims, default
# 4096 x 4), BENCH_DIR (default /tmp), KEEP=1 keeps the work folder, AGE_LEFTOVERS (default 0), PYTHON.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
mkdir -p "${BUILD_DIR:-$root/build}"
build="$(cd "${BUILD_DIR:-$root/build}" && pwd)"
cli="$(realpath "${1:-$build/app/ckptdoc}")"
[ -x "$cli" ] || { echo "no ckptdoc binary at $cli (build first, or pass its path)" >&2; exit 2; }
kills="${KILLS:-60}"
seed="${SEED:-$$}"
RANDOM=$seed
py="${PYTHON:-/usr/bin/python3}"
dims="${DIMS:-4096,4096,4096,4096}"
. "$here/ds_bench_checkpoint.sh"
ckpt_dir="$(bench_checkpoint "$dims")"  # written by real DeepSpeed once per DIMS
bytes=$(du -sb "$ckpt_dir" | cut -f1)
[ "$bytes" -ge 500000000 ] || { echo "the checkpoint is $bytes bytes, under the 500 MB asked for (raise DIMS)" >&2; exit 2; }

tmp="$(mktemp -d "${BENCH_DIR:-/tmp}/ckptdoc-kill9-XXXXXX")"
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT
# The input in a folder of its own (a copy: a defect must not spoil the cache), the outputs in another, a
# TMPDIR of their own: whatever a killed run leaves is easy to find.
mkdir -p "$tmp/in" "$tmp/out" "$tmp/ref" "$tmp/tmpdir"
cp -a "$ckpt_dir" "$tmp/in/ck"
in="$tmp/in/ck"
export TMPDIR="$tmp/tmpdir"
echo "checkpoint: $ckpt_dir, $bytes bytes; ckptdoc: $cli; $kills kills, SEED=$seed; work folder $tmp"

# One line per entry under a file or folder: type, mode, size and content hash; no times (outputs of different
# runs are compared). BLAKE2 is 3x faster than sha256 here and as complete.
tree() {
  if [ -f "$1" ]; then stat -c 'f %a %s .' "$1" && b2sum <"$1"; return; fi
  (cd "$1" && {
    find . -mindepth 1 ! -type f -printf '%y %m %P\n'
    find . -type f -printf 'f %m %s %P\n'
    find . -type f -print0 | xargs -0 -r b2sum
  } | LC_ALL=C sort)
}
# The input's fingerprint adds mtime, ctime (no writer can set it back) and inode of every entry.
input_fp() { tree "$in"; (cd "$in" && find . -printf 't %T@ %C@ %i %P\n' | LC_ALL=C sort); }
leftovers() {  # OUT -> the names beside OUT, and in TMPDIR, one per line
  find "$(dirname "$1")" -mindepth 1 -maxdepth 1 ! -name "$(basename "$1")" -printf '%f\n'
  find "$TMPDIR" -mindepth 1 -maxdepth 1 -printf 'TMPDIR/%f\n'
}
fp0="$(input_fp)"

ops=(repair-refresh-fp32 repair-drop-optimizer repair-reset-optimizer convert-universal export-safetensors export-sharded)
command_for() {  # op -> sets out and cmd
  out="$tmp/out/$1/OUT"
  case "$1" in
    repair-refresh-fp32) cmd=("$cli" repair "$in" -o "$out" --refresh-fp32) ;;
    repair-drop-optimizer) cmd=("$cli" repair "$in" -o "$out" --drop-optimizer) ;;
    repair-reset-optimizer) cmd=("$cli" repair "$in" -o "$out" --reset-optimizer) ;;
    convert-universal) cmd=("$cli" convert "$in" --to universal -o "$out") ;;
    export-safetensors) out="$out.safetensors" && cmd=("$cli" export "$in" -o "$out") ;;
    export-sharded) cmd=("$cli" export "$in" -o "$out" --max-shard-size 100MB) ;;
  esac
}
violations="$tmp/violations"
: >"$violations"
violation() { printf '%s\n  command: %s\n  kill after %s s (T = %s s)\n  %s\n' "$op #$attempt" "${cmd[*]}" "$at" "$T" "$1" >>"$violations"; }
# Reruns uninterrupted; --force only if the plain command refuses because OUT is there. -> rerun_rc, forced
rerun() {
  forced=0
  rerun_rc=0; "${cmd[@]}" >"$tmp/rerun.log" 2>&1 || rerun_rc=$?
  if [ "$rerun_rc" -ne 0 ] && [ -e "$out" ]; then
    forced=1; rerun_rc=0; "${cmd[@]}" --force >"$tmp/rerun.log" 2>&1 || rerun_rc=$?
  fi
}

table="$(printf '%-24s %5s %8s %6s %8s %7s %7s %9s %9s %7s %6s\n' operation kills finished absent complete PARTIAL \
  INPUT left@kill LEFT@next RERUN forced)"
allleft="$tmp/leftover-names"
: >"$allleft"
for i in "${!ops[@]}"; do
  op="${ops[$i]}" attempt=0 at=- T=-
  command_for "$op"
  mkdir -p "$tmp/out/$op"
  # The reference: three whole runs on a warm page cache (the copy above read the input), which must write the
  # same bytes (the comparisons rest on it); T is their median duration.
  for r in 1 2 3; do
    rm -rf "$out"
    t0=$(date +%s.%N)
    "${cmd[@]}" >"$tmp/ref.log" 2>&1 || { cat "$tmp/ref.log" >&2; echo "the uninterrupted $op failed" >&2; exit 1; }
    echo "$(date +%s.%N) - $t0" | bc -l >>"$tmp/ref/$op.times"
    [ -z "$(leftovers "$out")" ] || { echo "$op: an uninterrupted run left $(leftovers "$out")" >&2; exit 1; }
    tree "$out" >"$tmp/ref/$op.$r"
    cmp -s "$tmp/ref/$op.1" "$tmp/ref/$op.$r" || { echo "$op writes different bytes run to run; cannot compare" >&2; exit 1; }
  done
  mv "$tmp/ref/$op.1" "$tmp/ref/$op"
  T=$(sort -n "$tmp/ref/$op.times" | sed -n 2p | xargs printf '%.3f')
  n=$((kills / ${#ops[@]} + (i < kills % ${#ops[@]} ? 1 : 0)))
  echo "$op: T = $T s, $(du -sb "$out" | cut -f1) bytes out; $n kills ..."
  landed=0 finished=0 absent=0 complete=0 partial=0 changed=0 left_kill=0 left_next=0 failed=0 nforced=0
  while [ "$landed" -lt "$n" ] && [ "$attempt" -lt $((5 * n)) ]; do
    attempt=$((attempt + 1))
    rm -rf "$tmp/out/$op" "$TMPDIR" && mkdir -p "$tmp/out/$op" "$TMPDIR"
    # Uniform in (0, T) from two 15-bit draws.
    at=$(awk -v T="$T" -v r=$((RANDOM * 32768 + RANDOM)) 'BEGIN { printf "%.3f", T * (r + 0.5) / 1073741824 }')
    setsid "${cmd[@]}" >"$tmp/kill.log" 2>&1 &  # its own process group: the kill reaches any child too
    pid=$!
    sleep "$at"
    kill -9 -- "-$pid" 2>/dev/null || true
    rc=0; { wait "$pid"; } 2>/dev/null || rc=$?
    if pgrep -g "$pid" >/dev/null; then
      violation "processes of group $pid survived the kill: $(pgrep -g "$pid" | tr '\n' ' ')"; kill -9 -- "-$pid" || true
    fi
    if [ "$rc" -eq 0 ]; then finished=$((finished + 1)); continue; fi  # done before the kill: not a kill point
    if [ "$rc" -ne 137 ]; then violation "exited $rc by itself: $(tail -3 "$tmp/kill.log")"; failed=$((failed + 1)); continue; fi
    landed=$((landed + 1))
    # (a) the input
    if [ "$(input_fp)" != "$fp0" ]; then
      changed=$((changed + 1)); violation "input changed: $(diff <(echo "$fp0") <(input_fp) | head -10)"
      fp0="$(input_fp)"  # report each change once
    fi
    # (b) OUT
    if [ ! -e "$out" ]; then absent=$((absent + 1))
    elif [ "$(tree "$out")" = "$(cat "$tmp/ref/$op")" ]; then complete=$((complete + 1))
    else partial=$((partial + 1)); violation "OUT is there but not the reference: $(diff "$tmp/ref/$op" <(tree "$out") | head -10)"; fi
    # (c) leftovers of the kill, kept by name with the pid made generic
    left="$(leftovers "$out")"
    if [ -n "$left" ]; then
      left_kill=$((left_kill + 1))
      echo "$left" | sed "s/-$pid\$/-<pid>/" >>"$allleft"
      [ "${AGE_LEFTOVERS:-0}" = 0 ] || (cd "$(dirname "$out")" && echo "$left" | grep -v '^TMPDIR/' | xargs -r -d '\n' touch -h -d '2 minutes ago')
    fi
    # (d) the next run
    rerun
    nforced=$((nforced + forced))
    if [ "$rerun_rc" -ne 0 ]; then
      failed=$((failed + 1)); violation "the rerun (forced=$forced) exited $rerun_rc: $(tail -5 "$tmp/rerun.log")"
    elif [ "$(tree "$out")" != "$(cat "$tmp/ref/$op")" ]; then
      failed=$((failed + 1)); violation "after the rerun OUT is not the reference: $(diff "$tmp/ref/$op" <(tree "$out") | head -10)"
    fi
    after="$(leftovers "$out")"
    if [ -n "$after" ]; then
      left_next=$((left_next + 1)); violation "left after the next run: $(echo "$after" | tr '\n' ' ') (after the kill: $(echo "$left" | tr '\n' ' '))"
    fi
  done
  [ "$landed" -ge "$n" ] || violation "only $landed of $n kills landed in $attempt tries (the run finished first)"
  table+=$'\n'"$(printf '%-24s %5d %8d %6d %8d %7d %7d %9d %9d %7d %6d' "$op" "$landed" "$finished" "$absent" "$complete" \
    "$partial" "$changed" "$left_kill" "$left_next" "$failed" "$nforced")"
  rm -rf "$tmp/out/$op"
done
[ "$(input_fp)" = "$fp0" ] || { op=final attempt=- at=- T=-; cmd=(all); violation "input changed by the uninterrupted runs"; }

echo
echo "$table"
echo "(kills: SIGKILLs that landed; finished: runs done before their kill point, redrawn; absent/complete/PARTIAL:"
echo " OUT after the kill; INPUT: input changed; left@kill: kills that left something beside OUT; LEFT@next: still"
echo " there after the next run; RERUN: next runs that failed or wrote something else; forced: reruns that needed"
echo " --force because the killed run had published OUT. Capitals must be 0.)"
if [ -s "$allleft" ]; then
  echo "leftovers seen after kills (count name):"
  sed "s|^$tmp/||" "$allleft" | sort | uniq -c | sed 's/^/  /'
fi
if [ -s "$violations" ]; then
  echo
  echo "VIOLATIONS:"
  cat "$violations"
  exit 1
fi
echo "kill -9 faults: no violation"
