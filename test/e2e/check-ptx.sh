#!/bin/sh
# kilnc MODEL --emit=ptx writes one PTX module that CUDA's ptxas accepts for
# sm_80 and sm_90 (whole-program mode: an unresolved extern such as a math
# function without libdevice fails). Skips, saying why, without ptxas.
# With a C compiler and the runtime given, the CUDA host object of the same
# model (--target=nvptx64-nvidia-cuda --emit=obj) is linked with the runtime
# alone and loaded (cuda-object-load.c).
set -eu
kilnc=$1 model=$2 shapes=$3 cc=${4:-} runtime=${5:-} include=${6:-}
. "$(dirname "$0")/find-ptxas.sh"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$kilnc" "$model" --emit=ptx --no-cache --shapes-from "$shapes" -o "$out/model.ptx"
grep -q '^\.target sm_80' "$out/model.ptx"
kernels=$(grep -c '^\.visible \.entry' "$out/model.ptx" || true)
[ "$kernels" -gt 0 ]
if [ -n "$cc" ]; then
  "$kilnc" "$model" --target=nvptx64-nvidia-cuda --no-cache --shapes-from "$shapes" \
    -o "$out/host.o"
  "$cc" -I"$include" "$(dirname "$0")/cuda-object-load.c" "$out/host.o" "$runtime" \
    -Wl,-rpath,"$(dirname "$runtime")" -o "$out/load"
  "$out/load"
fi
if [ -z "$ptxas" ]; then
  echo "SKIP ptxas: no CUDA toolkit (set PTXAS or CUDA_HOME); the PTX has $kernels kernels"
  exit 0
fi
for sm in sm_80 sm_90; do
  "$ptxas" --gpu-name $sm "$out/model.ptx" -o "$out/model.$sm.cubin"
done
echo "ok: $kernels kernels, $(wc -c < "$out/model.ptx") bytes of PTX, accepted by ptxas for sm_80 and sm_90"
