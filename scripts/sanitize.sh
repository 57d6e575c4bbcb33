#!/usr/bin/env bash
# Kiln under the sanitizers, and its fuzzers. Each mode has a build folder
# of its own beside ./build (clang, -O1, line tables); run scripts/setup.sh
# once first so that the packages are there.
#
#   scripts/sanitize.sh runtime     ASan+UBSan, then TSan, builds of the runtime
#                                   and the microkernels (no LLVM: minutes) and
#                                   their unit tests: what CI runs
#   scripts/sanitize.sh asan [CTEST_REGEX]
#                                   ASan+UBSan (leak checking on) build of all
#                                   of Kiln with the libFuzzer targets; runs the
#                                   unit, lit, fuzz-regression, model and
#                                   conformance tests (or those CTEST_REGEX names)
#   scripts/sanitize.sh tsan        TSan build of Kiln; runs the thread-pool
#                                   tests and the concurrency stress (kiln-stress)
#   scripts/sanitize.sh fuzz SECONDS [TARGET...]
#                                   each fuzz target (import compile tensor_io
#                                   c_api) for SECONDS on its seed corpus and the
#                                   corpus kept from earlier runs, with the ONNX
#                                   dictionary; needs the asan build
#
# A sanitizer report fails the test that made it (UBSan aborts on the first
# report; ASan and TSan exit non-zero). Slow: the asan and tsan builds take
# 30-60 minutes on two cores.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=${1:-}
shift || true

say() { echo "kiln sanitize: $*" >&2; }

configure() { # DIR SANITIZERS [extra cmake args...]
  local dir=$1 san=$2
  shift 2
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -G Ninja -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
      -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" \
      -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld \
      -DKILN_SANITIZE="$san" "$@" >/dev/null
  fi
}

# Reports name the source line; a UBSan report aborts the process so that
# the test fails; LSan checks for leaks at exit of every process.
# use_sigaltstack=0: LLVM installs its own alternate signal stack on the
# threads that compile (for its crash handler), and ASan, finding that one
# at thread exit, would try to unmap it as its own and die.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:use_sigaltstack=0:strict_string_checks=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$root/test/fuzz/lsan.supp:print_suppressions=0}

runtime_targets=(kiln-runtime-tests kiln-kernel-tests-avx512 kiln-kernel-tests-avx2
                 kiln-kernel-tests-neon kiln-cuda-tests kiln-fake-cuda-driver)
runtime_tests='^(runtime\.|kernels\.|cuda\.(no-driver|driver-error|device)$)'

case $mode in
  runtime)
    for san in address,undefined thread; do
      dir=$root/build-san-runtime-${san%%,*}
      configure "$dir" "$san"
      say "building the runtime and microkernel tests with -fsanitize=$san"
      cmake --build "$dir" --target "${runtime_targets[@]}"
      ctest --test-dir "$dir" -j2 --output-on-failure -R "$runtime_tests"
    done
    ;;
  asan)
    dir=$root/build-asan
    configure "$dir" address,undefined -DKILN_FUZZ=ON
    say "building Kiln with -fsanitize=address,undefined and the fuzz targets"
    cmake --build "$dir"
    # Python loads libkiln into an uninstrumented interpreter (ASan must come
    # first in a process), the bundle tests compile and link C with the
    # project's plain flags, the mutation test forks hundreds of children:
    # those run in the ordinary build only.
    regex=${1:-'^(unit\.|runtime\.|kernels\.|cuda\.|capi$|lit$|fuzz\.|model\.|e2e\.|onnx-node-conformance)'}
    ctest --test-dir "$dir" -j2 --output-on-failure -R "$regex" -E '^(python|bundle\.|mutation)'
    ;;
  tsan)
    dir=$root/build-tsan
    configure "$dir" thread
    say "building Kiln with -fsanitize=thread"
    cmake --build "$dir" --target kiln-runtime-tests kiln-stress
    ctest --test-dir "$dir" -j1 --output-on-failure -R '^runtime\.ThreadPool|^stress\.'
    ;;
  fuzz)
    seconds=${1:?usage: sanitize.sh fuzz SECONDS [TARGET...]}
    shift
    targets=("$@")
    ((${#targets[@]})) || targets=(import compile tensor_io c_api)
    dir=$root/build-asan
    [ -x "$dir/bin/kiln-fuzz-import" ] || { say "no fuzz build: run scripts/sanitize.sh asan first"; exit 1; }
    seeds=$dir/fuzz/seeds
    [ -d "$seeds/import" ] || "$root/scripts/fuzz/make_corpus.sh" "$seeds" >&2
    for t in "${targets[@]}"; do
      exe=$dir/bin/kiln-fuzz-${t//_/-}
      corpus=$dir/fuzz/corpus/$t
      crashes=$dir/fuzz/crashes/$t
      mkdir -p "$corpus" "$crashes"
      say "fuzzing $t for $seconds s (new inputs in $corpus, crashes in $crashes)"
      # Compiling a model takes far longer than parsing one: larger time and
      # length limits for the compile target.
      limits=(-max_len=65536 -timeout=30)
      [ "$t" = compile ] && limits=(-max_len=16384 -timeout=120)
      rc=0
      "$exe" "$corpus" "$seeds/$t" "$root/test/fuzz/regressions/$t" -dict="$root/test/fuzz/onnx.dict" \
        -max_total_time="$seconds" -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$crashes/" "${limits[@]}" >"$dir/fuzz/$t.log" 2>&1 || rc=$?
      grep -E "^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)|ERROR|SUMMARY" "$dir/fuzz/$t.log" || true
      ((rc == 0)) || { say "$t: the fuzzer stopped on a failure (exit $rc), see $dir/fuzz/$t.log"; exit 1; }
    done
    ;;
  *)
    sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    [ "$mode" = "-h" ] || [ "$mode" = "--help" ] || exit 2
    ;;
esac
