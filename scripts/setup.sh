#!/usr/bin/env bash
# Kiln set-up: installs what is missing, builds, and runs the example model.
# Idempotent: packages already present are skipped, and the build is
# incremental.
#
#   scripts/setup.sh            install + build + run the example
#   KILN_BUILD_DIR=dir ...      build somewhere other than ./build
#   KILN_SKIP_DEMO=1 ...        install + build only
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}

packages=(
  cmake ninja-build ccache python3
  llvm-22 llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-22 lld-22
  libclang-rt-22-dev  # sanitizer runtimes, libFuzzer and its FuzzedDataProvider.h (test/fuzz)
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata
  googletest libgtest-dev
  python3-dev python3-numpy python3-pytest pybind11-dev
  python3-pip python3-setuptools python3-wheel python3-build  # pip install . and wheels (test/packaging)
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "kiln setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "kiln setup: need root (or sudo) to install packages" >&2; exit 1; }
    sudo=sudo
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "kiln setup: all packages present"
fi

# Configure once; later runs only rebuild what changed.
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
fi
start=$(date +%s)
cmake --build "$build"
echo "kiln setup: build finished in $(( $(date +%s) - start )) s"

if [ "${KILN_SKIP_DEMO:-0}" != 1 ]; then
  ex="$build/examples/tiny_mlp"
  echo
  echo "== Kiln's main job on the example model (examples/tiny_mlp): compile, run, check, time"
  "$build/bin/kiln-run" "$ex/model.onnx" --inputs "$ex/test_data_set_0" \
    --check "$ex/test_data_set_0" --bench 1000
  echo
  echo "== The same model as a native object file"
  "$build/bin/kilnc" "$ex/model.onnx" --emit=obj -o "$build/tiny_mlp.o" -v
fi
