#!/bin/sh
# kiln-gpu-tile-contractions' kernels in PTX: a 2048 x 64 x 2048 MatMul
# (128 x 128 tiles), a 1000 x 300 x 1024 one (64 x 64) and a batch-8 3x3
# convolution (an implicit GEMM) each become one kernel with two shared
# tiles and barriers, which ptxas accepts for sm_80 and sm_90 without
# spilling; with --gpu-tile-contractions=false, none has shared memory.
# Skips the ptxas half, saying why, without the CUDA toolkit.
# Usage: check-tiled-ptx.sh KILNC MODEL.textproto
set -eu
kilnc=$1 textproto=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
protoc --encode=onnx.ModelProto -I/usr/include/onnx onnx.proto < "$textproto" > "$out/m.onnx"
"$kilnc" "$out/m.onnx" --emit=ptx --no-cache -o "$out/m.ptx"
# Two shared tiles per kernel, A^T and B: 8 x 132 floats for 128 x 128
# tiles, 16 x 66 for 64 x 64 (rows padded against bank conflicts).
tiles=$(grep -Ec '^\s*\.shared \.align 4 \.b8 __wg_main_kernel(_[0-9]+)?_1\[4224\]' "$out/m.ptx" || true)
[ "$tiles" -eq 3 ] || { echo "FAIL: $tiles kernels with shared tiles, expected 3"; exit 1; }
[ "$(grep -Ec '^\s*\.shared \.align 4 \.b8 __wg_main_kernel(_[0-9]+)?_0\[4224\]' "$out/m.ptx")" -eq 3 ]
[ "$(grep -c 'bar\.sync' "$out/m.ptx")" -ge 6 ]
"$kilnc" "$out/m.onnx" --emit=ptx --no-cache --gpu-tile-contractions=false -o "$out/plain.ptx"
if grep -q '\.shared' "$out/plain.ptx"; then echo "FAIL: shared memory without the pass"; exit 1; fi
. "$(dirname "$0")/find-ptxas.sh"
if [ -z "$ptxas" ]; then
  echo "SKIP ptxas: no CUDA toolkit (set PTXAS or CUDA_HOME); the PTX has $tiles tiled kernels"
  exit 0
fi
for sm in sm_80 sm_90; do
  "$ptxas" -v --gpu-name $sm "$out/m.ptx" -o "$out/m.$sm.cubin" 2> "$out/$sm.log"
  if grep -v '0 bytes spill stores, 0 bytes spill loads' "$out/$sm.log" | grep -q spill; then
    cat "$out/$sm.log"; echo "FAIL: a kernel spills for $sm"; exit 1
  fi
done
echo "ok: $tiles tiled kernels; ptxas accepts them for sm_80 and sm_90 without spills"
