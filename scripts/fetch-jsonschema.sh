#!/usr/bin/env bash
# Puts a pure-Python copy of the jsonschema package (and what it needs) in a directory, for machines
# whose python3 lacks it and cannot reach PyPI (the GPU machine): run it here, carry the directory,
# and put it on PYTHONPATH there (scripts/gpu-suite.sh does so for $BUILD/pyvendor).
#   scripts/fetch-jsonschema.sh [DIR] [PYTHON_VERSION]     (default: build/pyvendor, 3.12)
# jsonschema 4.17 is the last release whose dependencies (attrs, pyrsistent) work without compiled
# code; it implements draft 2020-12.
set -euo pipefail
dir=${1:-build/pyvendor}
py=${2:-3.12}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip download --quiet --no-deps --only-binary=:all: --python-version "$py" -d "$tmp" \
  jsonschema==4.17.3 attrs==23.2.0 pyrsistent==0.20.0
mkdir -p "$dir"
for wheel in "$tmp"/*.whl; do
  python3 -m zipfile -e "$wheel" "$dir"
done
echo "fetch-jsonschema: jsonschema in $dir"
