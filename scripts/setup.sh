#!/usr/bin/env bash
# Installs every Debian 12 package ckptdoc needs to build, test and run. Idempotent: a second run only checks.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev qt6-charts-dev qt6-svg-dev libqt6opengl6-dev
  libimgui-dev libstb-dev libglfw3-dev libgl1-mesa-dev libgl1-mesa-dri
  libhdf5-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev zlib1g-dev libzstd-dev
  libopenmpi-dev openmpi-bin
  clang llvm clang-tidy
  xvfb xauth x11-apps imagemagick
  python3-torch python3-numpy python3-h5py
  # what unmodified DeepSpeed (../shared/deepspeed, the tests' judge) imports on the CPU
  python3-pydantic python3-cpuinfo python3-msgpack python3-psutil python3-packaging python3-tqdm python3-yaml
  # the judges' venv (today's DeepSpeed on torch 2 from PyPI: scripts/setup-judges.sh)
  python3-venv
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${#missing[@]} packages: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -q
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}"
