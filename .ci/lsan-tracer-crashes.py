#!/usr/bin/env python3
"""Tell an LeakSanitizer tracer crash from a real failure in a ctest JUnit report.

LeakSanitizer stops the process's threads from a tracer thread at exit to scan their stacks; on some
kernels and sanitizer runtimes that tracer itself now and then dies ("Tracer caught signal 11", then
"LeakSanitizer has encountered a fatal error") after the test has passed, with no leak found or
reported. The failure is LeakSanitizer's, not the test's: a rerun passes.

    lsan-tracer-crashes.py REPORT.xml

Exit status 0 and the names of the failed tests, one per line, when every failed test in REPORT.xml
failed that way and no other (no sanitizer finding, no failed Catch2 assertion); exit status 1, with
the reason on stderr, when any failure shows anything else or when there is no failure at all.
.ci/run then reruns the tests named, once: a failure of the test's own would show again there.
"""
import sys
import xml.etree.ElementTree as ET

TRACER = "Tracer caught signal"
FATAL = "LeakSanitizer has encountered a fatal error"
CATCH2_FAILED = ("FAILED:", "test cases:")  # a failed assertion; the summary line of a failed run
FINDINGS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "SUMMARY: ")


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[4].strip(), file=sys.stderr)
        return 2
    failed = [case for case in ET.parse(argv[1]).getroot().iter("testcase")
              if case.get("status") == "fail"]
    if not failed:
        print("lsan-tracer-crashes: the report has no failed test", file=sys.stderr)
        return 1
    names = []
    for case in failed:
        name = case.get("name", "?")
        out = "".join(node.text or "" for node in case.iter("system-out"))
        if not (TRACER in out and FATAL in out) or any(mark in out for mark in CATCH2_FAILED):
            print(f"lsan-tracer-crashes: '{name}' failed otherwise than by a LeakSanitizer tracer crash",
                  file=sys.stderr)
            return 1
        if any(finding in out for finding in FINDINGS):
            print(f"lsan-tracer-crashes: '{name}' reports a sanitizer finding", file=sys.stderr)
            return 1
        names.append(name)
    print("\n".join(names))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
