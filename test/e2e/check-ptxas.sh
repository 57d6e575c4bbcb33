#!/bin/sh
# Each model's PTX, which must hold what its kernels are made to use
# (the f16 products: WMMA loads, products and stores; the bf16 products:
# mma.sync m16n8k16 with f32 accumulators; the elementwise model: 16-byte
# global loads and stores), is accepted by ptxas for sm_80 and sm_90
# without spills, and the bf16 products' sm_75 PTX (CUDA cores) for sm_75.
# Skips the ptxas half, saying why, without the CUDA
# toolkit.
# Usage: check-ptxas.sh KILNC F16_PRODUCTS.textproto ELEMENTWISE.textproto BF16_PRODUCTS.textproto
set -eu
kilnc=$1 products=$2 elementwise=$3 bf16=$4
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
encode() { protoc --encode=onnx.ModelProto -I/usr/include/onnx onnx.proto < "$1" > "$2"; }
encode "$products" "$out/products.onnx"
encode "$elementwise" "$out/elementwise.onnx"
encode "$bf16" "$out/bf16.onnx"
"$kilnc" "$out/products.onnx" --emit=ptx --no-cache -o "$out/products.ptx"
"$kilnc" "$out/elementwise.onnx" --emit=ptx --no-cache -o "$out/elementwise.ptx"
"$kilnc" "$out/bf16.onnx" --emit=ptx --no-cache -o "$out/bf16.ptx"
"$kilnc" "$out/bf16.onnx" --emit=ptx --mcpu=sm_75 --no-cache -o "$out/bf16_sm75.ptx"
for op in wmma.load.a wmma.load.b wmma.mma wmma.store.d; do
  grep -q "$op" "$out/products.ptx" || { echo "FAIL: no $op in the f16 products' PTX"; exit 1; }
done
grep -q "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32" "$out/bf16.ptx" ||
  { echo "FAIL: no bf16 mma.sync in the bf16 products' PTX"; exit 1; }
! grep -q "mma.sync" "$out/bf16_sm75.ptx" ||
  { echo "FAIL: bf16 mma.sync in sm_75 PTX (sm_75 has no bf16 tensor cores)"; exit 1; }
for op in ld.global.v4 st.global.v4; do
  grep -q "$op" "$out/elementwise.ptx" || { echo "FAIL: no $op in the elementwise PTX"; exit 1; }
done
. "$(dirname "$0")/find-ptxas.sh"
if [ -z "$ptxas" ]; then
  echo "SKIP ptxas: no CUDA toolkit (set PTXAS or CUDA_HOME); the PTX has the WMMA, mma.sync and vector ops"
  exit 0
fi
for model in products bf16 elementwise; do
  for sm in sm_80 sm_90; do
    "$ptxas" -v --gpu-name $sm "$out/$model.ptx" -o "$out/$model.$sm.cubin" 2> "$out/$model.$sm.log" ||
      { cat "$out/$model.$sm.log"; echo "FAIL: ptxas rejects the $model PTX for $sm"; exit 1; }
    if grep -v '0 bytes spill stores, 0 bytes spill loads' "$out/$model.$sm.log" | grep -q spill; then
      cat "$out/$model.$sm.log"; echo "FAIL: a $model kernel spills for $sm"; exit 1
    fi
  done
done
# sm_75 keeps the bf16 products on CUDA cores: that PTX must assemble too.
"$ptxas" --gpu-name sm_75 "$out/bf16_sm75.ptx" -o "$out/bf16.sm_75.cubin" ||
  { echo "FAIL: ptxas rejects the bf16 products' sm_75 PTX"; exit 1; }
echo "ok: ptxas accepts the WMMA and bf16 mma.sync kernels and the 16-byte accesses for sm_80 and sm_90"
