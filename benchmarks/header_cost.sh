#!/usr/bin/env bash
# Measures the compile-time cost of including cudrv: `g++ -std=c++20 -fsyntax-only` on a file that
# includes only <cudrv/cudrv.hpp>, against one that includes only <cuda.h>. Prints the median and
# minimum of N runs (default 11) of each, in seconds.
# Usage: benchmarks/header_cost.sh [runs]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-11}
cxx=${CXX:-g++}
cuda_inc=${CUDA_INCLUDE:-/usr/local/cuda/include}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo '#include <cudrv/cudrv.hpp>' > "$tmp/cudrv.cpp"
echo '#include <cuda.h>' > "$tmp/cuda.cpp"
measure() {
  local file=$1
  for _ in $(seq "$runs"); do
    local start end
    start=$(date +%s.%N)
    "$cxx" -std=c++20 -fsyntax-only -I"$here/include" -I"$cuda_inc" "$file"
    end=$(date +%s.%N)
    echo "$end - $start" | bc -l
  done | sort -g | awk '{ v[NR] = $1 } END { printf "median %.3f s  min %.3f s  (%d runs)\n", v[int((NR + 1) / 2)], v[1], NR }'
}
echo "cudrv/cudrv.hpp: $(measure "$tmp/cudrv.cpp")"
echo "cuda.h alone:    $(measure "$tmp/cuda.cpp")"
