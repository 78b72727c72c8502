#!/usr/bin/env bash
# Runs clang-tidy 14 with the tree's .clang-tidy over every source of src/, using the compile commands of
# a build tree (CMAKE_EXPORT_COMPILE_COMMANDS, which the top CMakeLists.txt turns on).
#   scripts/tidy.sh [BUILD_DIR] [FILE...]    default build-clang, every src/**/*.cpp
# Runs CUDRV_TIDY_JOBS files at a time (default 2); fails when clang-tidy reports anything (the config
# makes every warning an error). CLANG_TIDY names the binary (default clang-tidy-14).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build="${1:-build-clang}"
shift || true
clang_tidy="${CLANG_TIDY:-clang-tidy-14}"
jobs="${CUDRV_TIDY_JOBS:-2}"
command -v "$clang_tidy" >/dev/null 2>&1 ||
  { printf 'tidy: %s not found (scripts/install-deps.sh installs clang-tidy-14)\n' "$clang_tidy" >&2; exit 2; }
[[ -f "$build/compile_commands.json" ]] ||
  { printf 'tidy: %s/compile_commands.json is missing: configure that tree first\n' "$build" >&2; exit 2; }
files=("$@")
if ((${#files[@]} == 0)); then
  mapfile -t files < <(git ls-files 'src/*.cpp')
fi
printf 'tidy: %s over %d files (%d at a time), compile commands of %s\n' "$("$clang_tidy" --version | sed -n 's/.*version /version /p' | head -n 1)" \
  "${#files[@]}" "$jobs" "$build"
# Each file's report goes to its own log, printed when the file is done; xargs fails if any file did.
printf '%s\0' "${files[@]}" |
  xargs -0 -n 1 -P "$jobs" sh -c 'out="$("$0" -p "$1" --quiet "$2" 2>&1)"; rc=$?; if [ $rc -ne 0 ]; then printf "%s\n" "$out"; fi; exit $((rc != 0))' "$clang_tidy" "$build"
printf 'tidy: no finding\n'
