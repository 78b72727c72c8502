#!/usr/bin/env bash
# Runs the GPU tier on a machine with a GPU, from a build tree made elsewhere (or here):
#   1. ctest -L gpu (each test case in its own process, as CI-style runs do);
#   2. the whole GPU test binary under compute-sanitizer memcheck with leak checking, then the cases
#      that provoke no driver refusal on purpose with API errors reported and --error-exitcode; the
#      NCCL tests over all GPUs of one process and an MPI program with two ranks under memcheck;
#   3. cudrv-query's views, each also under compute-sanitizer (unless --no-sanitizer);
#   4. the examples at the sizes of examples/test-sizes.txt (also under the sanitizer's memcheck, API
#      errors reported, and racecheck for those that share memory) and (unless --no-bench) the
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
# Usage: scripts/gpu-suite.sh [--no-bench] [--no-sanitizer] [--only tests|examples]
#   --only tests: ctest -L gpu, the test binary's sanitizer passes and cudrv-query's views;
#   --only examples: the examples (and the benchmarks unless --no-bench). Together, the two parts are
#   the whole suite, for machines whose calls are too short for all of it at once.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
out=${OUT:-$root/gpu-suite-logs}
mkdir -p "$out"
bench=1
sanitize=1
tests=1
examples=1
while [ $# -gt 0 ]; do
  case $1 in
    --no-bench) bench=0 ;;
    --no-sanitizer) sanitize=0 ;;
    --only)
      shift
      case ${1:-} in
        tests) examples=0; bench=0 ;;
        examples) tests=0 ;;
        *) echo "gpu-suite: --only takes tests or examples" >&2; exit 2 ;;
      esac ;;
    *) echo "gpu-suite: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

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
echo "== nvidia-smi" | tee "$out/summary.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$out/summary.txt"

if [ "$tests" = 1 ]; then
echo "== ctest -L gpu" | tee -a "$out/summary.txt"
ctest --test-dir "$build" -L gpu --output-on-failure --timeout 120 > "$out/ctest-gpu.log" 2>&1
count_ctest "$out/ctest-gpu.log"
grep -E "tests passed|tests failed|Total Test time" "$out/ctest-gpu.log" | tee -a "$out/summary.txt"
grep -E "\*\*\*(Failed|Exception)|Not Run|\(Failed\)" "$out/ctest-gpu.log" | head -40 | tee -a "$out/summary.txt"

# The sanitizer follows only the process it starts: the [ipc] cases and example_ipc_producer_consumer
# start this binary again as a child (a consumer, a producer killed on purpose), which the default (all
# processes) would also instrument, with each child's failing calls (a consumer whose producer was
# killed) changing its exit status and teardown of IPC imports under the tool slowed to the tests'
# timeouts. ctest runs those children without the tool.
san_procs=(--target-processes application-only)

if [ "$sanitize" = 1 ]; then
  # 1. Memory errors and leaks over the whole binary but the NCCL cases. The [bad-input], [bad_input] and
  #    [driver_error] cases make the driver refuse calls on purpose, so API errors are not counted in this
  #    pass; the [misuse] cases destroy a context before what was made in it, which the sanitizer counts
  #    as leaks, so they are left out (ctest runs them). The [nccl] cases run in pass 1b: NCCL starts the
  #    CUDA runtime it carries, whose exit handler releases the primary context before the test files'
  #    static libraries are unloaded, and the sanitizer would count their module globals as leaked.
  # leak_pass <title> <log name> <what to record> <program and arguments...>: memcheck with leak checking,
  # API errors not counted (see each pass for why).
  leak_pass() {
    local title=$1 log=$2 what=$3
    shift 3
    echo "== compute-sanitizer memcheck --leak-check full, $title" | tee -a "$out/summary.txt"
    compute-sanitizer --tool memcheck "${san_procs[@]}" --leak-check full --report-api-errors no --error-exitcode 99 "$@" \
      > "$out/$log" 2>&1
    local code=$?
    echo "exit code $code" | tee -a "$out/summary.txt"
    record "$what" "$code"
    grep -E "ERROR SUMMARY|LEAK SUMMARY|test cases|assertions" "$out/$log" | tee -a "$out/summary.txt"
  }
  leak_pass "whole binary but ~[misuse]~[nccl] (API errors the tests provoke on purpose not counted)" \
    sanitizer-memcheck.log "memcheck of cudrv_gpu_tests" "$build/tests/cudrv_gpu_tests" "~[misuse]~[nccl]"
  # 1b. The NCCL cases on their own, memory errors and leaks (API errors: see pass 2).
  leak_pass "[nccl] (NCCL's probing API errors not counted)" sanitizer-memcheck-nccl.log \
    "memcheck of cudrv_gpu_tests [nccl]" "$build/tests/cudrv_gpu_tests" "[nccl]"

  # 2. API errors too, as users run the sanitizer in CI (--error-exitcode, API errors reported): every
  #    case that does not provoke a refusal on purpose must make no failing driver call at all.
  #    -d yes prints each case's name after it, so a reported call can be traced to its case.
  #    The [nccl] cases are left out of this pass: NCCL itself probes its kernels with
  #    cudaFuncGetAttributes at communicator creation and gets cudaErrorNoKernelImageForDevice for the
  #    architectures it was not built for; those failing calls are NCCL's, not cudrv's (passes 1b and 3
  #    check the NCCL cases for memory errors and leaks).
  echo "== compute-sanitizer memcheck --error-exitcode, API errors reported, ~[bad-input]~[bad_input]~[driver_error]~[nccl]" | tee -a "$out/summary.txt"
  compute-sanitizer --tool memcheck "${san_procs[@]}" --error-exitcode 99 \
    "$build/tests/cudrv_gpu_tests" "~[bad-input]~[bad_input]~[driver_error]~[nccl]" -d yes > "$out/sanitizer-api-errors.log" 2>&1
  rc=$?
  echo "exit code $rc" | tee -a "$out/summary.txt"
  record "memcheck with API errors of cudrv_gpu_tests" "$rc"
  grep -E "ERROR SUMMARY|test cases|assertions|Program hit" "$out/sanitizer-api-errors.log" | sort | uniq -c | head -40 | tee -a "$out/summary.txt"

  # 3. Scale-out: NCCL over every GPU of one process, and the MPI programs with two ranks on this
  #    machine's GPUs (sharing one where there is one), memory errors and leaks; API errors are not
  #    counted where NCCL runs (its own probing calls, see pass 2).
  mgpu="$build/tests/multigpu/cudrv_multigpu_tests"
  if [ -x "$mgpu" ]; then
    CUDRV_TEST_NCCL_SMALL=1 CUDRV_TEST_TIMEOUT_SCALE=20 leak_pass \
      "cudrv_multigpu_tests (NCCL over all GPUs of one process; NCCL's probing API errors not counted)" \
      sanitizer-multigpu.log "memcheck of cudrv_multigpu_tests" "$mgpu"
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
for spec in "summary|" "details|--details" "p2p|--p2p" "bench|--bench --no-progress"; do
  name=${spec%%|*}
  read -r -a args <<< "${spec#*|}"
  "$query" "${args[@]}" > "$out/query-$name.txt" 2>&1
  record "cudrv-query $name" $?
  "$query" "${args[@]}" --json > "$out/query-$name.json" 2> /dev/null
  record "cudrv-query $name --json" $?
  if [ "$sanitize" = 1 ]; then
    [ "$name" = bench ] && args+=(--bench-size 8M --bench-iterations 2 --bench-trials 2)
    compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 "$query" "${args[@]}" \
      > "$out/query-$name-memcheck.log" 2>&1
    rc=$?
    echo "cudrv-query ${args[*]:-(summary)} under memcheck: exit code $rc;" \
      "$(grep -E "ERROR SUMMARY" "$out/query-$name-memcheck.log")" | tee -a "$out/summary.txt"
    record "cudrv-query $name under memcheck" "$rc"
  fi
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

fi

if [ "$bench" = 1 ]; then
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
