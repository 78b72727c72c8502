"""What every generator in scripts/gen/ shares: write the text, or (--check FILE) compare it with the file.

The committed files were generated from the cuda.h of CUDA_VERSION GENERATED_WITH. With --check, a
difference is a failure (the file is stale: rerun the generator), except against an older cuda.h, which
knows less than the committed file: then the check is skipped (status 77, which ctest reports as skipped).
"""
import difflib
import re
import sys

GENERATED_WITH = 13000  # CUDA 13.0: raise it when regenerating from a newer toolkit
SKIPPED = 77


def cuda_version(cuda_h):
    match = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", open(cuda_h, encoding="utf-8").read())
    return int(match.group(1)) if match else 0


def emit(text, check, cuda_h, generator):
    """Writes text to stdout, or with check (a path) compares it with that file; returns the exit status."""
    if not check:
        sys.stdout.write(text)
        return 0
    with open(check, encoding="utf-8") as f:
        committed = f.read()
    if committed == text:
        print(f"{check}: up to date with {cuda_h}")
        return 0
    version = cuda_version(cuda_h)
    if version < GENERATED_WITH:
        print(f"{check} was generated from a newer cuda.h (CUDA_VERSION {GENERATED_WITH}) than {cuda_h} "
              f"({version}): not compared")
        return SKIPPED
    diff = difflib.unified_diff(committed.splitlines(True), text.splitlines(True), check, f"{generator} --cuda-h {cuda_h}")
    sys.stdout.writelines(diff)
    print(f"\n{check} is stale: regenerate it with {generator} --cuda-h {cuda_h} > {check}")
    return 1
