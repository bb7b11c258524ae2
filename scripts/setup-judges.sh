#!/usr/bin/env bash
# Makes the judges' virtual environment: today's DeepSpeed (0.19) on torch 2, from PyPI, pinned in
# scripts/judges-requirements.txt. The real-DeepSpeed tests run it (tests/realds/realds.py, entries with
# "ds": "0.19") to write checkpoints and to load ckptdoc's outputs, next to ../shared/deepspeed's v0.12.6 / v0.14.5
# on Debian's torch 1.13.
#
#   scripts/setup-judges.sh          make it if needed, print where it is (idempotent: a second run only checks)
#   scripts/setup-judges.sh --path   print where it is (or would be) and exit
#
# Also installs the older DeepSpeed releases named in scripts/judges-extra-deepspeed.txt beside it (ds-extra/), and
# the newer megatron-core releases of scripts/judges-extra-megatron-core.txt (mcore-extra/), and Megatron Bridge with
# the packages of scripts/judges-extra-megatron-bridge.txt (bridge-extra/<hash of that list>/; 13-46 s, 150 MB), and
# zstandard for torch's DCP ZStandard extension (scripts/judges-extra-zstd.txt, zstd-extra/<hash of that list>/),
# and torchtitan with the packages its checkpoint code imports (scripts/judges-extra-torchtitan.txt,
# titan-extra/<hash of that list>/; 16 MB).
# And a second venv, "torch latest": PyPI's newest torch with numpy, safetensors and zstandard only
# (scripts/judges-torch-latest.txt, no DeepSpeed), in torch-latest-<first 12 hex of sha256(that list)>/, its wheels
# in torch-latest-wheels/; the realds entries with "torch": "latest" are written by it (#28).
#   scripts/setup-judges.sh --torch-latest-path   print where that one is (or would be) and exit
#
# Where: ${XDG_CACHE_HOME:-~/.cache}/ckptdoc/judges-<first 12 hex of sha256(judges-requirements.txt)>/, made with
# Debian's /usr/bin/python3 -m venv (python3-venv, listed in scripts/setup.sh). Any edit of the pins file makes
# a new folder; old ones are left alone (delete them by hand).
#
# Downloads: about 4 GB the first time (torch's CUDA wheels and the nvidia-* wheels they depend on: see the pins
# file). This network's PyPI proxy sends no caching headers, so pip's own cache keeps nothing; the wheels are
# kept in ~/.cache/ckptdoc/judges-wheels/ instead (pip download), and a venv made again (new pins, a deleted
# folder) downloads only what that folder lacks. The venv takes 7.2 GB, the wheels 3.9 GB.
# Measured here (2 cores shared with a build, 2026-12-03): the first run 337 s and 4.0 GiB downloaded (most of
# the time is unpacking 4 GB of wheels); a second run 6 s (it imports torch and DeepSpeed to check them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pins="$root/scripts/judges-requirements.txt"
hash="$(sha256sum "$pins" | cut -c1-12)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ckptdoc"
venv="$cache/judges-$hash"
wheels="$cache/judges-wheels"
ready="$venv/.ckptdoc-judges-ready"   # written last: a venv without it is incomplete and made again
pin_of() { sed -n "s/^$1==//p" "$pins"; }
ds_version="$(pin_of deepspeed)"
torch_version="$(pin_of torch)"

latest_pins="$root/scripts/judges-torch-latest.txt"
latest_venv="$cache/torch-latest-$(sha256sum "$latest_pins" | cut -c1-12)"
latest_wheels="$cache/torch-latest-wheels"
if [ "${1:-}" = "--torch-latest-path" ]; then
  echo "$latest_venv"
  exit 0
fi
if [ "${1:-}" = "--path" ]; then
  echo "$venv"
  exit 0
fi

check() {
  # the versions the pins name, importable with the CPU accelerator (what the tests run)
  DS_ACCELERATOR=cpu "$venv/bin/python" - "$ds_version" "$torch_version" <<'EOF'
import sys
import deepspeed, torch, transformers, accelerate, safetensors, huggingface_hub  # noqa: F401
import warnings
with warnings.catch_warnings():  # megatron-core warns that Transformer Engine and Apex are absent: not used
    warnings.simplefilter("ignore")
    import megatron.core  # noqa: F401  (#28's Megatron judge)
from deepspeed.accelerator import get_accelerator
want_ds, want_torch = sys.argv[1], sys.argv[2]
assert deepspeed.__version__ == want_ds, f"deepspeed {deepspeed.__version__}, pinned {want_ds}"
assert torch.__version__.split("+")[0] == want_torch, f"torch {torch.__version__}, pinned {want_torch}"
assert get_accelerator().device_name() == "cpu", get_accelerator().device_name()
EOF
}

# The older DeepSpeed releases of scripts/judges-extra-deepspeed.txt and the megatron-core releases of
# scripts/judges-extra-megatron-core.txt, each in its own folder beside the venv.
extras() {
  local v dir
  for v in $(grep -v -E '^(#|$)' "$root/scripts/judges-extra-deepspeed.txt"); do
    dir="$cache/ds-extra/$v"
    [ -f "$dir/deepspeed/__init__.py" ] && continue
    rm -rf "$dir.tmp"
    DS_BUILD_OPS=0 "$venv/bin/python" -m pip --disable-pip-version-check install -q --no-deps \
      --no-build-isolation --target "$dir.tmp" "deepspeed==$v"
    mv "$dir.tmp" "$dir"
    echo "setup-judges: DeepSpeed $v in $dir"
  done
  for v in $(grep -v -E '^(#|$)' "$root/scripts/judges-extra-megatron-core.txt"); do
    dir="$cache/mcore-extra/$v"
    [ -f "$dir/megatron/core/__init__.py" ] && continue
    rm -rf "$dir.tmp"
    # --ignore-requires-python: see the list's comment (the 0.18 wheels say >= 3.12; the cp311 one runs here)
    "$venv/bin/python" -m pip --disable-pip-version-check install -q --no-deps --ignore-requires-python \
      --target "$dir.tmp" "megatron-core==$v"
    mv "$dir.tmp" "$dir"
    echo "setup-judges: megatron-core $v in $dir"
  done
  local bridge_pins="$root/scripts/judges-extra-megatron-bridge.txt" t0
  dir="$cache/bridge-extra/$(sha256sum "$bridge_pins" | cut -c1-12)"
  if [ ! -f "$dir/megatron/bridge/__init__.py" ]; then
    t0=$(date +%s)
    mkdir -p "$(dirname "$dir")"
    rm -rf "$dir.tmp"
    grep -v -E '^(#|$)' "$bridge_pins" > "$dir.pins"
    "$venv/bin/python" -m pip --disable-pip-version-check install -q --no-deps --target "$dir.tmp" -r "$dir.pins"
    rm -f "$dir.pins"
    mv "$dir.tmp" "$dir"
    echo "setup-judges: Megatron Bridge in $dir ($(( $(date +%s) - t0 )) s, $(du -sh "$dir" | cut -f1))"
  fi
  local zstd_pins="$root/scripts/judges-extra-zstd.txt"
  dir="$cache/zstd-extra/$(sha256sum "$zstd_pins" | cut -c1-12)"
  if [ ! -d "$dir/zstandard" ]; then
    mkdir -p "$(dirname "$dir")"
    rm -rf "$dir.tmp"
    grep -v -E '^(#|$)' "$zstd_pins" > "$dir.pins"
    "$venv/bin/python" -m pip --disable-pip-version-check install -q --no-deps --target "$dir.tmp" -r "$dir.pins"
    rm -f "$dir.pins"
    mv "$dir.tmp" "$dir"
    echo "setup-judges: zstandard in $dir"
  fi
  local titan_pins="$root/scripts/judges-extra-torchtitan.txt"
  dir="$cache/titan-extra/$(sha256sum "$titan_pins" | cut -c1-12)"
  if [ ! -f "$dir/torchtitan/__init__.py" ]; then
    mkdir -p "$(dirname "$dir")"
    rm -rf "$dir.tmp"
    grep -v -E '^(#|$)' "$titan_pins" > "$dir.pins"
    "$venv/bin/python" -m pip --disable-pip-version-check install -q --no-deps --target "$dir.tmp" -r "$dir.pins"
    rm -f "$dir.pins"
    mv "$dir.tmp" "$dir"
    echo "setup-judges: torchtitan in $dir"
  fi
}
# The torch-latest venv: binary wheels only, downloaded once into torch-latest-wheels/ (this proxy sends no caching
# headers, as above), installed offline from there. Its own ready marker: an incomplete one is made again.
torch_latest() {
  local ready_latest="$latest_venv/.ckptdoc-judges-ready" want t0 list
  want="$(sed -n 's/^torch==//p' "$latest_pins")"
  if [ -f "$ready_latest" ] && "$latest_venv/bin/python" -c "import sys, torch, numpy, safetensors, zstandard
assert torch.__version__.split('+')[0] == sys.argv[1], torch.__version__" "$want"; then
    return 0
  fi
  t0=$(date +%s)
  echo "setup-judges: making $latest_venv (torch $want, no DeepSpeed)"
  rm -rf "$latest_venv"
  /usr/bin/python3 -m venv "$latest_venv"
  list="$(mktemp)"
  grep -v -E '^(#|$)' "$latest_pins" > "$list"
  mkdir -p "$latest_wheels"
  "$latest_venv/bin/python" -m pip --disable-pip-version-check download -q --only-binary :all: --no-deps \
    -d "$latest_wheels" -r "$list"
  "$latest_venv/bin/python" -m pip --disable-pip-version-check install -q --no-index --find-links "$latest_wheels" \
    --no-deps -r "$list"
  rm -f "$list"
  "$latest_venv/bin/python" -m pip --disable-pip-version-check check
  "$latest_venv/bin/python" -c "import torch, numpy, safetensors, zstandard"
  touch "$ready_latest"
  echo "setup-judges: $latest_venv ready in $(( $(date +%s) - t0 )) s ($(du -sh "$latest_venv" | cut -f1))"
}
mkdir -p "$cache"
exec 9>"$cache/.judges.lock"
flock 9   # one maker at a time (parallel test runs, a second checkout)

if [ -f "$ready" ]; then
  if check; then
    extras
    torch_latest
    echo "setup-judges: $venv (DeepSpeed $ds_version, torch $torch_version) ready"
    exit 0
  fi
  echo "setup-judges: $venv fails its check; making it again" >&2
fi

if [ ! -x /usr/bin/python3 ] || ! /usr/bin/python3 -c "import ensurepip" 2>/dev/null; then
  echo "setup-judges: /usr/bin/python3 with venv support is needed (scripts/setup.sh installs python3-venv)" >&2
  exit 1
fi

start=$(date +%s)
echo "setup-judges: making $venv (DeepSpeed $ds_version, torch $torch_version; ~4 GB of wheels the first time)"
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
rest="$(mktemp)"
trap 'rm -f "$rest"' EXIT
grep -v -E '^(deepspeed==|#|$)' "$pins" > "$rest"
mkdir -p "$wheels"
# Binary wheels only (every pin but deepspeed has one): nothing is compiled here.
"${pip[@]}" download -q --only-binary :all: --no-deps -d "$wheels" -r "$rest"
"${pip[@]}" install -q --no-index --find-links "$wheels" --no-deps -r "$rest"
# DeepSpeed's sdist imports torch in setup.py: after torch, without build isolation, no ops compiled.
DS_BUILD_OPS=0 "${pip[@]}" install -q --no-build-isolation --no-deps "deepspeed==$ds_version"
"${pip[@]}" check
check
touch "$ready"
extras
torch_latest
echo "setup-judges: $venv ready in $(( $(date +%s) - start )) s ($(du -sh "$venv" | cut -f1))"
