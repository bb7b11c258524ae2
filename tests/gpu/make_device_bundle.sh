#!/usr/bin/env bash
# Builds what tests/gpu/device_check.sh runs on a bare GPU machine (no Qt, spdlog, CLI11, HDF5 there) and puts
# it in .device-bundle/: bin/ holds the ckptdoc CLI, gpu_check and bench_cuda (Release, CUDA sm_90, no GUI,
# no MPI, stripped), lib/ every shared library they load except glibc's own and the NVIDIA driver's (libcuda
# is opened by the CUDA runtime at run time; NCCL comes from the machine's nvidia-nccl-cu13 wheel). Run it
# here, on the build machine, before a device call that carries `.device-bundle`.
#   usage: tests/gpu/make_device_bundle.sh      (BUILD=build-device, JOBS=2, MAX_MIB=50 to override)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-device}
JOBS=${JOBS:-2}
MAX_MIB=${MAX_MIB:-50}
BUNDLE=.device-bundle

mkdir -p "$BUILD"
launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCKPTDOC_GUI=OFF -DCKPTDOC_IMGUI=OFF -DCKPTDOC_MPI=OFF -DBUILD_TESTING=ON "${launcher[@]}" > "$BUILD/configure.log" 2>&1 \
  || { tail -40 "$BUILD/configure.log"; exit 1; }
grep -E "CUDA backend|MPI:|Qt GUI" "$BUILD/configure.log"
cmake --build "$BUILD" -j "$JOBS" --target ckptdoc gpu_check bench_cuda

rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
bins=("$BUILD/app/ckptdoc" "$BUILD/tests/gpu_check" "$BUILD/tests/bench/bench_cuda")
for b in "${bins[@]}"; do
  install -m 755 "$b" "$BUNDLE/bin/"
  strip --strip-unneeded "$BUNDLE/bin/$(basename "$b")"
done

# glibc's own libraries must come from the machine (they go with its ld.so); the driver's too.
skip='^(linux-vdso|ld-linux|libc|libm|libmvec|libpthread|libdl|librt|libresolv|libutil|libanl|libnsl|libBrokenLocale|libnss_[a-z]+|libcuda|libnvidia-[a-z0-9-]+)\.so'
status=0
for b in "$BUNDLE"/bin/*; do
  if ldd "$b" | grep -q "not found"; then
    echo "make_device_bundle: $b has unresolved libraries:"; ldd "$b" | grep "not found"; status=1
  fi
  if ldd "$b" | grep -q "libnccl"; then
    echo "make_device_bundle: NOTE: $(basename "$b") links libnccl (not bundled; device_check adds the nvidia-nccl-cu13 wheel's lib dir)"
  fi
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | while read -r name path; do
    [[ $name =~ $skip || $name == libnccl* ]] && continue
    [ -e "$BUNDLE/lib/$name" ] || install -m 644 "$(readlink -f "$path")" "$BUNDLE/lib/$name"
  done
done
[ $status -eq 0 ] || exit 1

# What the machine's glibc and libstdc++ must provide at least.
glibc_max=$(objdump -T "$BUNDLE"/bin/* "$BUNDLE"/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
{
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -1)"
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' +local changes')"
  echo "needs $glibc_max or newer on the machine"
  echo "cmake: Release, ENABLE_CUDA=ON, CMAKE_CUDA_ARCHITECTURES=90, GUI/ImGui/MPI OFF"
  for d in bin lib; do echo "$d: $(cd "$BUNDLE/$d" && echo *)"; done
} > "$BUNDLE/MANIFEST"
cat "$BUNDLE/MANIFEST"

bytes=$(du -sb "$BUNDLE" | cut -f1)
mib=$(( (bytes + 1048575) / 1048576 ))
echo "make_device_bundle: $BUNDLE is $mib MiB ($bytes bytes): $(ls "$BUNDLE/bin" | wc -l) programs, $(ls "$BUNDLE/lib" | wc -l) libraries"
if [ "$mib" -gt "$MAX_MIB" ]; then
  echo "make_device_bundle: FAIL: over $MAX_MIB MiB"; du -sh "$BUNDLE"/lib/* | sort -h | tail -5; exit 1
fi
# A device call carries the tracked and untracked-not-ignored files plus the carried bundle: 64 MiB in all.
tree=$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
echo "make_device_bundle: working tree $(( tree / 1048576 )) MiB + bundle $mib MiB = $(( (tree + bytes) / 1048576 )) MiB (a device call carries at most 64 MiB)"
