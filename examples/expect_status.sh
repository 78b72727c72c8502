#!/bin/sh
# Runs a command and passes when it exits with an expected status and its output matches an extended
# regular expression; for the tests of examples that must fail in a stated way (examples/CMakeLists.txt).
# A plain POSIX shell script, so that the GPU machines need no CMake to run the tests.
#
#   expect_status.sh STATUS REGEX command [arguments...]
#
# The command's output is printed, so that the test's SKIP_REGULAR_EXPRESSION (no driver, no device)
# still applies; a run that ends that way passes here and ctest reports it skipped.
if [ $# -lt 3 ]; then
  echo "usage: expect_status.sh STATUS REGEX command [arguments...]" >&2
  exit 2
fi
want=$1
regex=$2
shift 2
out=$("$@" 2>&1)
status=$?
printf '%s\n' "$out"
if printf '%s\n' "$out" | grep -Eq 'the CUDA driver sees no device|no usable CUDA driver'; then
  echo "expect_status.sh: no usable GPU (status $status); the test is skipped"
  exit 0
fi
if [ "$status" != "$want" ]; then
  echo "expect_status.sh: exit status $status, expected $want"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -e "$regex"; then
  echo "expect_status.sh: the output does not match '$regex'"
  exit 1
fi
echo "expect_status.sh: exit status $status and the expected message, as required"
