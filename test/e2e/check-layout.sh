#!/usr/bin/env bash
# check-layout.sh KILNC MODEL.onnx MAX: a CNN compiles to channels-last code
# with at most MAX layout transposes left in its linalg IR (the one into
# NHWC at the input, where the model's own layout needs it). A stray
# transpose around every activation doubled MobileNet-V2's run time once
# (rank-0 Clip bounds stopped the transposes from sinking), with no wrong
# number to show for it; this catches that without timing anything.
set -euo pipefail
kilnc=$1 model=$2 max=$3
ir=$("$kilnc" "$model" --emit=linalg -o -)
n=$(grep -c 'linalg.transpose' <<<"$ir" || true)
if ((n > max)); then
  echo "FAIL: $model compiles with $n layout transposes (at most $max expected):"
  grep -m5 'linalg.transpose' <<<"$ir"
  exit 1
fi
echo "ok: $model, $n transpose(s)"
