#!/usr/bin/env bash
# Installs Kiln into a temporary prefix, builds examples/bundle out of tree
# against it (find_package(Kiln), kiln_add_model), and runs it on the
# example model: the bundle's program must link nothing of LLVM/MLIR and
# print the hand-derived softmax([10, 1]) = [0.999877, 0.000123395], as the
# JIT program built against the same package does.
#   install-test.sh BUILD_DIR SOURCE_DIR WORK_DIR C_COMPILER CXX_COMPILER
# With KILN_INSTALLED_PREFIX set, the checks run against that prefix (the
# Debian packages unpacked: test/packaging/deb-test.sh) instead of a
# `cmake --install` of BUILD_DIR.
set -euo pipefail
build=$1 src=$2 work=$3 cc=$4 cxx=$5
rm -rf "$work" && mkdir -p "$work"
fail() { echo "install-test: FAIL: $*" >&2; exit 1; }
if [ -n "${KILN_INSTALLED_PREFIX:-}" ]; then
  ln -s "$KILN_INSTALLED_PREFIX" "$work/prefix"
else
  cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
fi
for f in bin/kilnc lib/libkiln_runtime.so lib/libkiln_runtime.a lib/libkiln.so \
         include/kiln/runtime.h include/kiln/Kiln.h lib/cmake/Kiln/KilnConfig.cmake; do
  [ -e "$work/prefix/$f" ] || fail "the install has no $f"
done
# The C++ API's headers are whole: a program that includes them compiles
# against the install alone (nothing of the source tree).
printf '#include "kiln/Kiln.h"\n#include "kiln/TensorIO.h"\nint main() { kiln::CompileOptions o; kiln::EmitOptions e; return o.optLevel - e.optLevel; }\n' \
  >"$work/api.cpp"
"$cxx" -std=c++17 -fsyntax-only -I"$work/prefix/include" "$work/api.cpp" ||
  fail "a program including the installed kiln/Kiln.h does not compile"
cmake -S "$src/examples/bundle" -B "$work/example" -G Ninja -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DKILN_EXAMPLE_MODEL="$build/examples/tiny_mlp/model.onnx" >"$work/configure.log" ||
  { cat "$work/configure.log"; fail "configuring the example"; }
cmake --build "$work/example" || fail "building the example"
deps=$(ldd "$work/example/bundle-example")
echo "$deps"
if grep -Ei 'llvm|mlir|libkiln\.so' <<<"$deps"; then fail "bundle-example links the compiler"; fi
grep -q "$work/prefix/lib/libkiln_runtime.so" <<<"$deps" || fail "not linked to the installed runtime"
for program in bundle-example jit-example; do
  out=$("$work/example/$program" 1 2 3 4)
  echo "$out"
  grep -q "^  0: 0.99987[67]" <<<"$out" || fail "$program: top output is not 0: 0.999877"
  grep -q "^  1: 0.00012339" <<<"$out" || fail "$program: second output is not 1: 0.000123395"
done
# The Python package, where the build made one (pybind11-dev present).
if [ -e "$build/python/kiln/__init__.py" ]; then
  pkg=$(ls -d "$work"/prefix/lib*/python3/dist-packages 2>/dev/null | head -1)
  [ -n "$pkg" ] && [ -e "$pkg/kiln/__init__.py" ] || fail "the install has no Python package"
  out=$(cd "$work" && PYTHONPATH="$pkg" /usr/bin/python3 -c '
import sys, numpy as np, kiln
assert kiln.__file__.startswith(sys.argv[2]), kiln.__file__
m = kiln.compile(sys.argv[1], cache=False)
print("python: %.6f %.9f" % tuple(m.run(None, {"x": np.array([[1, 2, 3, 4]], np.float32)})[0][0]))
' "$build/examples/tiny_mlp/model.onnx" "$pkg") || fail "the installed Python package does not run"
  echo "$out"
  grep -q "^python: 0.99987[67][0-9]* 0.00012339" <<<"$out" || fail "python: not softmax([10, 1])"
fi
echo "install-test: ok"
