#!/bin/sh
# kiln-run --device cuda --check on one model's test set: every output must
# match the reference, with exact FP32 FMAs (--gpu-precision=fp32) at
# 1e-3 + 1e-3 |ref|, and with the default TF32 tensor cores at
# 1e-2 + 1e-2 |ref| (inputs of float32 products rounded to 10 mantissa
# bits: ResNet-18's logits err by about 2e-3). Skips, saying why, where
# there is no driver or GPU (kiln-run's error says so); any other failure
# fails.
set -u
kilnrun=$1 model=$2 set=$3
out=$("$kilnrun" "$model" --device cuda --gpu-precision=fp32 --inputs "$set" --check "$set" \
      --atol 1e-3 --rtol 1e-3 --bench 20 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s\n' "$out" | grep -q -E \
   'device cuda: (CUDA is not available|cuInit failed|no CUDA device)'; then
  echo "SKIP no GPU: $(printf '%s\n' "$out" | grep 'device cuda' | head -1)"
  exit 0
fi
printf '%s\n' "$out"
[ $rc -eq 0 ] || exit $rc
"$kilnrun" "$model" --device cuda --inputs "$set" --check "$set" --atol 1e-2 --rtol 1e-2 --bench 20
