#!/usr/bin/env python3
"""Compiles every code block of README.md and docs/*.md, and checks the docs' wording and tables.

So that a renamed function breaks the build, not the reader (issue 33). Python's standard library only.

Code blocks
-----------
Every fenced block tagged ```cpp is compiled by the C++ compiler (-std=c++20 -fsyntax-only) against
include/, the generated include folder (<cudrv/version.hpp>) and the CUDA headers; every block tagged
```cu (or ```cuda) is device code, compiled by nvcc when --nvcc names one (else skipped, with a line
that says so). A block is one of the following, chosen by an HTML comment on the line just before its
fence (invisible on GitHub and in Doxygen) or, without one, by its text:

  (no comment)      A fragment when it has no `main(`: its `#include` lines go to the top of the
                    file's translation unit, its class definitions (from a line starting with
                    `struct ` or `class ` to its closing `};`) to namespace scope, and
                    the rest becomes the body of a function of its own.
                    With `main(` it is a whole program: compiled alone, exactly as written.
  <!-- fragment: cudrv::device& dev, cudrv::stream_ref s, std::size_t n -->
                    A fragment that uses names it does not declare: they become the parameters of
                    the function it is wrapped in (any declaration a parameter can be, function
                    pointers included).
  <!-- toplevel -->  Declarations and definitions (functions, structs): placed at namespace scope.
  <!-- no-compile: reason -->
                    Not compiled (a synopsis, an excerpt that needs a third-party build): counted
                    and listed with its reason.

The blocks of one Markdown file other than whole programs share one translation unit, each in a
namespace of its own, so a file costs one compiler run; #line directives make the compiler name the
Markdown file and line. A file may give code that its blocks assume (types, declarations) once, with
`<!-- doc-preamble: code -->` anywhere in it: it goes after the includes of its translation unit.
Every fragment's translation unit starts with <cudrv/cudrv.hpp> and common standard headers, not
with the opt-in headers (<cudrv/rtc.hpp>, <cudrv/nvtx.hpp>, ...): a page that uses them shows the
#include. Blocks that include an opt-in header whose third-party header was not found (NCCL, MPI,
DLPack, CCCL, NVTX) are skipped with a line that says which.

Words and tables
----------------
--check words: README.md and docs/*.md must not describe measurements with the names of test
machines (machine-kind labels such as nvidia-h100-x1, machines that were "lent"): name the GPU,
driver, CUDA version and date instead.
--check examples: every example target of examples/CMakeLists.txt has a row in README's table.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FENCE = re.compile(r"^(\s*)```\s*([A-Za-z+]*)\s*$")
MARKER = re.compile(r"<!--\s*(fragment|toplevel|no-compile)\s*(?::\s*(.*?))?\s*-->\s*$", re.S)
PREAMBLE = re.compile(r"<!--\s*doc-preamble:\s*(.*?)-->", re.S)
INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"]([^>\"]+)[>\"]")

PRELUDE = """#include <cudrv/cudrv.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>
"""

# Opt-in cudrv headers and the third-party header each needs (the feature's name for --with).
OPT_IN = {
    "cudrv/nccl.hpp": "nccl",
    "cudrv/mpi.hpp": "mpi",
    "cudrv/dlpack.hpp": "dlpack",
    "cudrv/cccl.hpp": "cccl",
    "cudrv/nvtx.hpp": "nvtx",
    "cublas_v2.h": "cublas",
}
FEATURE_HEADER = {
    "nccl": "nccl.h",
    "mpi": "mpi.h",
    "dlpack": "dlpack/dlpack.h",
    "cccl": "cuda/memory_resource",
    "nvtx": "nvtx3/nvtx3.hpp",
    "cublas": "cublas_v2.h",
}

JARGON = [
    (re.compile(r"\bnvidia-[a-z0-9]+-x\d+\b", re.I), "a machine-kind label"),
    (re.compile(r"\b(?:not|never)\s+(?:been\s+)?lent\b", re.I), "machines that were not lent"),
    (re.compile(r"\blent\s+(?:[\w-]+\s+){0,3}?(?:machine|GPU|H100|H200|device|host)s?\b", re.I), "lent machines"),
    (re.compile(r"\b(?:device|test) machines?\b", re.I), "the test machines"),
    (re.compile(r"\bkind of machine\b", re.I), "a kind of test machine"),
    (re.compile(r"\bmachine[- ]kinds?\b", re.I), "machine kinds"),
    (re.compile(r"\bdevice[- ]time budget\b", re.I), "the test machines' time budget"),
]


@dataclasses.dataclass
class Block:
    path: Path  # the Markdown file
    rel: str  # its name relative to the source root, for messages
    line: int  # the first line of code (1-based)
    lang: str
    code: list[str]
    kind: str  # program, fragment, toplevel, no-compile, device
    params: str = ""
    reason: str = ""

    @property
    def where(self) -> str:
        return f"{self.rel}:{self.line}"

    def include_lines(self) -> set[int]:
        """The indexes of the #include lines (not those inside a raw string literal: device source)."""
        found, in_raw = set(), False
        for n, l in enumerate(self.code):
            if not in_raw and INCLUDE.match(l):
                found.add(n)
            for token in re.findall(r'R"\(|\)"', l):
                in_raw = token.startswith("R")
        return found

    def includes(self) -> list[str]:
        return [INCLUDE.match(self.code[n]).group(1) for n in sorted(self.include_lines())]


def marker_before(lines: list[str], fence: int) -> tuple[str, str] | None:
    """The marker comment that ends on the line before the fence at index fence, if any."""
    end = fence - 1
    if end < 0 or not lines[end].rstrip().endswith("-->"):
        return None
    start = end
    while start >= 0 and "<!--" not in lines[start]:
        start -= 1
    if start < 0:
        return None
    m = MARKER.search("\n".join(lines[start : end + 1]))
    return (m.group(1), (m.group(2) or "").strip()) if m else None


def read_blocks(path: Path, root: Path) -> tuple[list[Block], str]:
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    rel = str(path.relative_to(root))
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group(2):
            i += 1
            continue
        lang = m.group(2).lower()
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        indent = len(m.group(1))
        code = [l[indent:] if l[:indent].strip() == "" else l for l in lines[i + 1 : j]]
        if lang in ("cpp", "c++", "cu", "cuda"):
            marker = marker_before(lines, i)
            if marker:
                kind, arg = marker
            elif lang in ("cu", "cuda"):
                kind, arg = "device", ""
            else:
                kind, arg = ("program" if re.search(r"\bint\s+main\s*\(", "\n".join(code)) else "fragment"), ""
            block = Block(path, rel, i + 2, lang, code, kind)
            if kind == "fragment":
                block.params = arg
            elif kind == "no-compile":
                block.reason = arg or "(no reason given)"
            if kind != "no-compile" and lang in ("cu", "cuda"):
                block.kind = "device"
            blocks.append(block)
        i = j + 1
    preamble = "\n".join(m.group(1).strip() for m in PREAMBLE.finditer(text))
    return blocks, preamble


def features_of(blocks: list[Block]) -> set[str]:
    return {OPT_IN[inc] for b in blocks for inc in b.includes() if inc in OPT_IN}


def line_directive(block: Block, offset: int = 0) -> str:
    # The absolute path: the compiler then quotes the Markdown file's own lines under its messages.
    return f'#line {block.line + offset} "{block.path}"\n'


def class_lines(body: list[str]) -> set[int]:
    """The lines of a fragment's class definitions: from a line that starts (at column 0) with `struct `
    or `class ` to the line with the brace that closes it, when `;` alone follows that brace (a definition
    that also declares a variable stays where it is). They go to namespace scope, where a reader would
    put them (a local class cannot have static data members)."""
    lines: set[int] = set()
    n = 0
    while n < len(body):
        if not re.match(r"(struct|class)\s+\w+", body[n]):
            n += 1
            continue
        depth, seen, end, rest = 0, False, None, ""
        for m in range(n, len(body)):
            text = re.sub(r"//.*", "", body[m])
            for i, c in enumerate(text):
                depth += c == "{"
                seen |= c == "{"
                depth -= c == "}"
                if seen and depth == 0 and c == "}":
                    end, rest = m, text[i + 1 :]
                    break
            if end is not None:
                break
        if end is not None and rest.strip() == ";":
            lines.update(range(n, end + 1))
            n = end + 1
        else:
            n += 1
    return lines


def fragment_unit(blocks: list[Block], preamble: str) -> str:
    """One translation unit for the fragments and top-level blocks of a file."""
    out = [PRELUDE]
    for b in blocks:
        for n in sorted(b.include_lines()):
            out.append(line_directive(b, n) + b.code[n] + "\n")
    out.append('#line 1 "<doc-preamble>"\n' + preamble + "\n")
    for index, b in enumerate(blocks):
        body = ["" if n in b.include_lines() else l for n, l in enumerate(b.code)]
        name = f"doc_block_{index}_line_{b.line}"
        out.append(f"namespace {name} {{\n")
        if b.kind == "toplevel":
            out.append(line_directive(b) + "\n".join(body) + "\n")
        else:
            hoisted = class_lines(body)
            out.append(line_directive(b) + "\n".join(l if n in hoisted else "" for n, l in enumerate(body)) + "\n")
            out.append(f"[[maybe_unused]] auto run({b.params}) {{\n" + line_directive(b) +
                       "\n".join("" if n in hoisted else l for n, l in enumerate(body)) + "\n}\n")
        out.append(f"}}  // namespace {name}\n")
    return "".join(out)


def run(cmd: list[str], source: str, suffix: str) -> tuple[int, str]:
    with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False) as f:
        f.write(source)
        name = f.name
    try:
        p = subprocess.run(cmd + [name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return p.returncode, p.stdout.replace(name, "<generated>")
    finally:
        os.unlink(name)


def blame(output: str, blocks: list[Block]) -> list[str]:
    """The blocks named by the compiler's error lines."""
    named = []
    for m in re.finditer(r"^([^:\s]+\.md):(\d+):(?:\d+:)?\s*(?:fatal )?error", output, re.M):
        name, line = m.group(1), int(m.group(2))
        for b in blocks:
            if name in (b.rel, str(b.path)) and b.line <= line < b.line + len(b.code):
                named.append(f"{b.where} (error at line {line})")
    return list(dict.fromkeys(named))


def check_blocks(args: argparse.Namespace, root: Path) -> int:
    files = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    include_flags = [f"-I{args.project_include}"] + [f"-I{d}" for d in args.include]
    feature_dirs: dict[str, str] = {}
    for item in args.with_feature:
        name, _, folder = item.partition("=")
        if folder and (Path(folder) / FEATURE_HEADER.get(name, "")).exists():
            feature_dirs[name] = folder
    for name, header in FEATURE_HEADER.items():  # headers that come with the include folders given
        if name not in feature_dirs and any((Path(d) / header).exists() for d in args.include):
            feature_dirs[name] = ""
    for folder in feature_dirs.values():
        if folder:
            include_flags += ["-isystem", folder]
    cxx = [args.cxx, "-std=c++20", "-fsyntax-only", "-x", "c++", "-w"] + include_flags
    jobs = []  # (description, blocks, command, source, suffix)
    counts = {"compiled": 0, "skipped": 0, "no-compile": 0}
    skipped_lines = []
    for path in files:
        blocks, preamble = read_blocks(path, root)
        for b in blocks:
            if b.kind == "no-compile":
                counts["no-compile"] += 1
                skipped_lines.append(f"not compiled {b.where}: {b.reason}")
        # A block that includes an opt-in header whose dependency is missing is left out (the others of
        # its file are compiled); one the file's preamble includes leaves the whole file out.
        preamble_needs = {OPT_IN[m.group(1)] for m in map(INCLUDE.match, preamble.split("\n")) if m and m.group(1) in OPT_IN}
        units = []
        for b in blocks:
            if b.kind not in ("fragment", "toplevel"):
                continue
            missing = sorted((features_of([b]) | preamble_needs) - feature_dirs.keys())
            if missing:
                counts["skipped"] += 1
                skipped_lines.append(f"SKIPPED {b.where}: {', '.join(FEATURE_HEADER[f] for f in missing)} not found")
            else:
                units.append(b)
        if units:
            jobs.append((f"{units[0].rel} ({len(units)} block(s))", units, cxx, fragment_unit(units, preamble), ".cpp"))
        for b in blocks:
            if b.kind == "program":
                missing = sorted(features_of([b]) - feature_dirs.keys())
                if missing:
                    counts["skipped"] += 1
                    skipped_lines.append(f"SKIPPED {b.where}: {', '.join(FEATURE_HEADER[f] for f in missing)} not found")
                else:
                    jobs.append((f"{b.where} (program)", [b], cxx, line_directive(b) + "\n".join(b.code) + "\n", ".cpp"))
            elif b.kind == "device":
                if not args.nvcc:
                    counts["skipped"] += 1
                    skipped_lines.append(f"SKIPPED {b.where}: device code, and no nvcc was given (--nvcc)")
                else:
                    nvcc = [args.nvcc, "-std=c++20", "-arch=sm_90", "-c", "-o", os.devnull, "-x", "cu", "-w"]
                    jobs.append((f"{b.where} (nvcc)", [b], nvcc + include_flags, line_directive(b) + "\n".join(b.code) + "\n", ".cu"))
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = pool.map(lambda job: run(job[2], job[3], job[4]), jobs)
        for (description, blocks, _, _, _), (status, output) in zip(jobs, results):
            if status == 0:
                counts["compiled"] += len(blocks)
                print(f"ok      {description}")
                continue
            failures += 1
            culprits = blame(output, blocks) or [b.where for b in blocks]
            print(f"FAILED  {description}: " + "; ".join(culprits))
            print("\n".join("        " + l for l in output.splitlines()[:40]))
    for line in skipped_lines:
        print(line)
    print(f"{counts['compiled']} block(s) compiled, {counts['skipped']} skipped (headers or nvcc missing), "
          f"{counts['no-compile']} marked no-compile, {failures} failing compilation(s)")
    return 1 if failures else 0


def check_words(root: Path) -> int:
    problems = 0
    for path in [root / "README.md"] + sorted((root / "docs").glob("*.md")):
        for n, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
            for pattern, what in JARGON:
                if m := pattern.search(line):
                    problems += 1
                    print(f"{path.relative_to(root)}:{n}: '{m.group(0)}' ({what}): describe the GPU, driver, "
                          "CUDA version and date instead")
    print(f"words: {problems} test-machine term(s) in README.md and docs/*.md")
    return 1 if problems else 0


def example_targets(cmake: str) -> list[str]:
    names = []
    for m in re.finditer(r"(?:set|list\s*\(\s*APPEND)\s*\(?\s*CUDRV_(?:MPI_)?EXAMPLES\s+([^)]*)\)", cmake):
        names += re.sub(r"#[^\n]*", "", m.group(1)).split()
    names = [n for n in names if n != "CUDRV_EXAMPLES" and n != "APPEND"]
    names += re.findall(r"add_executable\(\s*example_([a-z0-9_]+)\s", cmake)
    return sorted(set(n for n in names if "$" not in n))


def check_examples(root: Path) -> int:
    targets = example_targets((root / "examples" / "CMakeLists.txt").read_text(encoding="utf-8"))
    table = set(re.findall(r"^\|\s*`example_([a-z0-9_]+)`\s*\|", (root / "README.md").read_text(encoding="utf-8"), re.M))
    missing = [t for t in targets if t not in table]
    extra = sorted(table - set(targets))
    for t in missing:
        print(f"README.md: the example table has no row for example_{t} (examples/CMakeLists.txt builds it)")
    for t in extra:
        print(f"README.md: the example table lists example_{t}, which examples/CMakeLists.txt does not build")
    print(f"examples: {len(targets)} example target(s), {len(missing)} missing from README's table, {len(extra)} unknown")
    return 1 if missing or extra or not targets else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source-dir", default=str(Path(__file__).resolve().parents[2]))
    parser.add_argument("--project-include", default=str(Path(__file__).resolve().parents[2] / "include"),
                        help="cudrv's include folder (default: the one next to this script's tests/)")
    parser.add_argument("--check", default="blocks,words,examples", help="comma-separated: blocks, words, examples")
    parser.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    parser.add_argument("--nvcc", default="", help="nvcc for the device-code blocks; empty: skip them")
    parser.add_argument("--include", "-I", action="append", default=[], help="another include folder (generated, CUDA)")
    parser.add_argument("--with", dest="with_feature", action="append", default=[],
                        help="FEATURE=FOLDER: the include folder of an opt-in header's dependency "
                             "(nccl, mpi, dlpack, cccl, nvtx, cublas)")
    parser.add_argument("--jobs", "-j", type=int, default=2)
    args = parser.parse_args()
    root = Path(args.source_dir).resolve()
    status = 0
    checks = args.check.split(",")
    if "blocks" in checks:
        if not shutil.which(args.cxx):
            print(f"no C++ compiler '{args.cxx}'")
            return 1
        status |= check_blocks(args, root)
    if "words" in checks:
        status |= check_words(root)
    if "examples" in checks:
        status |= check_examples(root)
    return status


if __name__ == "__main__":
    sys.exit(main())
