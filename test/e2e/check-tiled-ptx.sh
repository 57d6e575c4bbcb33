#!/bin/sh
# kiln-gpu-tile-contractions' kernels in PTX: a 2048 x 64 x 2048 MatMul
# (128 x 128 tiles), a 1000 x 300 x 1024 one (64 x 64) and a batch-8 3x3
# convolution (an implicit GEMM) each become one kernel with two shared
# tiles and barriers, which ptxas accepts for sm_80 and sm_90 without
# spilling: by default on TF32 tensor cores (32 + 16 + 16 mma.sync m16n8k8
# .tf32 per K-slice, slices staged with cp.async in two stages, kernels
# named tf32_tiles* and limited to 128 registers for two blocks per SM),
# with --gpu-precision=fp32 as FMAs from 8 x 132 and 16 x 66 float tiles; with --gpu-tile-contractions=false, none has shared
# memory. Skips the ptxas half, saying why, without the CUDA toolkit.
set -eu
kilnc=$1 textproto=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
protoc --encode=onnx.ModelProto -I/usr/include/onnx onnx.proto < "$textproto" > "$out/m.onnx"
"$kilnc" "$out/m.onnx" --emit=ptx --no-cache -o "$out/m.ptx"
mmas=$(grep -c 'mma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32' "$out/m.ptx" || true)
[ "$mmas" -eq 64 ] || { echo "FAIL: $mmas TF32 mma.sync, expected 32 + 16 + 16"; exit 1; }
shared=$(grep -Ec '^\s*\.shared \.align 16 \.b8 __wg_tf32_tiles' "$out/m.ptx" || true)
[ "$shared" -eq 6 ] || { echo "FAIL: $shared shared tiles, expected 2 in each of 3 kernels"; exit 1; }
# Two stages of 128 x 20 + 16 x 136 floats (A x-major, B k-major) for the
# 128 x 128 kernel: 37888 bytes, under the 48 KiB of static shared memory.
[ "$(grep -Ec '^\s*\.shared \.align 16 \.b8 __wg_tf32_tiles(_[0-9]+)?_0\[20480\]' "$out/m.ptx")" -eq 1 ] ||
  { echo "FAIL: no 2 x 128 x 20 A tile"; exit 1; }
copies=$(grep -c 'cp\.async\.ca\.shared\.global' "$out/m.ptx" || true)
[ "$copies" -gt 0 ] || { echo "FAIL: no cp.async"; exit 1; }
[ "$(grep -c '^\.minnctapersm 2' "$out/m.ptx")" -eq 3 ] ||
  { echo "FAIL: the TF32 kernels do not ask for two blocks per SM"; exit 1; }
[ "$(grep -c 'bar\.sync' "$out/m.ptx")" -ge 3 ] || { echo "FAIL: fewer than one barrier per TF32 kernel"; exit 1; }
"$kilnc" "$out/m.onnx" --emit=ptx --no-cache --gpu-precision=fp32 -o "$out/fp32.ptx"
# Two shared tiles per kernel, A^T and B: 8 x 132 floats for 128 x 128
# tiles, 16 x 66 for 64 x 64 (rows padded against bank conflicts).
tiles=$(grep -Ec '^\s*\.shared \.align 4 \.b8 __wg_main_kernel(_[0-9]+)?_1\[4224\]' "$out/fp32.ptx" || true)
[ "$tiles" -eq 3 ] || { echo "FAIL: $tiles FP32 kernels with shared tiles, expected 3"; exit 1; }
[ "$(grep -Ec '^\s*\.shared \.align 4 \.b8 __wg_main_kernel(_[0-9]+)?_0\[4224\]' "$out/fp32.ptx")" -eq 3 ]
if grep -q 'mma\.sync' "$out/fp32.ptx"; then echo "FAIL: mma.sync with --gpu-precision=fp32"; exit 1; fi
"$kilnc" "$out/m.onnx" --emit=ptx --no-cache --gpu-tile-contractions=false -o "$out/plain.ptx"
if grep -q '\.shared' "$out/plain.ptx"; then echo "FAIL: shared memory without the pass"; exit 1; fi
. "$(dirname "$0")/find-ptxas.sh"
if [ -z "$ptxas" ]; then
  echo "SKIP ptxas: no CUDA toolkit (set PTXAS or CUDA_HOME); the PTX has $tiles tiled kernels"
  exit 0
fi
for ptx in m fp32; do
  for sm in sm_80 sm_90; do
    "$ptxas" -v --gpu-name $sm "$out/$ptx.ptx" -o "$out/$ptx.$sm.cubin" 2> "$out/$ptx.$sm.log"
    if grep -v '0 bytes spill stores, 0 bytes spill loads' "$out/$ptx.$sm.log" | grep -q spill; then
      cat "$out/$ptx.$sm.log"; echo "FAIL: a kernel of $ptx.ptx spills for $sm"; exit 1
    fi
  done
done
# Registers and shared memory per tiled kernel, for the record (what
# bounds their occupancy on an H100: 65536 registers, 228 KiB per SM).
grep -E 'Used [0-9]+ registers.*smem' "$out/m.sm_90.log" | sed 's/^/tf32 sm_90: /'
echo "ok: 3 tiled kernels, TF32 and FP32; ptxas accepts them for sm_80 and sm_90 without spills"
