#!/usr/bin/env bash
# Builds a Kiln bundle of a model, links it with the runtime alone, runs it
# and checks its outputs against the model's ONNX test data.
#
#   bundle-test.sh MODE NAME MODEL.onnx DATA_DIR [kilnc options...]
#
# MODE: host      embedded weights, native; the program links nothing of LLVM/MLIR
#       external  --weights=external: runs only with its own, intact weights file
#       jit-exact the bundle matches the references and the JIT's (kiln-run)
#                 outputs bit for bit
#       aarch64   cross-compiled for aarch64-linux-gnu, run under qemu-aarch64
#       variants  one bundle of several specialisations (--dim in the options):
#                 DATA_DIR is a ':'-separated list of test sets, one per
#                 specialisation; a bundle specialised to other shapes runs
#                 them through its variant for every shape
#       dynamic   no --dim or --shape: one variant compiled once for every
#                 shape (NAME_entry_dims exported beside the entry); DATA_DIR
#                 is a ':'-separated list of test sets of different shapes,
#                 each matching its references and the JIT's (also compiled
#                 once for every shape) bit for bit
#       bounds    --dim NAME=LO..HI in the options: compiled once for every
#                 shape within the bounds, which the header gives; DATA_DIR
#                 is two test sets, the first within them (run against its
#                 references), the second outside (refused with an error
#                 naming the bounds, no output written)
#       cache     kilnc's outputs come back from the compile cache byte for
#                 byte, and compiles the cache key cannot describe bypass it
#       cuda      for an NVIDIA GPU (sm_80), checked where no GPU is needed:
#                 two symbols, linked with the runtime alone (nothing of
#                 CUDA), the descriptor's kernels are the embedded PTX's (and
#                 ptxas accepts it), kiln_model_execute refuses it, no driver
#                 is a clean error, external weights are required
#       cuda-run  for an NVIDIA GPU, run on GPU 0 against the references,
#                 with embedded and external weights ("SKIP no GPU" without)
# Environment (set by CTest): KILNC, KILN_RUN, KILN_CC, KILN_RUNTIME_INCLUDE,
# KILN_RUNTIME_LIBDIR, KILN_AARCH64_CC, KILN_AARCH64_RUNTIME, KILN_LLVM_BIN,
# KILN_TEST_DIR.
set -euo pipefail
mode=$1 name=$2 model=$3 data=$4
shift 4
src=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$KILN_TEST_DIR/$mode-$name
rm -rf "$work" && mkdir -p "$work"
cd "$work"
# kilnc caches its outputs: each test compiles afresh, into its own cache.
export KILN_CACHE_DIR=$work/cache
fail() { echo "bundle-test: FAIL: $*" >&2; exit 1; }

compile_runner() { # CC OUT EXTRA...
  local cc=$1 out=$2
  shift 2
  "$cc" -O2 -I. -I"$KILN_RUNTIME_INCLUDE" -DKILN_BUNDLE_HEADER="\"$name.h\"" \
    -DKILN_BUNDLE_MODEL="${name}_model" "$src/bundle-run.c" "$name.o" "$@" -lm -o "$out"
}
expect_error() { # PATTERN COMMAND...
  local pattern=$1 out
  shift
  if out=$("$@" 2>&1); then fail "'$*' succeeded; expected an error matching '$pattern'"; fi
  echo "$out"
  grep -q -- "$pattern" <<<"$out" || fail "the error does not say '$pattern'"
}
native_runner_as() { # OUT: the runner of bundle $name
  compile_runner "$KILN_CC" "$1" -L"$KILN_RUNTIME_LIBDIR" -lkiln_runtime \
    -Wl,-rpath,"$KILN_RUNTIME_LIBDIR"
  if ldd "./$1" | grep -Ei 'llvm|mlir'; then fail "the bundle's program links LLVM/MLIR"; fi
}
native_runner() { native_runner_as run; }

case $mode in
host)
  "$KILNC" "$model" --emit=bundle -o "$work/$name" "$@"
  "$KILN_LLVM_BIN/llvm-nm" -g --defined-only "$name.o"
  # Only the descriptor and the entry point are exported, so bundles of two
  # models link into one program.
  [ "$("$KILN_LLVM_BIN/llvm-nm" -g --defined-only "$name.o" | awk '{print $3}' | sort | tr '\n' ' ')" = \
    "${name}_entry ${name}_model " ] || fail "the object exports more than its two symbols"
  native_runner
  ./run "$data"
  ;;
external)
  "$KILNC" "$model" --emit=bundle --weights=external -o "$work/$name" "$@"
  native_runner
  expect_error "needs its weights file" ./run "$data"
  expect_error "cannot open weights file" ./run "$data" --weights missing.weights
  head -c $(( $(stat -c %s "$name.weights") / 2 )) "$name.weights" > truncated.weights
  expect_error "belongs to another model\|truncated" ./run "$data" --weights truncated.weights
  # Same size and header, one byte of the data changed.
  cp "$name.weights" corrupt.weights
  size=$(stat -c %s corrupt.weights)
  printf '\x5a' | dd of=corrupt.weights bs=1 seek=$(( size - 3 )) conv=notrunc status=none
  cmp -s corrupt.weights "$name.weights" && printf '\xa5' |
    dd of=corrupt.weights bs=1 seek=$(( size - 3 )) conv=notrunc status=none
  expect_error "is corrupt" ./run "$data" --weights corrupt.weights
  head -c 64 /dev/zero > notweights.weights
  expect_error "not a Kiln weights file" ./run "$data" --weights notweights.weights
  ./run "$data" --weights "$name.weights"
  ;;
jit-exact)
  "$KILNC" "$model" --emit=bundle -o "$work/$name" "$@"
  native_runner
  mkdir jit
  cp "$data"/input_*.pb jit/
  # The bundle holds code specialised to the shapes: so must the JIT's.
  "$KILN_RUN" "$model" --inputs "$data" --outputs jit --specialize >/dev/null
  ./run "$data" # the references, so that both agreeing on a wrong answer fails
  ./run jit --atol 0 --rtol 0
  ;;
aarch64)
  "$KILNC" "$model" --emit=bundle --target=aarch64-linux-gnu -o "$work/$name" "$@"
  header=$("$KILN_LLVM_BIN/llvm-readelf" -h "$name.o")
  grep -q AArch64 <<<"$header" || fail "$name.o is not an AArch64 object"
  compile_runner "$KILN_AARCH64_CC" run "$KILN_AARCH64_RUNTIME" -lstdc++ -lpthread
  qemu-aarch64 -L /usr/aarch64-linux-gnu ./run "$data"
  ;;
variants)
  "$KILNC" "$model" --emit=bundle -o "$work/$name" "$@"
  IFS=: read -r -a sets <<<"$data"
  # The specialisations, and the variant for every other shape (encoder4's
  # ops allow one) with its dims function.
  exports="${name}_model ${name}_entry ${name}_entry_dims "
  for k in "${!sets[@]}"; do exports="${name}_entry_$k $exports"; done
  got=$("$KILN_LLVM_BIN/llvm-nm" -g --defined-only "$name.o" | awk '{print $3}' | sort | tr '\n' ' ')
  want=$(tr ' ' '\n' <<<"$exports" | sed '/^$/d' | sort | tr '\n' ' ')
  [ "$got" = "$want" ] || fail "the object exports '$got', expected '$want'"
  grep -q "#define ${name^^}_NUM_VARIANTS ${#sets[@]}\$" "$name.h" ||
    fail "$name.h does not declare ${#sets[@]} variants"
  native_runner
  for set in "${sets[@]}"; do ./run "$set"; done
  expect_error "given twice" "$KILNC" "$model" --emit=bundle -o twice --dim seq=16 --dim seq=32
  # Compiled for other lengths: the variant for every shape runs the test
  # sets' lengths, matching their references.
  "$KILNC" "$model" --emit=bundle -o "$work/other" --dim seq=16,64
  grep -q "other shapes through other_entry" other.h ||
    fail "other.h does not say that other shapes run through other_entry"
  "$KILN_CC" -O2 -I. -I"$KILN_RUNTIME_INCLUDE" -DKILN_BUNDLE_HEADER='"other.h"' \
    -DKILN_BUNDLE_MODEL=other_model "$src/bundle-run.c" other.o -L"$KILN_RUNTIME_LIBDIR" \
    -lkiln_runtime -Wl,-rpath,"$KILN_RUNTIME_LIBDIR" -lm -o run-other
  for set in "${sets[@]}"; do ./run-other "$set"; done
  ;;
dynamic)
  "$KILNC" "$model" --emit=bundle -o "$work/$name" "$@"
  got=$("$KILN_LLVM_BIN/llvm-nm" -g --defined-only "$name.o" | awk '{print $3}' | sort | tr '\n' ' ')
  [ "$got" = "${name}_entry ${name}_entry_dims ${name}_model " ] ||
    fail "the object exports '$got', expected its entry, entry_dims and model"
  grep -q "#define ${name^^}_NUM_RUNTIME_DIMS [1-9]" "$name.h" ||
    fail "$name.h declares no dims known at run time"
  grep -q "_DIM_NAMES" "$name.h" || fail "$name.h does not name the dims"
  native_runner
  IFS=: read -r -a sets <<<"$data"
  for k in "${!sets[@]}"; do
    set=${sets[$k]}
    ./run "$set"
    mkdir "jit$k"
    cp "$set"/input_*.pb "jit$k"/
    "$KILN_RUN" "$model" --inputs "$set" --outputs "jit$k" >/dev/null
    ./run "jit$k" --atol 0 --rtol 0
  done
  ;;
bounds)
  "$KILNC" "$model" --emit=bundle -o "$work/$name" "$@"
  declared=""
  for arg in "$@"; do [[ $arg == *=*..* ]] && declared=${arg#--dim=}; done
  [ -n "$declared" ] || fail "no --dim NAME=LO..HI among the options"
  grep -q "#define ${name^^}_DIM_BOUNDS \"$declared\"" "$name.h" ||
    fail "$name.h does not give the bounds $declared"
  native_runner
  IFS=: read -r -a sets <<<"$data"
  ./run "${sets[0]}"
  if ./run "${sets[1]}" 2>refused.txt; then fail "an input outside $declared ran"; fi
  cat refused.txt
  grep -q "outside the bounds ${declared#*=} declared for it when the model was compiled" \
    refused.txt || fail "the refusal does not name the bounds"
  ;;
cache)
  export KILN_CACHE_DIR=$work/cache
  "$KILNC" "$model" --emit=bundle -o "$work/cold" "$@" -v 2>&1 | tee cold.log
  grep -q "from the compile cache" cold.log && fail "an empty cache answered"
  # The name is part of the key (the symbols carry it): another name misses.
  "$KILNC" "$model" --emit=bundle -o "$work/other" "$@" -v 2>&1 | tee other.log
  grep -q "from the compile cache" other.log && fail "a bundle of another name was reused"
  mkdir o1
  "$KILNC" "$model" --emit=bundle -o "$work/o1/cold" "$@" -O1 -v 2>&1 | tee o1.log
  grep -q "from the compile cache" o1.log && fail "another -O level was reused"
  mkdir again
  "$KILNC" "$model" --emit=bundle -o "$work/again/cold" "$@" -v 2>&1 | tee again.log
  grep -q "load the bundle from the compile cache" again.log || fail "the same bundle missed"
  cmp cold.o again/cold.o && cmp cold.h again/cold.h || fail "the cached bundle differs"
  "$KILNC" "$model" --emit=obj -o a.o "$@" && "$KILNC" "$model" --emit=obj -o b.o "$@" -v 2>&1 |
    tee obj.log
  grep -q "from the compile cache" obj.log || fail "the second object compile missed"
  cmp a.o b.o || fail "the cached object differs"
  "$KILNC" "$model" --emit=obj -o c.o "$@" --no-cache -v 2>&1 | tee nocache.log
  grep -q "from the compile cache" nocache.log && fail "--no-cache read the cache"
  # MLIR's IR printing is not in the key: such a compile runs (and prints).
  "$KILNC" "$model" --emit=obj -o d.o "$@" --mlir-print-ir-after-all 2> ir.log
  grep -q "IR Dump After" ir.log || fail "--mlir-print-ir-after-all printed nothing"
  cd again
  name=cold native_runner
  ./run "$data"
  ;;
cuda)
  "$KILNC" "$model" --emit=bundle --target=nvptx64-nvidia-cuda --mcpu=sm_80 -o "$work/$name" "$@"
  [ "$("$KILN_LLVM_BIN/llvm-nm" -g --defined-only "$name.o" | awk '{print $3}' | sort | tr '\n' ' ')" = \
    "${name}_entry ${name}_model " ] || fail "the object exports more than its two symbols"
  grep -q '^#include "kiln/cuda.h"' "$name.h" || fail "$name.h does not include kiln/cuda.h"
  grep -q "^#define ${name^^}_CUDA_COMPUTE_CAPABILITY 80\$" "$name.h" ||
    fail "$name.h does not say sm_80"
  native_runner
  if ldd ./run | grep -i 'libcuda\|libcudart'; then fail "the bundle's program links CUDA"; fi
  ./run --describe --dump-ptx model.ptx | tee kernels.txt
  # Each kernel the descriptor lists is an .entry of the PTX with as many
  # parameters, launched with known blocks; and every .entry is listed.
  awk '/\.entry /{sub(/\(.*/, "", $3); name=$3; n=0; next}
       name && /\.param/{n++} name && /^\)/{print name, n; name=""}' model.ptx | sort > ptx-entries.txt
  awk '$1 == "kernel" {print $2, $6}' kernels.txt | sort > listed.txt
  [ -s listed.txt ] || fail "the descriptor lists no kernels"
  diff ptx-entries.txt listed.txt || fail "the descriptor's kernels are not the PTX's"
  if awk '$1 == "kernel" && $4 ~ /(^|,)0(,|$)/' kernels.txt | grep .; then
    fail "a kernel's block size is not known"
  fi
  ptxas=${PTXAS:-/usr/local/cuda/bin/ptxas}
  if [ -x "$ptxas" ]; then
    "$ptxas" --gpu-name sm_80 model.ptx -o model.cubin
  else
    echo "no ptxas ($ptxas): the embedded PTX is not assembled"
  fi
  expect_error "compiled for an NVIDIA GPU" ./run "$data" --device cpu
  KILN_CUDA_DRIVER=/nonexistent/libcuda.so.1 ./run "$data" | tee nodriver.log
  grep -q "SKIP no GPU: .*cannot load the driver" nodriver.log || fail "no driver: not a clean error"
  # External weights: the same device weights, from a file.
  "$KILNC" "$model" --emit=bundle --target=nvptx64-nvidia-cuda --mcpu=sm_80 --weights=external \
    -o "$work/ext" "$@"
  name=ext native_runner_as run-ext
  ./run-ext --describe > ext-kernels.txt
  grep -q "bytes of weights (external)" ext-kernels.txt || fail "ext: weights not external"
  expect_error "needs its weights file" ./run-ext "$data"
  KILN_CUDA_DRIVER=/nonexistent/libcuda.so.1 ./run-ext "$data" --weights ext.weights > ext.log
  grep -q "SKIP no GPU" ext.log || fail "ext: no driver: not a clean error"
  ;;
cuda-run)
  "$KILNC" "$model" --emit=bundle --target=nvptx64-nvidia-cuda --mcpu=sm_80 -o "$work/$name" "$@"
  native_runner
  ./run "$data" --atol 1e-3 --rtol 1e-3 --bench 20 | tee run.log
  if grep -q "^SKIP no GPU" run.log; then exit 0; fi
  "$KILNC" "$model" --emit=bundle --target=nvptx64-nvidia-cuda --mcpu=sm_80 --weights=external \
    -o "$work/ext" "$@"
  name=ext native_runner_as run-ext
  ./run-ext "$data" --weights ext.weights --atol 1e-3 --rtol 1e-3
  ;;
*)
  fail "unknown mode '$mode'"
  ;;
esac
echo "bundle-test: $mode $name: ok"
