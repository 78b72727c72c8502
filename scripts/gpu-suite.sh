#!/usr/bin/env bash
# Runs the GPU tier on a machine with a GPU, from a build tree made elsewhere (or here):
#   1. ctest -L gpu (each test case in its own process, as CI-style runs do);
#   2. the whole GPU test binary under compute-sanitizer memcheck with leak checking (and the lying-producer
#      IPC case once more with its consumer child instrumented), then the cases
#      that provoke no driver refusal on purpose with API errors reported and --error-exitcode; the
#      runtime-interop tests (cudrv_runtime_tests: the CUDA runtime and cuBLAS on cudrv objects) with
#      both; the NCCL tests over all GPUs of one process and an MPI program with two ranks under memcheck;
#   3. cudrv-query's views, each also under compute-sanitizer (unless --no-sanitizer);
#   4. the examples at the sizes of examples/test-sizes.txt (also under the sanitizer's memcheck, API
#      errors reported, and racecheck for those that share memory), the PyTorch/CuPy example
#      (examples/torch_extension/run.py, where a python3 imports torch) and (unless --no-bench) the
#      benchmarks named in $BENCHES (default:
#      bench_foundation bench_launch bench_compile_cache bench_graph bench_nvtx bench_query_startup
#      bench_nccl bench_vmm bench_batch_copy;
#      missing ones are skipped).
# The cudrv-query tests validate JSON with Python's jsonschema; where python3 lacks it, a copy made
# by scripts/fetch-jsonschema.sh in $BUILD/pyvendor is used.
# Logs go to $OUT (default: ./gpu-suite-logs). The build tree is expected at $BUILD (default:
# ./build, the README's layout). CTest files hold the absolute paths of the source and build trees
# they were configured in; when those paths do not exist here, they are linked to these trees.
# The last line of the output (and of $OUT/summary.txt) counts everything the suite ran, each ctest
# test, sanitizer pass, cudrv-query view, example and benchmark once: "N passed, N failed, N skipped";
# $OUT/failures.txt names the failures. The exit status is 0 only when none failed.
# Usage: scripts/gpu-suite.sh [--no-bench] [--no-sanitizer] [--only tests|examples|scaleout|stress]
#                             [--scaleout-parts PART,...]
#   --only tests: ctest -L gpu -LE multigpu, the test binary's sanitizer passes and cudrv-query's views
#   (without --only, ctest -L gpu runs the multigpu-labelled tests too; they skip on one GPU);
#   --only examples: the examples (and the benchmarks unless --no-bench). Together, the two parts are
#   the whole suite, for machines whose calls are too short for all of it at once.
#   --only scaleout: what needs several GPUs, over every GPU of the machine (N, from nvidia-smi; N >= 2,
#   or it says so and stops): the tests of one process over all GPUs (also under memcheck), the
#   GPU tests tagged [needs-2-gpus] (also under memcheck), the multi-rank NCCL tests with mpirun -np N, the fault path (one rank killed; --detect-seconds
#   $FAULT_DETECT_SECONDS, default 20), the IPC tests and example across two GPUs, cudrv-query --p2p,
#   bench_nccl with N ranks (sweep and host cost) and in one process (peer copies), the MPI programs with
#   N ranks and example_multi_gpu, and (unless --no-bench) the heat_halo scaling runs from 1 to N ranks
#   (strong: $SCALING_CELLS cells in all, default 64M; weak: that many per rank), written to
#   $OUT/scaling.jsonl for scripts/plot-scaling.py; then nccl-tests beside cudrv and NCCL's network path
#   (below). The multi-GPU tests (label multigpu) belong to this part, not to --only tests. The whole
#   suite on a machine of several GPUs is all three parts.
#   --scaleout-parts (with --only scaleout) runs some of it, in this order, each step with a timeout and
#   its time in the summary, each part with its total, for calls too short for all of it (default: all):
#     tests       cudrv_multigpu_tests, cudrv_nccl_mpi_tests -np N, [needs-2-gpus], [ipc], the IPC
#                 example, cudrv-query --p2p;
#     fault       cudrv_nccl_fault_test -np N, --mode absent, mid and shrink, and shrink again with an NCCL
#                 that has ncclCommRevoke ($REVOKE_NCCL, or a Python's nvidia-nccl wheel) when the
#                 system's lacks it;
#     memcheck    the one-process and the two-device tests under memcheck (not with --no-sanitizer);
#     examples    the MPI programs with N ranks and example_multi_gpu;
#     bench       bench_nccl all with N ranks, bench_nccl peer;
#     scaling     heat_halo from 1 to N ranks;
#     nccl-tests  with 2 ranks and with N: bench_nccl's all-reduce sweep, then nccl-tests' all_reduce_perf
#                 ($NCCL_TESTS, default $BUILD/nccl-tests, made by scripts/build-nccl-tests.sh; skipped
#                 without it) under the same mpirun and environment, sizes 8 B to $SWEEP_MAX_BYTES
#                 (default 1G) doubling, all_reduce_perf's other arguments $NCCL_TESTS_ARGS (default
#                 "-n 20 -w 5 -c 1"), and scripts/nccl-compare.py on each pair;
#     nccl-tests-oneproc  the same pair in one process over 2 and N GPUs (bench_nccl --no-mpi --devices k,
#                 all_reduce_perf -g k);
#     latency     8 B all-reduce latency with 2 and N ranks: $LATENCY_ROUNDS (default 5) alternating runs
#                 of bench_nccl sweep (--iters 1000) and all_reduce_perf (-n 1000), the median of each
#                 side and their ratio (a 20-iteration sweep's 8 B figure moves by +-10% between runs);
#     window      bench_nccl window with 2 and N ranks: all-reduce through a symmetric window against
#                 plain memory; beside it all_reduce_perf -R 2 (nccl-tests' symmetric window) and -R 0;
#     net         NCCL's network path on this one host: P2P and shared memory off, the socket transport
#                 over loopback (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_IB_DISABLE=1
#                 NCCL_SOCKET_IFNAME=$NET_IFNAME, default lo; NCCL_HOSTID one per rank unless
#                 NET_HOSTID=0): a short bench_nccl run with NCCL_DEBUG=INFO whose transport lines go to
#                 the summary (a failure when no channel says "via NET/Socket" or one says P2P or SHM),
#                 cudrv_nccl_mpi_tests (Catch2 filter $NET_TESTS_FILTER, default every case) and the
#                 fault test --mode mid;
#     net-bench   the nccl-tests pair again with N ranks, in the network path's environment, up to
#                 $NET_SWEEP_MAX_BYTES (default $SWEEP_MAX_BYTES);
#     net-median  in that environment, with N ranks, the latency part's alternating runs at the sizes of
#                 $NET_MEDIAN_SIZES (default 8, 1 MiB, 16 MiB and 64 MiB), medians.
#   --no-bench leaves out bench, scaling, nccl-tests, nccl-tests-oneproc, latency, window, net-bench and
#   net-median;
#   --no-sanitizer leaves out memcheck.
#   --only bandwidth (issue 36): cudrv-query --bandwidth beside nvbandwidth, over every GPU of the machine,
#   in one call: cudrv-query --bandwidth --json, then nvbandwidth ($NVBANDWIDTH, default
#   $BUILD/nvbandwidth/nvbandwidth, made by scripts/build-nvbandwidth.sh; the comparison is skipped
#   without it) with the same size ($BANDWIDTH_SIZE_MIB, default 512), loop count
#   ($BANDWIDTH_ITERATIONS, default 16) and samples ($BANDWIDTH_SAMPLES, default 3), both on the
#   tests of $BANDWIDTH_TESTS (comma-separated; default all), then scripts/bandwidth-compare.py: the
#   table into the summary and $OUT/bandwidth-compare.md, the device-to-device heat map into
#   $OUT/bandwidth-d2d.png (with matplotlib: $BANDWIDTH_PYTHON, default python3); then (unless
#   --no-sanitizer) a few tests of the view at 1 MiB under compute-sanitizer memcheck.
#   --only stress: the stress program (docs/reliability.md, "Stress test"), also part of the run without
#   --only: tests/cudrv_stress with $STRESS_THREADS threads (default 16) for $STRESS_SECONDS s (default
#   60), then, when the ThreadSanitizer build exists ($BUILD_TSAN, default ./build-tsan, made by
#   scripts/build-tsan.sh), its cudrv_stress for $STRESS_TSAN_SECONDS s (default 30) against the driver
#   (suppressions: tests/stress/tsan.supp) and for 10 s against the stand-in driver; a TSan run fails on a
#   non-zero exit status or any report.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
out=${OUT:-$root/gpu-suite-logs}
mkdir -p "$out"
bench=1
sanitize=1
tests=1
examples=1
scaleout=0
stress=1
bandwidth=0
only=
all_parts=tests,fault,memcheck,examples,bench,scaling,nccl-tests,nccl-tests-oneproc,latency,window,net,net-bench,net-median
parts=
while [ $# -gt 0 ]; do
  case $1 in
    --no-bench) bench=0 ;;
    --no-sanitizer) sanitize=0 ;;
    --scaleout-parts)
      shift
      parts=${1:-}
      for p in ${parts//,/ }; do
        case ",$all_parts," in
          *",$p,"*) ;;
          *) echo "gpu-suite: --scaleout-parts takes a comma-separated list of $all_parts; not '$p'" >&2; exit 2 ;;
        esac
      done
      [ -n "$parts" ] || { echo "gpu-suite: --scaleout-parts takes a comma-separated list of $all_parts" >&2; exit 2; } ;;
    --only)
      shift
      only=${1:-}
      case ${1:-} in
        tests) examples=0; bench=0; stress=0 ;;
        examples) tests=0; stress=0 ;;
        scaleout) tests=0; examples=0; scaleout=1; stress=0 ;;
        stress) tests=0; examples=0; bench=0 ;;
        bandwidth) tests=0; examples=0; bench=0; stress=0; bandwidth=1 ;;  # issue 36: bandwidth
        *) echo "gpu-suite: --only takes tests, examples, scaleout, stress or bandwidth" >&2; exit 2 ;;
      esac ;;
    *) echo "gpu-suite: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$parts" ] && [ "$only" != scaleout ]; then
  echo "gpu-suite: --scaleout-parts goes with --only scaleout" >&2
  exit 2
fi
# The scale-out parts that run: those asked for (default: all), less the measurements under --no-bench
# and the memcheck passes under --no-sanitizer.
parts=${parts:-$all_parts}
# drop_parts <name...>: removes those parts from $parts.
drop_parts() {
  local keep='' p
  for p in ${parts//,/ }; do
    case " $* " in *" $p "*) ;; *) keep+=${keep:+,}$p ;; esac
  done
  parts=$keep
}
[ "$bench" = 1 ] || drop_parts bench scaling nccl-tests nccl-tests-oneproc latency window net-bench net-median
[ "$sanitize" = 1 ] || drop_parts memcheck

# The configured source path first: when the build folder lies inside the source folder (the README's
# layout), linking the source path also makes the configured build path resolve, and linking the
# build path first would create the source path as a plain folder holding only that link.
src_configured=$(sed -n 's/^# Source directory: //p' "$build/CTestTestfile.cmake" | head -n 1)
if [ -n "$src_configured" ] && [ ! -e "$src_configured" ]; then
  mkdir -p "$(dirname "$src_configured")"
  ln -s "$root" "$src_configured"
fi
configured=$(sed -n 's/^# Build directory: //p' "$build/CTestTestfile.cmake" | head -n 1)
if [ -n "$configured" ] && [ ! -e "$configured" ]; then
  mkdir -p "$(dirname "$configured")"
  ln -s "$build" "$configured"
fi
# Both configured paths must now lead to these trees, not to another checkout or build.
same_dir() { [ "$(cd "$1" 2> /dev/null && pwd -P)" = "$(cd "$2" && pwd -P)" ]; }
if [ -n "$src_configured" ] && ! same_dir "$src_configured" "$root"; then
  echo "gpu-suite: the build was configured for the source $src_configured, which is not this tree ($root)" >&2
  exit 2
fi
if [ -n "$configured" ] && ! same_dir "$configured" "$build"; then
  echo "gpu-suite: the build was configured in $configured, which is not the build tree given ($build)" >&2
  exit 2
fi

# Script-driven tests call the cmake of the configuring machine by its absolute path.
cmake_used=$(sed -n 's/^CMAKE_COMMAND:INTERNAL=//p' "$build/CMakeCache.txt" | head -n 1)
if [ -n "$cmake_used" ] && [ ! -x "$cmake_used" ] && command -v cmake > /dev/null; then
  mkdir -p "$(dirname "$cmake_used")" && ln -sf "$(command -v cmake)" "$cmake_used"
fi

if ! python3 -c "import jsonschema" 2> /dev/null && [ -d "$build/pyvendor" ]; then
  export PYTHONPATH="$build/pyvendor${PYTHONPATH:+:$PYTHONPATH}"
fi

status=0
passed=0
failed=0
skipped=0
# record <what> <exit code>: counts one run of the suite (a program, a sanitizer pass, a view).
record() {
  if [ "$2" = 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    status=1
    echo "FAILED: $1 (exit code $2)" >> "$out/failures.txt"
  fi
}
# count_ctest <log>: adds a ctest run's passed, failed and skipped tests. ctest ends with
# "N% tests passed, F tests failed out of T" (older) or "100% tests passed out of T" (newer, none failed).
count_ctest() {
  local total fails skips disabled
  total=$(sed -n 's/^[0-9]*% tests passed.* out of \([0-9]*\).*/\1/p' "$1" | tail -n 1)
  fails=$(sed -n 's/^[0-9]*% tests passed, \([0-9]*\) tests* failed out of.*/\1/p' "$1" | tail -n 1)
  # Skipped tests count in the total; disabled ones do not, but are reported as skipped too.
  skips=$(grep -cE '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$1")
  disabled=$(grep -cE '^[[:space:]]*[0-9]+ - .* \(Disabled\)$' "$1")
  if [ -z "$total" ]; then  # ctest did not get as far as its summary
    failed=$((failed + 1))
    status=1
    echo "FAILED: ctest without a summary in $1" >> "$out/failures.txt"
    return
  fi
  fails=${fails:-0}
  passed=$((passed + total - fails - skips))
  failed=$((failed + fails))
  skipped=$((skipped + skips + disabled))
  [ "$fails" = 0 ] || status=1
}
: > "$out/failures.txt"
# The sanitizer follows only the process it starts: the [ipc] cases and example_ipc_producer_consumer
# start this binary again as a child (a consumer, a producer killed on purpose), which the default (all
# processes) would also instrument, with each child's failing calls (a consumer whose producer was
# killed) changing its exit status and teardown of IPC imports under the tool slowed to the tests'
# timeouts. ctest runs those children without the tool.
san_procs=(--target-processes application-only)
# NCCL's own kernels are not checked where NCCL runs over several GPUs: its LL all-reduce reads whole
# 4-byte words, up to 3 bytes past the end of a buffer whose size is not a multiple of 4 (seen with
# NCCL 2.28.3: ncclDevKernel_AllReduce_Sum_u8_RING_LL over 1031 bytes). That read stays inside the
# allocation's page and is harmless, but memcheck reports it and stops the kernel, and every later
# case then fails. The tests' and cudrv's kernels, and every host-side check, stay in.
nccl_kernels=(--kernel-name-exclude kns=ncclDevKernel)
echo "== nvidia-smi" | tee "$out/summary.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$out/summary.txt"

if [ "$tests" = 1 ]; then
ctest_labels=(-L gpu)
[ "$only" = tests ] && ctest_labels+=(-LE multigpu)
echo "== ctest ${ctest_labels[*]}" | tee -a "$out/summary.txt"
ctest --test-dir "$build" "${ctest_labels[@]}" --output-on-failure --timeout 120 > "$out/ctest-gpu.log" 2>&1
count_ctest "$out/ctest-gpu.log"
grep -E "tests passed|tests failed|Total Test time" "$out/ctest-gpu.log" | tee -a "$out/summary.txt"
grep -E "\*\*\*(Failed|Exception)|Not Run|\(Failed\)" "$out/ctest-gpu.log" | head -40 | tee -a "$out/summary.txt"

if [ "$sanitize" = 1 ]; then
  # 1. Memory errors and leaks over the whole binary but the NCCL cases. The [bad-input], [bad_input] and
  #    [driver_error] cases make the driver refuse calls on purpose, so API errors are not counted in this
  #    pass; the [misuse] cases destroy a context before what was made in it, which the sanitizer counts
  #    as leaks, so they are left out (ctest runs them), and so are the [sticky_fault] case (a deliberate
  #    out-of-bounds write, in a child process it starts) and the [fork] case (a child that exits without
  #    freeing what it inherited). The [nccl] cases run in pass 1b: NCCL starts the
  #    CUDA runtime it carries, whose exit handler releases the primary context before the test files'
  #    static libraries are unloaded, and the sanitizer would count their module globals as leaked.
  # leak_pass <title> <log name> <what to record> <program and arguments...>: memcheck with leak checking,
  # API errors not counted (see each pass for why).
  leak_pass() {
    local title=$1 log=$2 what=$3
    shift 3
    echo "== compute-sanitizer memcheck --leak-check full, $title" | tee -a "$out/summary.txt"
    compute-sanitizer --tool memcheck "${san_procs[@]}" ${extra_san:+"${extra_san[@]}"} --leak-check full \
      --report-api-errors no --error-exitcode 99 "$@" > "$out/$log" 2>&1
    local code=$?
    echo "exit code $code" | tee -a "$out/summary.txt"
    record "$what" "$code"
    grep -E "ERROR SUMMARY|LEAK SUMMARY|test cases|assertions" "$out/$log" | tee -a "$out/summary.txt"
  }
  # [timing] cases assert a speed-up (an access-policy window); the sanitizer slows every access, so they
  # run in the plain pass only.
  leak_pass "whole binary but ~[misuse]~[nccl]~[sticky_fault]~[fork]~[timing] (API errors the tests provoke on purpose not counted)" \
    sanitizer-memcheck.log "memcheck of cudrv_gpu_tests" "$build/tests/cudrv_gpu_tests" "~[misuse]~[nccl]~[sticky_fault]~[fork]~[timing]"
  # 1b. The NCCL cases on their own, memory errors and leaks (API errors: see pass 2).
  leak_pass "[nccl] (NCCL's probing API errors not counted)" sanitizer-memcheck-nccl.log \
    "memcheck of cudrv_gpu_tests [nccl]" "$build/tests/cudrv_gpu_tests" "[nccl]"

  # 1c. The lying producer (issue 30) with its consumer child instrumented too (--target-processes all):
  #     what the consumer writes over its imports, with the true sizes, must stay inside them; API errors
  #     reported (the refusals happen in cudrv, after calls that succeed). Memory errors only: the tool
  #     counts a pool import freed with cuMemFree as leaked, also in a program of raw driver calls (import,
  #     cuMemFree, exit: "Leaked 4,000 bytes"; none with cuMemFreeAsync and a synchronisation; H200 and
  #     H100, driver 580.159.04), which cudrv's imported_buffer does as the driver documents.
  echo "== compute-sanitizer memcheck --target-processes all, API errors reported: the lying producer and its consumer" | tee -a "$out/summary.txt"
  compute-sanitizer --tool memcheck --target-processes all --error-exitcode 99 \
    "$build/tests/cudrv_gpu_tests" "a lying producer*" > "$out/sanitizer-lying-producer.log" 2>&1
  rc=$?
  echo "exit code $rc" | tee -a "$out/summary.txt"
  record "memcheck of the lying producer, child included" "$rc"
  grep -E "ERROR SUMMARY|LEAK SUMMARY|test cases|assertions" "$out/sanitizer-lying-producer.log" | tee -a "$out/summary.txt"

  # 2. API errors too, as users run the sanitizer in CI (--error-exitcode, API errors reported): every
  #    case that does not provoke a refusal on purpose must make no failing driver call at all.
  #    -d yes prints each case's name after it, so a reported call can be traced to its case.
  #    The [nccl] cases are left out of this pass: NCCL itself probes its kernels with
  #    cudaFuncGetAttributes at communicator creation and gets cudaErrorNoKernelImageForDevice for the
  #    architectures it was not built for; those failing calls are NCCL's, not cudrv's (passes 1b and 3
  #    check the NCCL cases for memory errors and leaks).
  echo "== compute-sanitizer memcheck --error-exitcode, API errors reported, ~[bad-input]~[bad_input]~[driver_error]~[nccl]~[sticky_fault]~[fork]~[timing]" | tee -a "$out/summary.txt"
  compute-sanitizer --tool memcheck "${san_procs[@]}" --error-exitcode 99 \
    "$build/tests/cudrv_gpu_tests" "~[bad-input]~[bad_input]~[driver_error]~[nccl]~[sticky_fault]~[fork]~[timing]" -d yes > "$out/sanitizer-api-errors.log" 2>&1
  rc=$?
  echo "exit code $rc" | tee -a "$out/summary.txt"
  record "memcheck with API errors of cudrv_gpu_tests" "$rc"
  grep -E "ERROR SUMMARY|test cases|assertions|Program hit" "$out/sanitizer-api-errors.log" | sort | uniq -c | head -40 | tee -a "$out/summary.txt"

  # 2b. cudrv next to the CUDA runtime and cuBLAS (cudrv_runtime_tests, its own binary: it links the shared
  #    runtime and cuBLAS): memory errors, leaks and API errors, as users run the sanitizer in CI.
  rt_tests="$build/tests/cudrv_runtime_tests"
  if [ -x "$rt_tests" ]; then
    echo "== compute-sanitizer memcheck --leak-check full --error-exitcode, API errors reported: cudrv_runtime_tests" | tee -a "$out/summary.txt"
    compute-sanitizer --tool memcheck "${san_procs[@]}" --leak-check full --error-exitcode 99 "$rt_tests" -d yes \
      > "$out/sanitizer-runtime.log" 2>&1
    rc=$?
    echo "exit code $rc" | tee -a "$out/summary.txt"
    record "memcheck of cudrv_runtime_tests" "$rc"
    grep -E "ERROR SUMMARY|LEAK SUMMARY|test cases|assertions" "$out/sanitizer-runtime.log" | tee -a "$out/summary.txt"
  fi

  # 3. Scale-out: NCCL over every GPU of one process, and the MPI programs with two ranks on this
  #    machine's GPUs (sharing one where there is one), memory errors and leaks; API errors are not
  #    counted where NCCL runs (its own probing calls, see pass 2).
  mgpu="$build/tests/multigpu/cudrv_multigpu_tests"
  if [ -x "$mgpu" ]; then
    extra_san=("${nccl_kernels[@]}")
    CUDRV_TEST_NCCL_SMALL=1 CUDRV_TEST_TIMEOUT_SCALE=20 leak_pass \
      "cudrv_multigpu_tests (NCCL over all GPUs of one process; NCCL's probing API errors not counted)" \
      sanitizer-multigpu.log "memcheck of cudrv_multigpu_tests" "$mgpu"
    extra_san=()
  fi
  halo="$build/examples/example_heat_halo"
  if [ -x "$halo" ] && command -v mpirun > /dev/null; then
    echo "== mpirun -np 2: example_heat_halo, staged exchange, each rank under compute-sanitizer memcheck (API errors reported)" | tee -a "$out/summary.txt"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe --bind-to none \
      -x NCCL_NVLS_ENABLE=0 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 \
      "$halo" 20011 50 --exchange staged --share-devices > "$out/sanitizer-heat-halo-np2.log" 2>&1
    rc=$?
    echo "exit code $rc;" "$(grep -E "ERROR SUMMARY" "$out/sanitizer-heat-halo-np2.log" | sort | uniq -c | tr -s ' ')" | tee -a "$out/summary.txt"
    record "memcheck of example_heat_halo under mpirun -np 2" "$rc"
  fi
fi

echo "== cudrv-query" | tee -a "$out/summary.txt"
query="$build/tools/cudrv-query/cudrv-query"
"$query" 2>&1 | tee -a "$out/summary.txt"
record "cudrv-query" "${PIPESTATUS[0]}"
# name|arguments; the bench is short under the sanitizer (it slows every copy and launch). API errors
# are reported and fail the run: cudrv reads its kernels' parameters from the image it loads.
# The views of issue 36 run small: two watch samples, a few bandwidth tests at 1 MiB, the GPU tests' own
# fatbin for --inspect. Under the sanitizer: --inspect makes no CUDA call (compute-sanitizer refuses a
# program that makes none: "terminated before first instrumented API call"), so it runs without. The
# sanitizer serialises kernel launches, so an SM copy enqueued behind the spin kernel that holds its
# stream would start only after that kernel's 10 s timeout (the view would report the timeout, exit 4,
# instead of checking the copy): the bandwidth view runs its spin kernel and copy-engine tests as they
# are, then its SM copies again with CUDRV_QUERY_BANDWIDTH_UNGATED=1 (no spin kernel).
bw_small="--bandwidth --no-progress --bandwidth-size 1M --bandwidth-iterations 2 --bandwidth-samples 1"
bw_sanitized_ce="$bw_small --bandwidth-tests host_to_device_memcpy_ce,device_local_copy,host_device_latency_sm"
bw_sanitized_sm="$bw_small --bandwidth-tests device_to_host_memcpy_sm,host_to_device_bidirectional_memcpy_sm"
bw_small+=" --bandwidth-tests host_to_device_memcpy_ce,device_to_host_memcpy_sm,device_local_copy,host_device_latency_sm"
for spec in "summary|" "details|--details" "p2p|--p2p" "bench|--bench --no-progress" "topo|--topo" \
            "watch|--watch --watch-count 2 --watch-interval 0.2" "bandwidth|$bw_small" \
            "inspect|--inspect $build/tests/kernels/test_kernels.fatbin"; do
  name=${spec%%|*}
  read -r -a args <<< "${spec#*|}"
  "$query" "${args[@]}" > "$out/query-$name.txt" 2>&1
  record "cudrv-query $name" $?
  "$query" "${args[@]}" --json > "$out/query-$name.json" 2> /dev/null
  record "cudrv-query $name --json" $?
  [ "$sanitize" = 1 ] && [ "$name" != inspect ] || continue
  [ "$name" = bench ] && args+=(--bench-size 8M --bench-iterations 2 --bench-trials 2)
  runs=("$name|")
  [ "$name" = bandwidth ] && runs=("bandwidth|$bw_sanitized_ce" "bandwidth-sm-ungated|$bw_sanitized_sm")
  for run in "${runs[@]}"; do
    log_name=${run%%|*}
    [ -n "${run#*|}" ] && read -r -a args <<< "${run#*|}"
    ungated=
    [ "$log_name" = bandwidth-sm-ungated ] && ungated=1
    CUDRV_QUERY_BANDWIDTH_UNGATED=$ungated compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 \
      "$query" "${args[@]}" > "$out/query-$log_name-memcheck.log" 2>&1
    rc=$?
    echo "cudrv-query ${args[*]:-(summary)}${ungated:+ (CUDRV_QUERY_BANDWIDTH_UNGATED=1)} under memcheck: exit code $rc;" \
      "$(grep -E "ERROR SUMMARY" "$out/query-$log_name-memcheck.log")" | tee -a "$out/summary.txt"
    record "cudrv-query $log_name under memcheck" "$rc"
  done
done
fi

if [ "$examples" = 1 ]; then
echo "== examples (sizes of examples/test-sizes.txt; scripts/run-examples.sh measures them at full size)" | tee -a "$out/summary.txt"
while IFS='|' read -r name args racecheck sanitizer_args; do
  case $name in ''|'#'*) continue ;; esac
  ex="$build/examples/example_$name"
  read -r -a argv <<< "$args"
  [ -n "$sanitizer_args" ] || sanitizer_args=$args
  read -r -a sargv <<< "$sanitizer_args"
  if [ ! -x "$ex" ]; then
    echo "-- example_$name: not built" | tee -a "$out/summary.txt"
    record "example_$name (not built)" 1
    continue
  fi
  echo "-- example_$name ${args}" | tee -a "$out/summary.txt"
  "$ex" "${argv[@]}" > "$out/example_$name.log" 2>&1
  rc=$?
  tail -n 3 "$out/example_$name.log" | tee -a "$out/summary.txt"
  echo "exit code $rc" | tee -a "$out/summary.txt"
  record "example_$name" "$rc"
  if [ "$sanitize" = 1 ]; then
    # As a user's CI would: any memory error or failing API call fails the program.
    compute-sanitizer --tool memcheck "${san_procs[@]}" --leak-check full --error-exitcode 99 "$ex" "${sargv[@]}" \
      > "$out/example_$name-memcheck.log" 2>&1
    rc=$?
    echo "under compute-sanitizer memcheck --error-exitcode 99 (API errors reported), arguments ${sanitizer_args:-none}: exit code $rc;" \
      "$(grep -E "ERROR SUMMARY" "$out/example_$name-memcheck.log")" | tee -a "$out/summary.txt"
    record "example_$name under memcheck" "$rc"
    if [ "$racecheck" = yes ]; then
      # Kernels that share memory between threads: races on shared memory (barriers, DSMEM).
      compute-sanitizer --tool racecheck --racecheck-report all --error-exitcode 99 "$ex" "${sargv[@]}" \
        > "$out/example_$name-racecheck.log" 2>&1
      rc=$?
      echo "under compute-sanitizer racecheck, arguments ${sanitizer_args:-none}: exit code $rc;" \
        "$(grep -E "RACECHECK SUMMARY|ERROR SUMMARY" "$out/example_$name-racecheck.log" | head -n 1)" | tee -a "$out/summary.txt"
      record "example_$name under racecheck" "$rc"
    fi
  fi
done < "$root/examples/test-sizes.txt"

# The PyTorch operator written with cudrv and the DLPack round trips with PyTorch and CuPy
# (examples/torch_extension/run.py: builds two extensions with torch.utils.cpp_extension against this
# build tree, prints PASS/FAIL lines and the launch-cost figure), with the first python3 that imports
# torch: $TORCH_PYTHON, python3, /opt/torch/.venv/bin/python3. Skipped where none does. Under the
# sanitizer (--quick, the extensions already built) PyTorch's own API errors are not counted.
torch_py=
for py in ${TORCH_PYTHON:-} python3 /opt/torch/.venv/bin/python3; do
  if command -v "$py" > /dev/null 2>&1 && "$py" -c "import torch" > /dev/null 2>&1; then
    torch_py=$py
    break
  fi
done
if [ -z "$torch_py" ]; then
  echo "-- torch_extension: skipped (no python3 here imports torch; set TORCH_PYTHON)" | tee -a "$out/summary.txt"
  skipped=$((skipped + 1))
else
  echo "-- torch_extension ($torch_py examples/torch_extension/run.py)" | tee -a "$out/summary.txt"
  timeout 900 "$torch_py" "$root/examples/torch_extension/run.py" --build "$build" > "$out/torch_extension.log" 2>&1
  rc=$?
  grep -E '^(PASS|FAIL|SKIP) |^torch_extension: |^\{|passed, ' "$out/torch_extension.log" | tee -a "$out/summary.txt"
  echo "exit code $rc" | tee -a "$out/summary.txt"
  record "examples/torch_extension/run.py" "$rc"
  if [ "$sanitize" = 1 ] && [ "$rc" = 0 ]; then
    timeout 900 compute-sanitizer --tool memcheck "${san_procs[@]}" --report-api-errors no --error-exitcode 99 \
      "$torch_py" "$root/examples/torch_extension/run.py" --build "$build" --quick > "$out/torch_extension-memcheck.log" 2>&1
    rc=$?
    echo "torch_extension under compute-sanitizer memcheck (--quick): exit code $rc;" \
      "$(grep -E "ERROR SUMMARY|passed, " "$out/torch_extension-memcheck.log" | tr '\n' ' ')" | tee -a "$out/summary.txt"
    record "examples/torch_extension/run.py under memcheck" "$rc"
  elif [ "$sanitize" = 1 ]; then
    echo "torch_extension under compute-sanitizer memcheck: not run (the plain run failed)" | tee -a "$out/summary.txt"
    skipped=$((skipped + 1))
  fi
fi

fi

if [ "$scaleout" = 1 ]; then
  if ! command -v nvidia-smi > /dev/null; then
    echo "gpu-suite: --only scaleout needs two GPUs or more; this machine has no GPU (nvidia-smi not found)" | tee -a "$out/summary.txt"
    exit 2
  fi
  ngpu=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU')
  echo "== scale-out over $ngpu GPUs, parts $parts" | tee -a "$out/summary.txt"
  nvidia-smi topo -m > "$out/topology.txt" 2>&1
  if [ "$ngpu" -lt 2 ]; then
    echo "gpu-suite: --only scaleout needs two GPUs or more; this machine has $ngpu" | tee -a "$out/summary.txt"
    exit 2
  fi
  export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # mpirun's options for one rank per GPU on this host (NVLink SHARP multicast always off).
  mpi_opts=(--oversubscribe --bind-to none -x NCCL_NVLS_ENABLE=0)
  mpi=(mpirun -np "$ngpu" "${mpi_opts[@]}")
  # step <title> <log> <timeout seconds> <command...>: one counted run with its log, exit status and
  # time. A run past its limit gets SIGTERM (mpirun passes it on to its ranks), SIGKILL 30 s later.
  step() {
    local title=$1 log=$2 limit=$3 t0=$SECONDS
    shift 3
    echo "== $title" | tee -a "$out/summary.txt"
    timeout -k 30 "$limit" "$@" > "$out/$log" 2>&1
    local code=$? late=
    [ "$code" = 124 ] && late=" (timed out after $limit s)"
    echo "exit code $code$late, $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
    record "$title" "$code"
  }
  # skip <what> <why>: counted as skipped, with the reason in the summary.
  skip() {
    echo "-- $1: skipped ($2)" | tee -a "$out/summary.txt"
    skipped=$((skipped + 1))
  }
  # part <name>: whether --scaleout-parts selected it; starts its clock and prints its header.
  part_times=()
  part_name=
  part_t0=0
  part() {
    case ",$parts," in *",$1,"*) ;; *) return 1 ;; esac
    part_end
    part_name=$1
    part_t0=$SECONDS
    echo "=== scale-out part $1" | tee -a "$out/summary.txt"
  }
  part_end() {
    [ -n "$part_name" ] || return 0
    echo "=== scale-out part $part_name: $((SECONDS - part_t0)) s" | tee -a "$out/summary.txt"
    part_times+=("$part_name $((SECONDS - part_t0)) s")
    part_name=
  }
  # Open MPI 4 ends the job when a rank exits without MPI_Finalize unless told not to (the fault test's
  # victim does); Open MPI 5 (PRRTE) names that parameter differently and needs no flag here.
  fault_flags=()
  if mpirun --version 2>&1 | grep -qE '\((Open MPI|OpenRTE)\) [1-4]\.'; then
    fault_flags=(--mca orte_allowed_exit_without_sync 1)
  fi
  mgpu="$build/tests/multigpu"
  ex="$build/examples"
  bench_nccl="$build/benchmarks/bench_nccl"
  # nccl-tests (scripts/build-nccl-tests.sh) and the comparison of its all_reduce_perf with bench_nccl's
  # sweep: the same sizes (8 B to $SWEEP_MAX_BYTES, doubling), float sum, one rank per GPU.
  nccl_tests=${NCCL_TESTS:-$build/nccl-tests}
  read -r -a nt_extra <<< "${NCCL_TESTS_ARGS:--n 20 -w 5 -c 1}"
  # NCCL's network path on this one host: peer-to-peer and shared memory off, the socket transport over
  # loopback ($NET_IFNAME). With P2P and SHM off NCCL already marks every other GPU as reachable through
  # the network only; NCCL_HOSTID per rank ($NET_HOSTID=1, the default) also makes it count each rank as
  # a host of its own (nNodes = N, as N one-GPU nodes would), instead of one host of N ranks.
  net_opts=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_NET=Socket -x NCCL_IB_DISABLE=1
    -x "NCCL_SOCKET_IFNAME=${NET_IFNAME:-lo}")
  net_wrap=()
  if [ "${NET_HOSTID:-1}" = 1 ]; then
    # shellcheck disable=SC2016  # expanded by each rank's shell, not here
    net_wrap=(bash -c 'NCCL_HOSTID=cudrv-net-rank-${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-0}} exec "$@"' net-hostid)
  fi
  net_env_text="NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=${NET_IFNAME:-lo}"
  [ "${NET_HOSTID:-1}" = 1 ] && net_env_text+=" NCCL_HOSTID=<one per rank>"
  # nccl_tests_ready: whether all_reduce_perf is there and loads (its libraries found).
  nccl_tests_ready() {
    if [ ! -x "$nccl_tests/all_reduce_perf" ]; then
      skip "nccl-tests' all_reduce_perf" "$nccl_tests/all_reduce_perf not built: run scripts/build-nccl-tests.sh where cudrv is built"
      return 1
    fi
    if ldd "$nccl_tests/all_reduce_perf" 2> /dev/null | grep -q 'not found'; then
      echo "-- nccl-tests' all_reduce_perf cannot load: $(ldd "$nccl_tests/all_reduce_perf" | grep 'not found' | tr -s ' \t' ' ')" | tee -a "$out/summary.txt"
      record "nccl-tests' all_reduce_perf loads" 1
      return 1
    fi
    grep -E '^(nccl-tests|commit|arch) ' "$nccl_tests/BUILD-INFO" 2> /dev/null | tr '\n' ' ' | sed 's/ $/\n/' | tee -a "$out/summary.txt"
  }
  # compare_pair <label> <all_reduce_perf log> <bench_nccl JSON> <ranks>: scripts/nccl-compare.py on
  # a pair measured in this call, its Markdown table into the summary.
  compare_pair() {
    local label=$1 log=$2 json=$3 ranks=$4
    if [ ! -f "$root/scripts/nccl-compare.py" ]; then
      skip "comparison $label" "scripts/nccl-compare.py not in this tree"
      return
    fi
    if [ ! -s "$out/$log" ] || [ ! -s "$out/$json" ]; then
      skip "comparison $label" "a side of the pair is missing: $log, $json"
      return
    fi
    step "nccl-compare.py: bench_nccl against all_reduce_perf, $label" "nccl-compare-$label.log" 120 \
      python3 "$root/scripts/nccl-compare.py" --nccl-tests "$out/$log" --bench "$out/$json" --ranks "$ranks" \
      --out-md "$out/nccl-compare-$label.md" --out-png "$out/nccl-compare-$label.png"
    [ -f "$out/nccl-compare-$label.md" ] && tee -a "$out/summary.txt" < "$out/nccl-compare-$label.md"
  }
  # allreduce_pair <label> <ranks> <largest size> <mpirun options...>: bench_nccl's sweep and
  # all_reduce_perf from 8 B to that size under the same launcher and environment, one after the
  # other, then the comparison.
  allreduce_pair() {
    local label=$1 ranks=$2 sweep_max=$3
    shift 3
    local nt_args=(-b 8 -e "$sweep_max" -f 2 -g 1 "${nt_extra[@]}")
    local sweep_args=(sweep --min-bytes 8 --max-bytes "$sweep_max" --iters 20 --warmup-iters 5)
    rm -f "$out/bench_nccl_sweep_$label.json" "$out/nccl-tests-all-reduce-$label.log" "$out/nccl-compare-$label.md"
    if [ -x "$bench_nccl" ]; then
      step "mpirun -np $ranks bench_nccl sweep, $label (cudrv and raw NCCL, 8 B to $sweep_max)" \
        "bench-nccl-sweep-$label.log" 420 mpirun -np "$ranks" "$@" "$bench_nccl" "${sweep_args[@]}" \
        --json "$out/bench_nccl_sweep_$label.json"
      grep -E '^\| *(8 B|64 MiB|256 MiB|1 GiB) *\|' "$out/bench-nccl-sweep-$label.log" | tee -a "$out/summary.txt"
    else
      skip "bench_nccl sweep, $label" "$bench_nccl not built"
    fi
    if nccl_tests_ready; then
      step "mpirun -np $ranks all_reduce_perf (nccl-tests), $label: ${nt_args[*]}" "nccl-tests-all-reduce-$label.log" 300 \
        mpirun -np "$ranks" "$@" "$nccl_tests/all_reduce_perf" "${nt_args[@]}"
      grep -E '^# (nccl-tests version|Using devices)|^# +Rank|Avg bus bandwidth|Out of bounds' \
        "$out/nccl-tests-all-reduce-$label.log" | tee -a "$out/summary.txt"
      # nccl-tests checks every size (-c 1) and ends with "# Out of bounds values : 0 OK".
      grep -qE '^# Out of bounds values *: 0 OK' "$out/nccl-tests-all-reduce-$label.log"
      record "all_reduce_perf $label: no wrong elements" $?
    fi
    compare_pair "$label" "nccl-tests-all-reduce-$label.log" "bench_nccl_sweep_$label.json" "$ranks"
  }

  # ncclCommRevoke came with NCCL 2.28.9: where the system's NCCL is older (the fault test then takes
  # the path without revoke, shrink_mode::abort alone, and the revoke cases skip), those run again with
  # a newer NCCL found here (REVOKE_NCCL names one; else the nvidia-nccl wheel of a Python, as PyTorch's).
  revoke_nccl=${REVOKE_NCCL:-}
  if [ -z "$revoke_nccl" ]; then
    for lib in /opt/*/.venv/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2 \
               /usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2; do
      # (grep without -q: with pipefail, an early exit of grep would fail the pipe by nm's SIGPIPE)
      if [ -f "$lib" ] && nm -D "$lib" 2>/dev/null | grep -w ncclCommRevoke > /dev/null; then revoke_nccl=$lib; break; fi
    done
  fi

  if part tests; then
    step "cudrv_multigpu_tests: one process over $ngpu GPUs (ncclCommInitAll), every case" multigpu-tests.log 300 \
      "$mgpu/cudrv_multigpu_tests"
    grep -E "test cases|assertions" "$out/multigpu-tests.log" | tee -a "$out/summary.txt"
    step "mpirun -np $ngpu cudrv_nccl_mpi_tests (one rank per GPU)" nccl-mpi-tests.log 400 \
      "${mpi[@]}" "$mgpu/cudrv_nccl_mpi_tests"
    grep -E "test cases|assertions" "$out/nccl-mpi-tests.log" | sort | uniq -c | tee -a "$out/summary.txt"
    if [ -n "$revoke_nccl" ]; then  # the revoke cases again, with an NCCL that has ncclCommRevoke
      step "cudrv_multigpu_tests, revoke then shrink, with CUDRV_LIBNCCL=$revoke_nccl" multigpu-tests-revoke.log 200 \
        env CUDRV_LIBNCCL="$revoke_nccl" "$mgpu/cudrv_multigpu_tests" "multigpu: revoke then shrink a live communicator"
      grep -E "test cases|assertions|SKIPPED" "$out/multigpu-tests-revoke.log" | tee -a "$out/summary.txt"
      step "mpirun -np $ngpu cudrv_nccl_mpi_tests, revoke then shrink, with CUDRV_LIBNCCL=$revoke_nccl" \
        nccl-mpi-tests-revoke.log 200 "${mpi[@]}" -x CUDRV_LIBNCCL="$revoke_nccl" "$mgpu/cudrv_nccl_mpi_tests" \
        "multigpu mpi: revoke then shrink a live communicator"
      grep -E "test cases|assertions|NOTE" "$out/nccl-mpi-tests-revoke.log" | sort | uniq -c | tee -a "$out/summary.txt"
    fi
    step "GPU tests that need two devices ([needs-2-gpus])" two-gpu-tests.log 300 "$build/tests/cudrv_gpu_tests" "[needs-2-gpus]"
    grep -E "test cases|assertions" "$out/two-gpu-tests.log" | tee -a "$out/summary.txt"
    step "IPC tests: producer on device 0, consumer on device 1" ipc-tests.log 300 "$build/tests/cudrv_gpu_tests" "[ipc]"
    grep -E "test cases|assertions|producer death" "$out/ipc-tests.log" | tee -a "$out/summary.txt"
    if [ -x "$ex/example_ipc_producer_consumer" ]; then
      step "example_ipc_producer_consumer across two GPUs" example-ipc.log 120 "$ex/example_ipc_producer_consumer"
      tail -n 2 "$out/example-ipc.log" | tee -a "$out/summary.txt"
    fi
    timeout 60 "$build/tools/cudrv-query/cudrv-query" --p2p > "$out/query-p2p.txt" 2>&1
    record "cudrv-query --p2p" $?
    timeout 60 "$build/tools/cudrv-query/cudrv-query" --p2p --json > "$out/query-p2p.json" 2> /dev/null
    record "cudrv-query --p2p --json" $?
    cat "$out/query-p2p.txt" >> "$out/summary.txt"
  fi

  if part fault; then
    for mode in absent mid shrink; do
      step "mpirun -np $ngpu cudrv_nccl_fault_test --mode $mode (the last rank dies)" "nccl-fault-$mode.log" 200 \
        "${mpi[@]}" ${fault_flags:+"${fault_flags[@]}"} "$mgpu/cudrv_nccl_fault_test" --mode "$mode" \
        --detect-seconds "${FAULT_DETECT_SECONDS:-20}"
      grep -E "FAULT TEST" "$out/nccl-fault-$mode.log" | tee -a "$out/summary.txt"
      if ! grep -q "FAULT TEST PASSED" "$out/nccl-fault-$mode.log" || grep -q "FAULT TEST FAILED" "$out/nccl-fault-$mode.log"; then
        record "fault test $mode: a survivor's verdict" 1
      fi
    done
    if [ -n "$revoke_nccl" ]; then
      step "mpirun -np $ngpu cudrv_nccl_fault_test --mode shrink with CUDRV_LIBNCCL=$revoke_nccl (revoke, then shrink)" \
        nccl-fault-shrink-revoke.log 200 \
        "${mpi[@]}" -x CUDRV_LIBNCCL="$revoke_nccl" ${fault_flags:+"${fault_flags[@]}"} "$mgpu/cudrv_nccl_fault_test" \
        --mode shrink --detect-seconds "${FAULT_DETECT_SECONDS:-20}"
      grep -E "FAULT TEST" "$out/nccl-fault-shrink-revoke.log" | tee -a "$out/summary.txt"
      if ! grep -q "revoke() returned" "$out/nccl-fault-shrink-revoke.log" ||
         grep -q "FAULT TEST FAILED" "$out/nccl-fault-shrink-revoke.log"; then
        record "fault test shrink with revoke: a survivor's verdict" 1
      fi
    else
      echo "fault test shrink with revoke: no NCCL with ncclCommRevoke (2.28.9 or newer) here; set REVOKE_NCCL" | tee -a "$out/summary.txt"
    fi
  fi

  if part memcheck; then
    echo "== compute-sanitizer memcheck --leak-check full: cudrv_multigpu_tests over $ngpu GPUs (NCCL's kernels not checked)" | tee -a "$out/summary.txt"
    t0=$SECONDS
    CUDRV_TEST_NCCL_SMALL=1 CUDRV_TEST_TIMEOUT_SCALE=20 timeout -k 30 400 compute-sanitizer --tool memcheck "${san_procs[@]}" "${nccl_kernels[@]}" \
      --leak-check full --report-api-errors no --error-exitcode 99 "$mgpu/cudrv_multigpu_tests" > "$out/multigpu-memcheck.log" 2>&1
    rc=$?
    echo "exit code $rc, $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
    record "memcheck of cudrv_multigpu_tests over $ngpu GPUs" "$rc"
    grep -E "ERROR SUMMARY|LEAK SUMMARY|test cases|assertions" "$out/multigpu-memcheck.log" | tee -a "$out/summary.txt"
    step "compute-sanitizer memcheck: GPU tests that need two devices" two-gpu-memcheck.log 300 \
      compute-sanitizer --tool memcheck "${san_procs[@]}" --leak-check full --error-exitcode 99 \
      "$build/tests/cudrv_gpu_tests" "[needs-2-gpus]"
    grep -E "ERROR SUMMARY|LEAK SUMMARY|test cases|assertions" "$out/two-gpu-memcheck.log" | tee -a "$out/summary.txt"
  fi

  if part examples; then
    step "mpirun -np $ngpu example_mpi_sum" mpi-sum.log 120 "${mpi[@]}" "$ex/example_mpi_sum"
    step "mpirun -np $ngpu example_mpi_sum --nccl" mpi-sum-nccl.log 120 "${mpi[@]}" "$ex/example_mpi_sum" --nccl
    step "mpirun -np $ngpu example_mpi_pi" mpi-pi.log 120 "${mpi[@]}" "$ex/example_mpi_pi"
    step "mpirun -np $ngpu example_heat_halo (three exchanges)" heat-halo.log 180 "${mpi[@]}" "$ex/example_heat_halo"
    step "example_multi_gpu over $ngpu GPUs" multi-gpu.log 120 "$ex/example_multi_gpu"
    for log in mpi-sum mpi-sum-nccl mpi-pi heat-halo multi-gpu; do
      grep -E '^\{' "$out/$log.log" | tee -a "$out/summary.txt"
    done
  fi

  if part bench; then
    step "mpirun -np $ngpu bench_nccl all (sweep and host cost, one rank per GPU)" bench-nccl-mpi.log 420 \
      "${mpi[@]}" "$bench_nccl" all --json "$out/bench_nccl_np$ngpu.json"
    tail -n 40 "$out/bench-nccl-mpi.log" | tee -a "$out/summary.txt"
    step "bench_nccl peer (one process, every ordered pair of GPUs)" bench-nccl-peer.log 300 \
      "$bench_nccl" peer --json "$out/bench_nccl_peer.json"
    tail -n 20 "$out/bench-nccl-peer.log" | tee -a "$out/summary.txt"
  fi

  if part scaling; then
    # heat_halo from 1 to N ranks: strong scaling (the same grid split over more GPUs) and weak scaling
    # (the same cells per GPU), NCCL and staged exchanges; one JSON line per run and method.
    cells=${SCALING_CELLS:-67108864}
    steps=${SCALING_STEPS:-500}
    : > "$out/scaling.jsonl"
    for ((k = 1; k <= ngpu; k++)); do
      for kind in strong weak; do
        c=$cells
        [ "$kind" = weak ] && c=$((cells * k))
        t0=$SECONDS
        timeout -k 30 300 mpirun -np "$k" "${mpi_opts[@]}" "$ex/example_heat_halo" "$c" "$steps" \
          --exchange all > "$out/scaling-$kind-$k.log" 2>&1
        rc=$?
        echo "heat_halo $kind scaling, $k ranks: exit code $rc, $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
        record "heat_halo $kind scaling, $k ranks" "$rc"
        grep -E '^\{' "$out/scaling-$kind-$k.log" | sed "s/^{/{\"scaling\": \"$kind\", \"cells\": $c, \"steps\": $steps, /" >> "$out/scaling.jsonl"
      done
    done
    echo "== heat_halo scaling (scaling.jsonl)" | tee -a "$out/summary.txt"
    tee -a "$out/summary.txt" < "$out/scaling.jsonl"
  fi

  # nccl-tests beside cudrv: bench_nccl's sweep and all_reduce_perf with 2 and with N ranks (NVLink).
  # The same pair in one process over k GPUs: bench_nccl --no-mpi --devices k, all_reduce_perf -g k.
  oneproc_pair() {
    local k=$1 sweep_max=$2 label="g$1"
    rm -f "$out/bench_nccl_sweep_$label.json" "$out/nccl-tests-all-reduce-$label.log"
    if [ -x "$bench_nccl" ]; then
      step "bench_nccl sweep, one process over $k GPUs (8 B to $sweep_max)" "bench-nccl-sweep-$label.log" 420 \
        "$bench_nccl" sweep --no-mpi --devices "$k" --min-bytes 8 --max-bytes "$sweep_max" --iters 20 --warmup-iters 5 \
        --json "$out/bench_nccl_sweep_$label.json"
      grep -E '^\| *(8 B|64 MiB|256 MiB|1 GiB) *\|' "$out/bench-nccl-sweep-$label.log" | tee -a "$out/summary.txt"
    fi
    if nccl_tests_ready; then
      step "all_reduce_perf (nccl-tests), one process over $k GPUs" "nccl-tests-all-reduce-$label.log" 300 \
        "$nccl_tests/all_reduce_perf" -b 8 -e "$sweep_max" -f 2 -g "$k" "${nt_extra[@]}"
      grep -qE '^# Out of bounds values *: 0 OK' "$out/nccl-tests-all-reduce-$label.log"
      record "all_reduce_perf $label: no wrong elements" $?
    fi
    compare_pair "$label" "nccl-tests-all-reduce-$label.log" "bench_nccl_sweep_$label.json" "$k"
  }

  ranks_list=(2)
  [ "$ngpu" -gt 2 ] && ranks_list+=("$ngpu")
  if part nccl-tests; then
    for k in "${ranks_list[@]}"; do
      allreduce_pair "np$k" "$k" "${SWEEP_MAX_BYTES:-1G}" "${mpi_opts[@]}"
    done
  fi
  if part nccl-tests-oneproc; then
    for k in "${ranks_list[@]}"; do
      oneproc_pair "$k" "${SWEEP_MAX_BYTES:-1G}"
    done
  fi
  # median_pair <label> <ranks> <bytes> <iterations> <mpirun options and wrapper...>: $LATENCY_ROUNDS
  # (default 5) alternating runs of bench_nccl's sweep and all_reduce_perf at one size, then the medians
  # of the times and their ratios (bench_nccl's table: raw time is the third column, cudrv's the fourth;
  # all_reduce_perf's out-of-place time the sixth). At one size a ratio of times is the inverse of the
  # ratio of bus bandwidths.
  median_pair() {
    local label=$1 ranks=$2 bytes=$3 iters=$4 r
    shift 4
    local warm=$((iters / 10 > 5 ? iters / 10 : 5))
    : > "$out/median-$label.txt"
    for ((r = 1; r <= ${LATENCY_ROUNDS:-5}; r++)); do
      step "mpirun -np $ranks bench_nccl sweep at $bytes B, $iters iterations, $label (round $r)" \
        "median-bench-$label-$r.log" 180 mpirun -np "$ranks" "$@" "$bench_nccl" sweep --min-bytes "$bytes" \
        --max-bytes "$bytes" --iters "$iters" --warmup-iters "$warm"
      awk -F'|' '/^\| [0-9]+ (B|KiB|MiB|GiB) \|/ {gsub(/[ us]/, "", $4); gsub(/[ us]/, "", $5); print "bench", $4, $5; exit}' \
        "$out/median-bench-$label-$r.log" >> "$out/median-$label.txt"
      if nccl_tests_ready > /dev/null; then
        step "mpirun -np $ranks all_reduce_perf at $bytes B, -n $iters, $label (round $r)" \
          "median-nccl-tests-$label-$r.log" 180 mpirun -np "$ranks" "$@" "$nccl_tests/all_reduce_perf" \
          -b "$bytes" -e "$bytes" -g 1 -n "$iters" -w "$warm" -c 1
        awk -v b="$bytes" '$1 == b && $3 == "float" {print "nccl-tests", $6; exit}' \
          "$out/median-nccl-tests-$label-$r.log" >> "$out/median-$label.txt"
      fi
    done
    python3 - "$out/median-$label.txt" "$ranks" "$bytes" << 'PY' | tee -a "$out/summary.txt"
import statistics, sys
raw, cudrv, nt = [], [], []
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "bench" and len(f) == 3:
        raw.append(float(f[1])); cudrv.append(float(f[2]))
    elif f[0] == "nccl-tests" and len(f) == 2:
        nt.append(float(f[1]))
if not cudrv:
    sys.exit("no bench_nccl figures")
c, r = statistics.median(cudrv), statistics.median(raw)
line = (f"{sys.argv[3]} B all-reduce, {sys.argv[2]} ranks, median of {len(cudrv)} runs: cudrv {c:.2f} us, "
        f"raw NCCL {r:.2f} us (time cudrv/raw {c / r:.3f})")
if nt:
    n = statistics.median(nt)
    line += (f", nccl-tests {n:.2f} us (median of {len(nt)}): time cudrv/nccl-tests {c / n:.3f} "
             f"(busbw {n / c:.3f}), raw/nccl-tests {r / n:.3f}")
print(line)
PY
    record "medians $label" "${PIPESTATUS[0]}"
  }
  # 8 B latency, cudrv against nccl-tests, with 2 and N ranks: alternating long runs, medians.
  if part latency; then
    for k in "${ranks_list[@]}"; do
      median_pair "latency-np$k" "$k" 8 1000 "${mpi_opts[@]}"
    done
  fi

  # all-reduce through a symmetric window against plain memory (bench_nccl window), then nccl-tests' own
  # symmetric registration (all_reduce_perf -R 2: ncclMemAlloc and ncclCommWindowRegister) against its
  # plain cudaMalloc buffers (-R 0), to tell NCCL's choice of kernels from cudrv's.
  if part window; then
    for k in "${ranks_list[@]}"; do
      step "mpirun -np $k bench_nccl window (symmetric window against plain memory)" "bench-nccl-window-np$k.log" 300 \
        mpirun -np "$k" "${mpi_opts[@]}" "$bench_nccl" window --json "$out/bench_nccl_window_np$k.json"
      tail -n 30 "$out/bench-nccl-window-np$k.log" | tee -a "$out/summary.txt"
      if nccl_tests_ready; then
        for reg in 0 2; do
          step "mpirun -np $k all_reduce_perf -R $reg (nccl-tests; 2: symmetric window)" \
            "nccl-tests-window-R$reg-np$k.log" 300 mpirun -np "$k" "${mpi_opts[@]}" "$nccl_tests/all_reduce_perf" \
            -b 64 -e "${SWEEP_MAX_BYTES:-1G}" -f 2 -g 1 -R "$reg" "${nt_extra[@]}"
          grep -E '^ +(64|1048576|2097152|67108864|1073741824) ' "$out/nccl-tests-window-R$reg-np$k.log" | tee -a "$out/summary.txt"
        done
      fi
    done
  fi

  # The network path: the multi-rank tests and the fault path through NCCL's socket transport.
  if part net; then
    echo "== the network path on one host: $net_env_text" | tee -a "$out/summary.txt"
    if [ -x "$bench_nccl" ]; then
      # One short run with NCCL's log on, to show which transport each channel took.
      step "mpirun -np $ngpu bench_nccl sweep to 1 MiB with NCCL_DEBUG=INFO (the transport's proof)" net-debug.log 180 \
        "${mpi[@]}" "${net_opts[@]}" -x NCCL_DEBUG=INFO -x NCCL_DEBUG_SUBSYS=INIT,ENV,NET \
        ${net_wrap[@]+"${net_wrap[@]}"} "$bench_nccl" sweep --max-bytes 1M --rounds 3
      via_net=$(grep -c 'via NET/Socket' "$out/net-debug.log")
      via_local=$(grep -cE 'via (P2P|SHM)/' "$out/net-debug.log")
      grep -m 1 'Using network' "$out/net-debug.log" | tee -a "$out/summary.txt"
      grep -m 1 'NET/Socket : Using' "$out/net-debug.log" | tee -a "$out/summary.txt"
      grep -m 2 'NCCL_HOSTID set by environment' "$out/net-debug.log" | tee -a "$out/summary.txt"
      grep -m "$ngpu" ' nNodes ' "$out/net-debug.log" | tee -a "$out/summary.txt"
      grep -m 4 'via NET/Socket' "$out/net-debug.log" | tee -a "$out/summary.txt"
      echo "transport: $via_net channel connections via NET/Socket, $via_local via P2P or SHM" | tee -a "$out/summary.txt"
      [ "$via_net" -gt 0 ] && [ "$via_local" = 0 ]
      record "NCCL's log shows the socket transport only" $?
    else
      skip "the transport's proof" "$bench_nccl not built"
    fi
    step "mpirun -np $ngpu cudrv_nccl_mpi_tests through the socket transport" net-nccl-mpi-tests.log 500 \
      "${mpi[@]}" "${net_opts[@]}" ${net_wrap[@]+"${net_wrap[@]}"} "$mgpu/cudrv_nccl_mpi_tests" ${NET_TESTS_FILTER:+"$NET_TESTS_FILTER"}
    grep -E "test cases|assertions" "$out/net-nccl-mpi-tests.log" | sort | uniq -c | tee -a "$out/summary.txt"
    # A lost rank over sockets: its peers' connections break, unlike NVLink's, where nothing does.
    step "mpirun -np $ngpu cudrv_nccl_fault_test --mode mid through the socket transport" net-nccl-fault-mid.log 200 \
      "${mpi[@]}" "${net_opts[@]}" ${fault_flags:+"${fault_flags[@]}"} ${net_wrap[@]+"${net_wrap[@]}"} \
      "$mgpu/cudrv_nccl_fault_test" --mode mid --detect-seconds "${FAULT_DETECT_SECONDS:-20}"
    grep -E "FAULT TEST" "$out/net-nccl-fault-mid.log" | tee -a "$out/summary.txt"
    if ! grep -q "FAULT TEST PASSED" "$out/net-nccl-fault-mid.log" || grep -q "FAULT TEST FAILED" "$out/net-nccl-fault-mid.log"; then
      record "fault test mid through the socket transport: a survivor's verdict" 1
    fi
  fi

  # The network path measured: bench_nccl's sweep and all_reduce_perf through the socket transport.
  if part net-bench; then
    echo "== the network path on one host, measured: $net_env_text" | tee -a "$out/summary.txt"
    allreduce_pair "net-np$ngpu" "$ngpu" "${NET_SWEEP_MAX_BYTES:-${SWEEP_MAX_BYTES:-1G}}" "${mpi_opts[@]}" "${net_opts[@]}" \
      ${net_wrap[@]+"${net_wrap[@]}"}
  fi
  # The same pair at a few sizes through the socket transport, alternating runs, medians: loopback TCP
  # swings by +-25% between single runs.
  if part net-median; then
    echo "== the network path on one host, medians: $net_env_text" | tee -a "$out/summary.txt"
    for bytes in ${NET_MEDIAN_SIZES:-8 1048576 16777216 67108864}; do
      iters=50
      [ "$bytes" -le 65536 ] && iters=1000
      median_pair "net-np$ngpu-$bytes" "$ngpu" "$bytes" "$iters" "${mpi_opts[@]}" "${net_opts[@]}" \
        ${net_wrap[@]+"${net_wrap[@]}"}
    done
  fi
  part_end
  echo "== scale-out part times: $(printf '%s, ' "${part_times[@]}" | sed 's/, $//')" | tee -a "$out/summary.txt"
fi

if [ "$stress" = 1 ]; then
  # The stress program: threads x seconds of streams, events, pools, launches, graphs and cached
  # compiles, every result checked; exit status 3 on any error or mismatch.
  stress_threads=${STRESS_THREADS:-16}
  stress_bin=$build/tests/cudrv_stress
  echo "== cudrv_stress: $stress_threads threads x ${STRESS_SECONDS:-60} s" | tee -a "$out/summary.txt"
  if [ -x "$stress_bin" ]; then
    "$stress_bin" --threads "$stress_threads" --seconds "${STRESS_SECONDS:-60}" > "$out/stress.log" 2>&1
    rc=$?
    grep '^{' "$out/stress.log" | tail -n 1 > "$out/stress.json"
    tail -n 16 "$out/stress.log" | tee -a "$out/summary.txt"
    echo "exit code $rc" | tee -a "$out/summary.txt"
    if grep -q "^cudrv_stress: SKIPPED" "$out/stress.log"; then  # no driver or device: exit status 0
      skipped=$((skipped + 1))
    else
      record "cudrv_stress" "$rc"
    fi
  else
    echo "-- cudrv_stress: not built" | tee -a "$out/summary.txt"
    skipped=$((skipped + 1))
  fi
  # The same under ThreadSanitizer (host code of cudrv and the program instrumented), reports counted.
  # tsan_run <title> <log> <what to record> <seconds> [arguments...]: halt_on_error=0 keeps the run
  # going after a report, so that all are counted; exitcode 66 marks a run that had any.
  build_tsan=${BUILD_TSAN:-$root/build-tsan}
  tsan_run() {
    local title=$1 log=$2 what=$3 seconds=$4
    shift 4
    echo "== ThreadSanitizer: cudrv_stress $title, $stress_threads threads x $seconds s" | tee -a "$out/summary.txt"
    LD_LIBRARY_PATH="$build_tsan/tsan-runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      TSAN_OPTIONS="suppressions=$root/tests/stress/tsan.supp halt_on_error=0 exitcode=66 print_suppressions=1 second_deadlock_stack=1" \
      "$build_tsan/tests/cudrv_stress" --threads "$stress_threads" --seconds "$seconds" "$@" > "$out/$log" 2>&1
    local code=$? reports
    reports=$(grep -c "WARNING: ThreadSanitizer" "$out/$log")
    tail -n 14 "$out/$log" | grep -v "^$" | tee -a "$out/summary.txt"
    grep -E "^FATAL: ThreadSanitizer|ThreadSanitizer: reported|Matched [0-9]+ suppressions|^ *[0-9]+ (race|thread|mutex|deadlock|called_from_lib|signal):" \
      "$out/$log" | head -n 12 | tee -a "$out/summary.txt"
    echo "exit code $code, $reports ThreadSanitizer reports" | tee -a "$out/summary.txt"
    if [ "$code" = 0 ] && [ "$reports" != 0 ]; then code=66; fi
    if [ "$code" = 0 ] && grep -q "^cudrv_stress: SKIPPED" "$out/$log"; then
      skipped=$((skipped + 1))
    else
      record "$what" "$code"
    fi
  }
  if [ -x "$build_tsan/tests/cudrv_stress" ]; then
    tsan_run "against the driver" stress-tsan.log "cudrv_stress under ThreadSanitizer" "${STRESS_TSAN_SECONDS:-30}"
    if [ -f "$build_tsan/tests/libcudrv_test_fake_cuda.so" ]; then
      CUDRV_LIBCUDA="$build_tsan/tests/libcudrv_test_fake_cuda.so" tsan_run "against the stand-in driver" \
        stress-tsan-fake.log "cudrv_stress under ThreadSanitizer, stand-in driver" 10 --device 1 \
        --verify-compiled text --kinds stream,event,alloc_default,alloc_pool,compile
    fi
  else
    echo "-- ThreadSanitizer: $build_tsan/tests/cudrv_stress not built (scripts/build-tsan.sh)" | tee -a "$out/summary.txt"
    skipped=$((skipped + 1))
  fi
fi

# --- issue 36: bandwidth: cudrv-query --bandwidth beside nvbandwidth, in one call ----------------------
if [ "$bandwidth" = 1 ]; then
  query=$build/tools/cudrv-query/cudrv-query
  nvb=${NVBANDWIDTH:-$build/nvbandwidth/nvbandwidth}
  bw_mib=${BANDWIDTH_SIZE_MIB:-512}
  bw_iters=${BANDWIDTH_ITERATIONS:-16}
  bw_samples=${BANDWIDTH_SAMPLES:-3}
  bw_tests=${BANDWIDTH_TESTS:-}
  echo "== bandwidth: cudrv-query --bandwidth and nvbandwidth, ${bw_mib} MiB, $bw_iters copies, $bw_samples samples" |
    tee -a "$out/summary.txt"
  if [ -x "$query" ]; then
    t0=$SECONDS
    "$query" --bandwidth --json --no-progress --bandwidth-size "${bw_mib}M" --bandwidth-iterations "$bw_iters" \
      --bandwidth-samples "$bw_samples" ${bw_tests:+--bandwidth-tests "$bw_tests"} \
      > "$out/bandwidth-cudrv.json" 2> "$out/bandwidth-cudrv.log"
    rc=$?
    record "cudrv-query --bandwidth" $rc
    echo "cudrv-query --bandwidth: exit code $rc, $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
    [ "$rc" = 0 ] || tail -n 5 "$out/bandwidth-cudrv.log" | tee -a "$out/summary.txt"
  else
    echo "-- cudrv-query: $query not built" | tee -a "$out/summary.txt"
    record "cudrv-query --bandwidth (not built)" 1
  fi
  if [ -x "$nvb" ]; then
    nvb_args=(-b "$bw_mib" -i "$bw_samples" --loopCount "$bw_iters")
    if [ -n "$bw_tests" ]; then
      nvb_tests=()
      for t in ${bw_tests//,/ }; do
        case $t in all_to_all_*) ;; *) nvb_tests+=("$t") ;; esac  # cudrv-query's own tests
      done
      [ ${#nvb_tests[@]} -gt 0 ] && nvb_args+=(-t "${nvb_tests[@]}")
    fi
    t0=$SECONDS
    "$nvb" "${nvb_args[@]}" > "$out/bandwidth-nvbandwidth.txt" 2>&1
    rc=$?
    record "nvbandwidth" $rc
    echo "nvbandwidth ${nvb_args[*]}: exit code $rc, $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
    "${BANDWIDTH_PYTHON:-python3}" "$root/scripts/bandwidth-compare.py" --nvbandwidth "$out/bandwidth-nvbandwidth.txt" \
      --cudrv "$out/bandwidth-cudrv.json" --markdown "$out/bandwidth-compare.md" --png "$out/bandwidth-d2d.png" \
      > "$out/bandwidth-compare.log" 2>&1
    record "bandwidth-compare.py" $?
    tee -a "$out/summary.txt" < "$out/bandwidth-compare.log"
  else
    echo "-- nvbandwidth: $nvb not built (scripts/build-nvbandwidth.sh): no comparison" | tee -a "$out/summary.txt"
    skipped=$((skipped + 1))
  fi
  # The view under memcheck, small, without the spin kernel (CUDRV_QUERY_BANDWIDTH_UNGATED: see the
  # views' pass above, which runs the spin kernel under memcheck): both copies, the split copy, the
  # chase, and the peer tests where there are peers; API errors fail the run.
  if [ "$sanitize" = 1 ] && [ -x "$query" ]; then
    CUDRV_QUERY_BANDWIDTH_UNGATED=1 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 \
      "$query" --bandwidth --no-progress --bandwidth-size 1M --bandwidth-iterations 1 --bandwidth-samples 1 --bandwidth-tests \
      host_to_device_memcpy_ce,host_to_device_memcpy_sm,device_to_host_bidirectional_memcpy_sm,host_device_latency_sm,device_to_device_memcpy_write_sm,device_to_device_latency_sm,all_to_all_memcpy_write_ce \
      > "$out/query-bandwidth-memcheck.log" 2>&1
    rc=$?
    echo "cudrv-query --bandwidth (1M) under memcheck: exit code $rc;" \
      "$(grep -E "ERROR SUMMARY" "$out/query-bandwidth-memcheck.log")" | tee -a "$out/summary.txt"
    record "cudrv-query bandwidth under memcheck" "$rc"
  fi
fi

if [ "$bench" = 1 ] && [ "$scaleout" = 0 ]; then
  for b in ${BENCHES:-bench_foundation bench_launch bench_compile_cache bench_graph bench_nvtx bench_query_startup bench_nccl bench_vmm bench_batch_copy}; do
    [ -x "$build/benchmarks/$b" ] || continue
    echo "== $b" | tee -a "$out/summary.txt"
    args=()
    # bench_nccl: the all-reduce sweep, the host cost of each collective and peer copies, with the
    # JSON that scripts/plot-allreduce.py draws.
    [ "$b" = bench_nccl ] && args=(all --json "$out/bench_nccl.json")
    NCCL_NVLS_ENABLE=0 "$build/benchmarks/$b" "${args[@]}" > "$out/$b.log" 2>&1
    record "$b" $?
    tail -n 20 "$out/$b.log" | tee -a "$out/summary.txt"
  done
fi
echo "== overall status $status" | tee -a "$out/summary.txt"
cat "$out/failures.txt" | tee -a "$out/summary.txt"
echo "$passed passed, $failed failed, $skipped skipped" | tee -a "$out/summary.txt"
exit $status
