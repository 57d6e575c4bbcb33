#!/usr/bin/env bash
# The Python package as pip users get it (pyproject.toml, setup.py): a
# wheel from `python3 -m build --no-isolation --wheel` and an install from
# `pip install --no-build-isolation .`, both offline with Debian's
# setuptools, wheel, build and pip, both reusing BUILD_DIR's CMake build
# (KILN_CMAKE_BUILD_DIR). Each is installed into a scratch folder and run
# from outside the checkout: `kiln` must come from there, its module must
# load the libkiln and runtime it carries, and the example model must give
# the hand-derived softmax([10, 1]) = [0.999877, 0.000123395].
#   wheel-test.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1 src=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
fail() { echo "wheel-test: FAIL: $*" >&2; exit 1; }
export KILN_CMAKE_BUILD_DIR=$build PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
check() { # SITE: run the example from $work with only SITE on the path
  local site=$1 out
  out=$(cd "$work" && PYTHONPATH="$site" /usr/bin/python3 -c '
import sys, numpy as np, kiln
assert kiln.__file__.startswith(sys.argv[2]), kiln.__file__
m = kiln.compile(sys.argv[1], cache=False)
print("python %s: %.6f %.9f" % ((kiln.__version__,) + tuple(m.run(None, {"x": np.array([[1, 2, 3, 4]], np.float32)})[0][0])))
' "$build/examples/tiny_mlp/model.onnx" "$site") || fail "kiln from $site does not run"
  echo "$out"
  grep -q "^python [0-9.]*: 0.99987[67][0-9]* 0.00012339" <<<"$out" || fail "$site: not softmax([10, 1])"
  local module
  module=$(ls "$site"/kiln/_kiln*.so)
  for lib in libkiln.so libkiln_runtime.so; do
    ldd "$module" | grep "$lib" | grep -qF "$site/kiln/" || fail "$site: the module does not load its own $lib"
  done
}
(cd "$work" && /usr/bin/python3 -m build --no-isolation --wheel --outdir "$work/dist" "$src" \
   >"$work/build.log" 2>&1) || { tail -30 "$work/build.log"; fail "python3 -m build"; }
wheel=$(ls "$work"/dist/kiln-*.whl)
echo "wheel: $(basename "$wheel")"
case $(basename "$wheel") in *-cp3*-linux_*.whl) ;; *) fail "not a platform wheel: $wheel";; esac
/usr/bin/python3 -m pip install --no-deps --target "$work/wheel-site" "$wheel" >"$work/pip-wheel.log" 2>&1 ||
  { cat "$work/pip-wheel.log"; fail "pip install of the wheel"; }
check "$work/wheel-site"
# The console script pyproject.toml declares.
(cd "$work" && PYTHONPATH="$work/wheel-site" "$work/wheel-site/bin/kiln-quantize" --help) |
  grep -q "calibration" || fail "the wheel's kiln-quantize does not run"
(cd "$work" && /usr/bin/python3 -m pip install --no-build-isolation --no-deps --target "$work/pip-site" \
   "$src" >"$work/pip-src.log" 2>&1) || { tail -30 "$work/pip-src.log"; fail "pip install --no-build-isolation"; }
check "$work/pip-site"
echo "wheel-test: ok"
