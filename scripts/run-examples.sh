#!/usr/bin/env bash
# Runs every measuring example at its full size on a GPU and collects their JSON lines, for
# docs/examples.md and its plot:
#   $OUT/examples.jsonl   one line per figure: {"example", "metric", "value", "reference", "fraction", ...}
#   $OUT/device.json      cudrv-query --details --json (the roofline's bandwidth and FP32 peak)
#   $OUT/<example>.log    each example's whole output
#   $OUT/examples.png     the plot, when a Python with matplotlib is found (scripts/plot-examples.py;
#                         scripts/install-deps.sh --plot makes one in .venv)
# The build tree is $BUILD (default ./build); logs go to $OUT (default ./examples-out). Examples can
# be named on the command line (default: all that measure). Exit status: 0 when every example ran
# and verified its result, 1 otherwise. The last line says "N passed, N failed".
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
out=${OUT:-$root/examples-out}
mkdir -p "$out"
examples=("$@")
if ((${#examples[@]} == 0)); then
  examples=(vector_add_nvrtc saxpy_template reduce transpose sgemm histogram heat monte_carlo_pi overlap pdl
            texture_resize ipc_producer_consumer green_contexts cub_thrust hopper_gemm hopper_gemm_fp8)
fi

"$build/tools/cudrv-query/cudrv-query" --details --json > "$out/device.json" 2> "$out/device.err" || true
: > "$out/examples.jsonl"
passed=0
failed=0
for name in "${examples[@]}"; do
  exe="$build/examples/example_$name"
  if [ ! -x "$exe" ]; then
    echo "$name: not built ($exe)"
    failed=$((failed + 1))
    continue
  fi
  "$exe" > "$out/$name.log" 2>&1
  rc=$?
  grep -E '^\{"example"' "$out/$name.log" >> "$out/examples.jsonl"
  grep -vE '^\{"example"' "$out/$name.log" | tail -n 3
  if [ "$rc" = 0 ]; then
    passed=$((passed + 1))
  else
    echo "$name: exit code $rc (see $out/$name.log)"
    failed=$((failed + 1))
  fi
done

python=""
for candidate in "$root/.venv/bin/python" python3; do
  if command -v "$candidate" > /dev/null 2>&1 && "$candidate" -c "import matplotlib" 2> /dev/null; then
    python=$candidate
    break
  fi
done
if [ -n "$python" ]; then
  "$python" "$root/scripts/plot-examples.py" "$out/examples.jsonl" "$out/device.json" "$out/examples.png" ||
    echo "the plot failed"
else
  echo "no Python with matplotlib: run scripts/plot-examples.py $out/examples.jsonl $out/device.json elsewhere"
fi
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
