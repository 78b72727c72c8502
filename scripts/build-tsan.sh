#!/usr/bin/env bash
# Builds the library, the stress program and the fake-driver tests with ThreadSanitizer into
# build-tsan (CMake option CUDRV_TSAN), for scripts/gpu-suite.sh --only stress and for runs by hand:
#
#   scripts/build-tsan.sh                 # configure and build build-tsan
#   TSAN_OPTIONS="suppressions=$PWD/tests/stress/tsan.supp halt_on_error=0" \
#     build-tsan/tests/cudrv_stress --threads 16 --seconds 30
#
# Against the fake driver, on a machine without a GPU (no suppression needed: every frame is instrumented):
#   CUDRV_LIBCUDA=$PWD/build-tsan/tests/libcudrv_test_fake_cuda.so build-tsan/tests/cudrv_stress \
#     --threads 16 --seconds 10 --device 1 --verify-compiled text --kinds stream,event,alloc_default,alloc_pool,compile
#   CUDRV_LIBCUDA=$PWD/build-tsan/tests/libcudrv_test_fake_cuda.so build-tsan/tests/cudrv_fake_driver_tests '[threads]'
#
# With --check it then runs, on this machine and without a GPU, cudrv_stress against the fake driver
# (16 threads for 10 s) and each fake-driver test case in a process of its own, and fails on any
# ThreadSanitizer report or failure (reports listed in $BUILD_DIR/tsan-check/).
#
# Environment: BUILD_DIR (default build-tsan), JOBS (default 2), CMAKE_ARGS (more configure arguments).
set -euo pipefail
check=0
[ "${1:-}" = --check ] && check=1
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-tsan}
launcher=()
if command -v cudrv-cc > /dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=cudrv-cc -DCMAKE_CUDA_COMPILER_LAUNCHER=cudrv-cc)
fi
# shellcheck disable=SC2086
cmake -S . -B "$build" -DCUDRV_TSAN=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUDRV_BUILD_EXAMPLES=OFF \
  -DCUDRV_BUILD_BENCHMARKS=OFF -DCUDRV_BUILD_DOCS=OFF "${launcher[@]}" ${CMAKE_ARGS:-}
cmake --build "$build" -j "${JOBS:-2}" --target cudrv cudrv_stress cudrv_test_fake_cuda cudrv_fake_driver_tests
# The sanitizer's runtime (GCC's libtsan.so), copied next to the build for a machine that lacks it:
# scripts/gpu-suite.sh puts $build/tsan-runtime on LD_LIBRARY_PATH.
runtime=$(${CXX:-c++} -print-file-name=libtsan.so.2)
if [ -f "$runtime" ]; then
  mkdir -p "$build/tsan-runtime" && cp -L "$runtime" "$build/tsan-runtime/"
fi
echo "build-tsan: $build/tests/cudrv_stress (run it with TSAN_OPTIONS=suppressions=$PWD/tests/stress/tsan.supp)"

[ "$check" = 1 ] || exit 0
# --- --check: the host code under TSan against the fake driver (every frame instrumented) ---------------
build=$(cd "$build" && pwd)
logs=$build/tsan-check
rm -rf "$logs" && mkdir -p "$logs"
export CUDRV_LIBCUDA=$build/tests/libcudrv_test_fake_cuda.so
export TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1"
export LD_LIBRARY_PATH="$build/tsan-runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
runs=0
bad=0
# one <log name> <program and arguments...>: runs it, counts it bad on a failure or any report.
one() {
  local log=$logs/$1.log
  shift
  local rc=0
  "$@" > "$log" 2>&1 || rc=$?
  local reports
  reports=$(grep -c "WARNING: ThreadSanitizer" "$log" || true)
  runs=$((runs + 1))
  # Catch says "No tests ran" (and succeeds) when a name matched nothing.
  if grep -q "^No tests ran" "$log"; then rc=no-match; fi
  if [ "$rc" != 0 ] || [ "$reports" != 0 ]; then
    bad=$((bad + 1))
    echo "tsan-check: FAILED ($rc, $reports reports): $*"
  fi
}
one stress "$build/tests/cudrv_stress" --threads 16 --seconds 10 --device 1 --verify-compiled text \
  --kinds stream,event,alloc_default,alloc_pool,compile
i=0
# Each case alone, as ctest runs them (the cases that emulate older drivers are left out: they need
# FAKE_CUDA_DRIVER_VERSION, see tests/CMakeLists.txt).
while IFS= read -r name; do
  case $name in "" | *"fake driver 12."*) continue ;; esac
  i=$((i + 1))
  # A test spec splits at commas and reads brackets as tags: both escaped.
  one "case-$i" "$build/tests/cudrv_fake_driver_tests" "$(printf '%s' "$name" | sed 's/[][,\\]/\\&/g')"
done < <("$build/tests/cudrv_fake_driver_tests" --list-test-names-only "~[no-batch-copy]" | grep -v "^Matching\|test cases$")
echo "tsan-check: $runs runs, $bad failed or reported (logs in $logs)"
[ "$bad" = 0 ]
