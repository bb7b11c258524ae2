# Sourced by the benchmarks after they set $build (the build folder) and $py (python3). Sets $realds (the realds.py
# driver) and CKPTDOC_REALDS_CACHE. bench_checkpoint DIMS prints the save folder of a ZeRO-2 fp16 dp2 checkpoint
# written by real DeepSpeed (../shared/deepspeed's harness, the toy MLP with --dims DIMS, one step), writing it the
# first time into $build/bench-cache; it exits the benchmark on failure.
export CKPTDOC_REALDS_CACHE="${CKPTDOC_REALDS_CACHE:-$build/realds}"
realds="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/tests/realds/realds.py"
bench_checkpoint() {
  local dims="$1" root cache harness ds_src
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
  "$py" "$realds" status >/dev/null || { echo "real DeepSpeed is needed (see tests/realds/realds.py status)" >&2; exit 2; }
  cache="$build/bench-cache/ds-z2-fp16-dp2-$(echo "$dims" | tr ',' 'x')"
  if [ ! -f "$cache/done" ]; then
    echo "writing a ZeRO-2 fp16 dp2 checkpoint with real DeepSpeed (--dims $dims) into $cache ..." >&2
    rm -rf "$cache" && mkdir -p "$cache"
    harness="$root/../shared/deepspeed/harness"
    ds_src="$("$py" "$realds" py -- -c 'import deepspeed, os; print(os.path.dirname(os.path.dirname(deepspeed.__file__)))' | tail -1)"
    DS_SRC="$ds_src" "$py" "$harness/launch.py" --world 2 --logdir "$cache/logs" -- "$harness/ds_driver.py" train \
      --name bench --out "$cache/ckpt" --stage 2 --dtype fp16 --steps 1 --dims "$dims" --no-truth >"$cache/generate.log" 2>&1 ||
      { tail -20 "$cache/generate.log" >&2; exit 1; }
    touch "$cache/done"
  fi
  echo "$cache/ckpt"
}
