#!/usr/bin/env bash
# Runs Kiln's full test suite (unit, lit, ONNX node conformance, end-to-end
# models). Builds first if needed; run scripts/setup.sh once before on a
# fresh machine so the packages are there.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KILN_BUILD_DIR:-$root/build}
KILN_SKIP_DEMO=1 "$root/scripts/setup.sh"
ctest --test-dir "$build" -j2 --output-on-failure "$@"
