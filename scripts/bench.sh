#!/usr/bin/env bash
# Kiln vs ONNX Runtime benchmark: latency, peak memory and compile time on the
# shared models, plus single-operator kernels against the machine's FMA peak.
#
#   scripts/bench.sh [--rounds N] [--runs R] [--threads 1,2] [--json FILE] ...
#   scripts/bench.sh --help          all options and what the numbers mean
#
# Needs a Kiln build (scripts/setup.sh). On first use it installs what is
# missing: node and npm, python3-onnx and python3-numpy (Debian packages, for
# the kernel models), and onnxruntime-node from npm into the bench cache
# (KILN_BENCH_CACHE, default ~/.cache/kiln/bench; about 300 MB).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export KILN_BUILD_DIR=${KILN_BUILD_DIR:-$root/build}
export KILN_BENCH_CACHE=${KILN_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kiln/bench}
export KILN_BENCH_PROG=${KILN_BENCH_PROG:-$0}

# Pinned so that results stay comparable over time. 1.30.0 ships its native
# binding (bin/napi-v6/linux/x64) inside the npm package, so it installs with
# --ignore-scripts: its install script only downloads optional GPU providers,
# which this machine could not fetch anyway.
ort_version=1.30.0
export KILN_BENCH_ORT_DIR=$KILN_BENCH_CACHE/onnxruntime-node-$ort_version

say() { echo "kiln bench: $*" >&2; }

wants_help=0
for a in "$@"; do
  case $a in -h | --help) wants_help=1 ;; esac
done

# Debian's python3-onnx installs for the system interpreter, which may not be
# the first python3 on PATH (pyenv, venvs): use the first that has both.
has_py_deps() { "$1" -c 'import numpy, onnx' >/dev/null 2>&1; }
python=python3
if ! has_py_deps python3 && [ -x /usr/bin/python3 ]; then
  python=/usr/bin/python3
fi

if ((wants_help)); then
  exec "$python" "$root/scripts/bench/bench.py" --help
fi

if [ ! -x "$KILN_BUILD_DIR/bin/kiln-run" ]; then
  say "no Kiln build at $KILN_BUILD_DIR (bin/kiln-run is missing): run scripts/setup.sh first"
  exit 1
fi

apt_install() {
  say "installing $*"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { say "need root (or sudo) to install $*"; exit 1; }
    sudo=sudo
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@"
}

missing=()
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
has_py_deps "$python" || missing+=(python3-onnx python3-numpy)
if ((${#missing[@]})); then
  apt_install "${missing[@]}"
  has_py_deps "$python" || python=/usr/bin/python3
fi

# ONNX Runtime: installed once per version. npm works in a scratch folder that
# is renamed into place only after the binding loads, so an interrupted or
# broken install is never mistaken for a good one.
if [ ! -f "$KILN_BENCH_ORT_DIR/node_modules/onnxruntime-node/package.json" ]; then
  say "installing onnxruntime-node@$ort_version into $KILN_BENCH_ORT_DIR (first use only)"
  mkdir -p "$KILN_BENCH_CACHE"
  tmp=$(mktemp -d "$KILN_BENCH_ORT_DIR.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  echo '{"private": true}' >"$tmp/package.json"
  if ! (cd "$tmp" && npm install --ignore-scripts --no-audit --no-fund \
      "onnxruntime-node@$ort_version") >"$tmp/npm.log" 2>&1; then
    cat "$tmp/npm.log" >&2
    say "npm install onnxruntime-node@$ort_version failed"
    exit 1
  fi
  if ! node -e "require(process.argv[1]).InferenceSession" \
      "$tmp/node_modules/onnxruntime-node" >/dev/null 2>"$tmp/load.log"; then
    cat "$tmp/load.log" >&2
    say "onnxruntime-node@$ort_version installed but its native binding does not load"
    exit 1
  fi
  rm -f "$tmp/npm.log" "$tmp/load.log"
  rm -rf "$KILN_BENCH_ORT_DIR"
  mv "$tmp" "$KILN_BENCH_ORT_DIR"
  trap - EXIT
fi

exec "$python" "$root/scripts/bench/bench.py" "$@"
