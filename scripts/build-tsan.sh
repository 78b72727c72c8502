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
# Environment: BUILD_DIR (default build-tsan), JOBS (default 2), CMAKE_ARGS (more configure arguments).
set -euo pipefail
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
