#!/usr/bin/env bash
# Checks Kiln on the models export_shape_models.py writes (or any folders in
# the ONNX backend-test layout), each data set three ways:
#   run     kiln-run --check (the JIT, compile cache off)
#   python  the Python API (kiln.InferenceSession), compared in numpy
#   bundle  kilnc --emit=bundle --shapes-from=SET, linked with the runtime
#           alone (test/bundle/bundle-run.c), run and compared
# at ONNX Runtime's references, atol 1e-4 and rtol 1e-3 unless given.
#
#   scripts/models/check_shape_models.sh [--atol X] [--rtol Y] [--only REGEX] [DIR...]
#
# DIR defaults to every folder under $XDG_CACHE_HOME/kiln/shape-models. One
# line per model, data set and way: "ok", or "FAIL" with the first error
# line; exit status 1 if anything failed. Needs the build (build/ or
# $KILN_BUILD_DIR) with its Python module.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}
atol=1e-4 rtol=1e-3 only=.
dirs=()
while (($#)); do
  case $1 in
  --atol) atol=$2; shift 2 ;;
  --rtol) rtol=$2; shift 2 ;;
  --only) only=$2; shift 2 ;;
  -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
  *) dirs+=("$1"); shift ;;
  esac
done
if ((${#dirs[@]} == 0)); then
  base=${XDG_CACHE_HOME:-$HOME/.cache}/kiln/shape-models
  for d in "$base"/*/; do dirs+=("${d%/}"); done
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
report() { # MODEL SET WAY STATUS TEXT
  printf '%-45s %-16s %-7s %s\n' "$1" "$2" "$3" "$4${5:+: $5}"
  [ "$4" = ok ] || failed=1
}
for dir in "${dirs[@]}"; do
  model=$(basename "$dir")
  [[ $model =~ $only ]] || continue
  for set in "$dir"/test_data_set_*; do
    name=$(basename "$set")
    # The JIT.
    if out=$("$build/bin/kiln-run" "$dir/model.onnx" --inputs "$set" --check "$set" \
             --atol "$atol" --rtol "$rtol" --no-cache 2>&1); then
      report "$model" "$name" run ok
    else
      report "$model" "$name" run FAIL "$(grep -m1 -i 'error\|mismatch' <<<"$out")"
    fi
    # The Python API.
    if out=$(PYTHONPATH=$build/python /usr/bin/python3 - "$dir/model.onnx" "$set" "$atol" "$rtol" 2>&1 <<'EOF'
import glob, os, sys
import numpy as np, onnx
from onnx import numpy_helper
import kiln
path, folder, atol, rtol = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
sess = kiln.InferenceSession(path)
names = [i.name for i in sess.get_inputs()]
feed = {n: numpy_helper.to_array(onnx.load_tensor(os.path.join(folder, f"input_{j}.pb")))
        for j, n in enumerate(names)}
outs = sess.run(None, feed)
for k, got in enumerate(outs):
    ref = numpy_helper.to_array(onnx.load_tensor(os.path.join(folder, f"output_{k}.pb")))
    got = np.asarray(got)
    if got.shape != ref.shape:
        sys.exit(f"output {k}: shape {got.shape}, reference {ref.shape}")
    if not np.allclose(got, ref, atol=atol, rtol=rtol, equal_nan=True):
        sys.exit(f"output {k}: max abs error {np.max(np.abs(got.astype(np.float64) - ref)):.3g}")
EOF
    ); then
      report "$model" "$name" python ok
    else
      report "$model" "$name" python FAIL "$(tail -1 <<<"$out")"
    fi
    # A bundle for this set's shapes.
    b=$work/$model-$name
    mkdir -p "$b"
    if out=$("$build/bin/kilnc" "$dir/model.onnx" --emit=bundle -o "$b/m" --no-cache \
             --shapes-from="$set" 2>&1) &&
       out=$(clang-22 -O2 -I"$b" -I"$root/runtime/include" -DKILN_BUNDLE_HEADER='"m.h"' \
             -DKILN_BUNDLE_MODEL=m_model "$root/test/bundle/bundle-run.c" "$b/m.o" \
             -L"$build/lib" -lkiln_runtime \
             -Wl,-rpath,"$build/lib" -lm -o "$b/run" 2>&1) &&
       out=$("$b/run" "$set" --atol "$atol" --rtol "$rtol" 2>&1); then
      report "$model" "$name" bundle ok
    else
      report "$model" "$name" bundle FAIL "$(grep -m1 -i 'error\|mismatch\|fail' <<<"$out")"
    fi
  done
done
exit $failed
