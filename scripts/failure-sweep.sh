#!/usr/bin/env bash
# The full failure sweep (docs/reliability.md, "Failure injection"): every driver call and every host
# allocation of every scenario of tests/failure_sweep fails in turn, against the fake driver, under
# AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer. Configures and builds an ASan+UBSan tree
# of the CPU tier with CI's flags (.ci/run) when it lacks the sweep or is out of date (only the targets
# the sweep needs), then runs it with CI's sanitizer options.
#
#   scripts/failure-sweep.sh                      every point of every scenario
#   scripts/failure-sweep.sh --scenario streams   arguments go to cudrv_failure_sweep (--help lists
#                                                 them), e.g. --kinds host or --sample 16
#
# Prints per scenario its driver calls, host allocations, injection points run, findings and reported
# leaks, then a total line. Exit status 1 on any finding (2 when the sweep's self-test fails).
# Environment: BUILD_DIR (default build-asan, CI's sanitizer tree), JOBS (compiles and parallel runs,
# default 2), CMAKE_ARGS (more configure arguments).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-asan}
jobs=${JOBS:-2}

# The sanitizer tree of .ci/run (asan_build): g++, -fsanitize=address,undefined, Debug with -O1 -g1, no nvcc.
sanitize="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
if [ ! -f "$build/CMakeCache.txt" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=g++ -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" \
        "-DCMAKE_CXX_FLAGS=$sanitize" "-DCMAKE_EXE_LINKER_FLAGS=$sanitize" "-DCMAKE_SHARED_LINKER_FLAGS=$sanitize" \
        -DCUDRV_BUILD_CUDA_TARGETS=OFF -DCUDRV_BUILD_EXAMPLES=OFF -DCUDRV_BUILD_BENCHMARKS=OFF \
        -DCUDRV_BUILD_DOCS=OFF ${CMAKE_ARGS:-}
elif ! grep -q -- "-fsanitize=address" "$build/CMakeCache.txt"; then
  echo "failure-sweep: $build is not an AddressSanitizer tree; set BUILD_DIR to another directory" >&2
  exit 2
fi
cmake --build "$build" -j "$jobs" --target cudrv_failure_sweep cudrv_test_fake_cuda

# The sanitizers' options of .ci/run (sanitizer_env); LeakSanitizer runs in every child of the sweep.
supp="$PWD/tests/sanitizers"
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:intercept_tls_get_addr=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export CUDRV_LIBCUDA="$PWD/$build/tests/libcudrv_test_fake_cuda.so"
case $build in /*) CUDRV_LIBCUDA="$build/tests/libcudrv_test_fake_cuda.so" ;; esac
exec "$build/tests/cudrv_failure_sweep" --jobs "$jobs" "$@"
