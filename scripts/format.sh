#!/usr/bin/env bash
# Formats cudrv's C++ and CUDA sources with clang-format 14 and the tree's .clang-format.
#   scripts/format.sh --check   lists the files clang-format would change and how many lines, and fails
#                               (status 1) when there is one; changes nothing (CI runs this: .ci/run)
#   scripts/format.sh --apply   rewrites those files in place
#   scripts/format.sh --check FILE...   the same for the named files only
# The files: every tracked *.cpp, *.hpp, *.h, *.cu and *.cuh, except the generated ones (scripts/gen/ writes
# them; their freshness tests compare them with the generators' output byte for byte) and the fixtures
# whose line layout is what a test checks.
# CLANG_FORMAT names the binary (default clang-format-14; scripts/install-deps.sh installs it). Another
# major version formats differently, so the check refuses one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

mode="${1:-}"
case "$mode" in
  --check | --apply) shift ;;
  *) printf 'usage: scripts/format.sh --check|--apply [FILE...]\n' >&2; exit 2 ;;
esac

clang_format="${CLANG_FORMAT:-clang-format-14}"
if ! command -v "$clang_format" >/dev/null 2>&1; then
  printf 'format: %s not found (scripts/install-deps.sh installs clang-format-14)\n' "$clang_format" >&2
  exit 2
fi
version="$("$clang_format" --version | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p')"
if [[ "$version" != 14 ]]; then
  printf 'format: %s is version %s; the style is checked with clang-format 14\n' "$clang_format" "${version:-?}" >&2
  exit 2
fi

generated=(include/cudrv/device_attributes.hpp)
# Fixtures whose layout is what they test: the function-length check's counts lines.
fixtures=(tests/cpu/function_length_violation/src/long_function.cpp)
files=()
if (($# > 0)); then
  files=("$@")
else
  while IFS= read -r file; do
    [[ " ${generated[*]} ${fixtures[*]} " == *" $file "* ]] || files+=("$file")
  done < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cu' '*.cuh')
fi

tmp="$(mktemp)"
trap 'rm -f "$tmp"' EXIT
changed=0
lines=0
for file in "${files[@]}"; do
  if ! "$clang_format" --style=file "$file" > "$tmp"; then
    printf 'format: clang-format failed on %s\n' "$file" >&2
    exit 2
  fi
  cmp -s "$file" "$tmp" && continue
  count="$(diff "$file" "$tmp" | grep -c '^[<>]' || true)"  # lines removed plus lines added
  changed=$((changed + 1))
  lines=$((lines + count))
  if [[ "$mode" == --apply ]]; then
    cat "$tmp" > "$file"
    printf 'formatted %s (%d lines)\n' "$file" "$count"
  else
    printf '%s: %d lines to change\n' "$file" "$count"
  fi
done

if [[ "$mode" == --apply ]]; then
  printf 'format: %d of %d files rewritten (%d lines removed or added)\n' "$changed" "${#files[@]}" "$lines"
elif ((changed > 0)); then
  printf 'format: %d of %d files need formatting (%d lines removed or added); run scripts/format.sh --apply\n' \
    "$changed" "${#files[@]}" "$lines" >&2
  exit 1
else
  printf 'format: %d files, all formatted\n' "${#files[@]}"
fi
