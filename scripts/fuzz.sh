#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, a clang tree with CUDRV_FUZZ=ON) and runs each for a while,
# then prints, per target, the inputs tried and the findings. See docs/reliability.md, "Fuzzing".
#
#   scripts/fuzz.sh [-t SECONDS] [-j JOBS] [TARGET...]
#
#   -t SECONDS  how long each target runs (default 600: ten minutes)
#   -j JOBS     libFuzzer worker processes per target (default 1)
#   TARGET      fuzz_image, fuzz_cache_entry, fuzz_cache_deps, fuzz_query_args, fuzz_socket_frames,
#               fuzz_ipc_import, fuzz_inspect (default: all seven)
#
# Environment: BUILD the build tree (default ./build-fuzz, configured here when it has no cache;
# CMAKE_ARGS are added to that configure, e.g. a compiler launcher), CXX the compiler (default
# clang++). Each target's corpus grows in $BUILD/fuzz/work/<target>/corpus (the seeds in
# fuzz/corpus/<target> are only read); a crashing, leaking or timing-out input is written to
# $BUILD/fuzz/work/<target>/findings/ and its log to $BUILD/fuzz/work/<target>/fuzz.log. The last
# lines are one per target: "<target>: <N> inputs in <S> s, <F> findings". Exit status: 0 when no
# target found anything, 1 otherwise, 2 on a usage or build error.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build-fuzz}
seconds=600
jobs=1
while getopts "t:j:h" opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    j) jobs=$OPTARG ;;
    h) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "usage: $0 [-t SECONDS] [-j JOBS] [TARGET...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
targets=("$@")
if ((${#targets[@]} == 0)); then
  targets=(fuzz_image fuzz_cache_entry fuzz_cache_deps fuzz_query_args fuzz_socket_frames fuzz_ipc_import
    fuzz_inspect)  # issue 36: inspect
fi
if ! [[ $seconds =~ ^[0-9]+$ && $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz.sh: -t needs whole seconds and -j a positive count" >&2
  exit 2
fi

if [ ! -f "$build/CMakeCache.txt" ]; then
  # shellcheck disable=SC2086  # CMAKE_ARGS is a list of arguments
  cmake -S "$root" -B "$build" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" -DCUDRV_FUZZ=ON ${CMAKE_ARGS:-} ||
    { echo "fuzz.sh: configuring $build failed" >&2; exit 2; }
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" || { echo "fuzz.sh: the build failed" >&2; exit 2; }

# The sanitizer runtime of clang 14 misreads some dynamic TLS blocks and its leak checker then crashes
# (docs/reliability.md, "Sanitizers and compilers in CI"); CI runs with the same option.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}intercept_tls_get_addr=0"

summary=()
total_findings=0
for t in "${targets[@]}"; do
  work="$build/fuzz/work/$t"
  mkdir -p "$work/corpus" "$work/findings"
  echo "=== $t: $seconds s, $jobs worker(s) ==="
  start=$(date +%s)
  # -jobs runs workers that write fuzz-<n>.log in the current folder; one run logs to fuzz.log.
  (cd "$work" && rm -f fuzz-*.log &&
    if ((jobs > 1)); then
      "$build/fuzz/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$work/findings/" -jobs="$jobs" -workers="$jobs" "$work/corpus" "$root/fuzz/corpus/$t" \
        > fuzz.log 2>&1
      cat fuzz-*.log >> fuzz.log
    else
      "$build/fuzz/$t" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 -print_final_stats=1 \
        -artifact_prefix="$work/findings/" "$work/corpus" "$root/fuzz/corpus/$t" > fuzz.log 2>&1
    fi)
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  inputs=$(grep -h 'stat::number_of_executed_units' "$work/fuzz.log" | awk '{s += $2} END {print s + 0}')
  findings=$(find "$work/findings" -type f | wc -l)
  if ((rc != 0 && findings == 0)); then
    findings=1  # libFuzzer failed without writing an input (a crash at start-up, say)
  fi
  total_findings=$((total_findings + findings))
  tail -n 12 "$work/fuzz.log"
  find "$work/findings" -type f -printf '  finding: %p\n'
  summary+=("$t: $inputs inputs in $elapsed s, $findings findings (exit status $rc; corpus $(find "$work/corpus" -type f | wc -l) files)")
done
echo "=== summary ==="
printf '%s\n' "${summary[@]}"
((total_findings == 0))
