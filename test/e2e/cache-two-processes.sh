#!/usr/bin/env bash
# Two processes compile the same model into one empty compile cache at the
# same time: both must run correctly, and the entry they leave must be whole
# (a third run loads it and matches the references).
#   cache-two-processes.sh KILN_RUN MODEL_DIR WORK_DIR
set -euo pipefail
run=$1 model=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
export KILN_CACHE_DIR=$work/cache
set_dir=$model/test_data_set_0
args=("$model/model.onnx" --inputs "$set_dir" --check "$set_dir" --atol 1e-3 --rtol 1e-3)
"$run" "${args[@]}" >"$work/a.log" 2>&1 & a=$!
"$run" "${args[@]}" >"$work/b.log" 2>&1 & b=$!
status=0
wait $a || status=1
wait $b || status=1
cat "$work/a.log" "$work/b.log"
[ $status = 0 ] || { echo "cache-two-processes: FAIL: a concurrent run failed"; exit 1; }
ls -la "$work/cache/jit"
if ls "$work/cache/jit" | grep -q '\.tmp$'; then
  echo "cache-two-processes: FAIL: a temporary file was left behind"; exit 1
fi
out=$("$run" "${args[@]}")
echo "$out"
grep -q "cache=hit" <<<"$out" || { echo "cache-two-processes: FAIL: the third run missed"; exit 1; }
echo "cache-two-processes: ok"
