#!/usr/bin/env bash
# Re-partition dp 4 -> 6 of one checkpoint: one process (the baseline) against mpirun -np P (shared storage),
# in one run, with the bytes each moved between processes. The outputs must be byte-identical.
# Usage: tests/bench/bench_repartition.sh [BUILD_DIR] [PARAMS] [PROCESSES]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build}"
params="${2:-30000000}"
procs="${3:-2}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
ckptdoc="$build/app/ckptdoc"
"$ckptdoc" synth "$work/ckpt" --stage 2 --dtype bf16 --dp 4 --params "$params" >/dev/null
cat "$work/ckpt/$(cat "$work/ckpt/latest")"/*.pt >/dev/null  # warm the page cache for both runs
bytes=$(du -sb "$work/ckpt" | cut -f1)
t0=$(date +%s.%N)
"$ckptdoc" repair "$work/ckpt" --repartition --world-size 6 -o "$work/one" --device cpu >/dev/null
t1=$(date +%s.%N)
out=$(mpirun -np "$procs" "$ckptdoc" repair "$work/ckpt" --repartition --world-size 6 -o "$work/many" --device cpu)
t2=$(date +%s.%N)
same=identical
for f in $(cd "$work/one" && find . -type f); do cmp -s "$work/one/$f" "$work/many/$f" || same="DIFFERENT ($f)"; done
moved=$(echo "$out" | sed -n 's/.*(\([0-9]*\) bytes between processes).*/\1/p' | head -1)
/usr/bin/python3 - "$params" "$bytes" "$t0" "$t1" "$t2" "$procs" "$moved" "$same" <<'PY'
import sys
params, size, t0, t1, t2, procs, moved, same = sys.argv[1:]
one, many = float(t1) - float(t0), float(t2) - float(t1)
print(f"checkpoint: ZeRO-2 bf16 dp4 -> dp6, {int(params):,} params, {int(size)/1e9:.2f} GB (incl. re-diagnosis of the output)")
print(f"{'':34}{'seconds':>10}")
print(f"{'one process (baseline)':34}{one:>10.2f}")
print(f"{'mpirun -np ' + procs + ' (shared storage)':34}{many:>10.2f}   {int(moved or 0)/1e9:.3f} GB between processes")
print(f"outputs: {same}")
PY
