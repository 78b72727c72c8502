#!/usr/bin/env python3
"""Sets cudrv-query --bandwidth beside nvbandwidth, test by test, and draws its device-to-device matrix.

    bandwidth-compare.py --nvbandwidth NVB.txt --cudrv QUERY.json [--markdown OUT.md] [--png OUT.png]
                         [--heatmap-test NAME] [--check]

NVB.txt is what nvbandwidth printed (its plain text: "Running <test>." then, per matrix, the caption,
the column header, one line per row with N/A where nothing was measured, a blank line and
"SUM <key> <sum>"). QUERY.json is the document of `cudrv-query --bandwidth --json` run on the same
machine with the same devices, size, loop count and samples. Matrices are matched by nvbandwidth's key
(the test name, or with _read1, _write2, _total ... for the bidirectional device-to-device tests;
cudrv-query's JSON gives the same key). One markdown table:

  test (matrix) | unit | nvbandwidth | cudrv-query | cudrv-query / nvbandwidth | cells | worst cell

where nvbandwidth and cudrv-query are the sums of the matrix's figures (what nvbandwidth's SUM line
gives: for a one-GPU test the figure itself), the ratio is theirs, and the worst cell is the cell
ratio furthest from 1 over the cells both measured. The goal (issue 36) is every ratio within 2% of 1:
a row outside it is marked "**outside 2%**". For latency (ns) a ratio above 1 means cudrv-query
measured slower loads. Tests only one side ran (nvbandwidth waived them, or cudrv-query's
all_to_all_memcpy_write_* that nvbandwidth has not) are listed below the table.

--markdown writes the table to a file as well as stdout. --png draws cudrv-query's device-to-device
matrix of --heatmap-test (default device_to_device_memcpy_write_ce) as a heat map, GB/s in every
cell, with matplotlib (the project's .venv: scripts/install-deps.sh --plot); without matplotlib it
says so on stderr and writes no PNG; a run without that matrix (one GPU) draws none and says so.
--check: exit 3 when a row is outside 2%.

Exit status: 0 done, 1 bad arguments, a file that cannot be read or nothing to compare, 3 a row outside
the goal (--check).
"""
import argparse
import json
import re
import sys

GOAL = 0.02  # |cudrv-query / nvbandwidth - 1|
EXIT_USAGE = 1
EXIT_GOAL = 3
HEATMAP_TEST = "device_to_device_memcpy_write_ce"


class InputError(Exception):
    """A file that cannot be read as its kind, or holds no matrix."""


def parse_nvbandwidth(path, text):
    """{key: {"test", "title", "unit", "rows", "columns", "values", "sum"}} and {test: status}."""
    matrices = {}
    statuses = {}
    test = None
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        m = re.match(r"^(Running|Waived|ERROR|Error|Not Found):? (\S+?)\.?$", line)
        if m:
            test = m.group(2)
            statuses[test] = m.group(1)
            i += 1
            continue
        if test and re.search(r"\((GB/s|ns)\)$", line) and i + 1 < len(lines):
            title = line
            columns = lines[i + 1].split()
            rows, values = [], []
            i += 2
            while i < len(lines) and lines[i].strip():
                fields = lines[i].split()
                rows.append(fields[0])
                values.append([None if f == "N/A" else float(f) for f in fields[1:]])
                i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            key = test
            total = None
            if i < len(lines):
                s = re.match(r"^(?:SUM|&&&& PERF) (\S+) ([-+0-9.eE]+)", lines[i])
                if s:
                    key, total = s.group(1), float(s.group(2))
                    i += 1
            if total is None:
                total = sum(v for r in values for v in r if v is not None)
            matrices[key] = {"test": test, "title": title, "unit": "ns" if title.endswith("(ns)") else "GB/s",
                             "rows": rows, "columns": columns, "values": values, "sum": total}
            continue
        i += 1
    if not matrices and not statuses:
        raise InputError(f"{path}: no nvbandwidth test in it (expected its plain text output)")
    return matrices, statuses


def parse_cudrv(path, doc):
    """The same shape as parse_nvbandwidth's, from cudrv-query's JSON, plus the tests without a key."""
    b = doc.get("bandwidth") if isinstance(doc, dict) else None
    if doc.get("view") != "bandwidth" or not isinstance(b, dict):
        raise InputError(f"{path}: not a cudrv-query --bandwidth --json document")
    matrices = {}
    statuses = {}
    for t in b["tests"]:
        statuses[t["name"]] = (t["status"], t.get("nvbandwidth_name"))
        for m in t["matrices"]:
            matrices[m["key"]] = {"test": t["name"], "title": m["title"], "unit": t["unit"], "rows": m["rows"],
                                  "columns": m["columns"], "values": m["values"], "sum": m["sum"]}
    return matrices, statuses, b


def read(path, kind):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from e
    if kind == "nvbandwidth":
        return parse_nvbandwidth(path, text)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: not JSON ({e})") from e
    return parse_cudrv(path, doc)


def cell_ratios(nvb, ours):
    """cudrv-query / nvbandwidth for every cell both measured (matched by position)."""
    out = []
    for r_n, r_o in zip(nvb["values"], ours["values"]):
        for v_n, v_o in zip(r_n, r_o):
            if v_n is not None and v_o is not None and v_n > 0:
                out.append(v_o / v_n)
    return out


def compare(nvb, ours):
    """One row per matrix key both have, in cudrv-query's order."""
    rows = []
    for key, o in ours.items():
        n = nvb.get(key)
        if n is None:
            continue
        ratio = o["sum"] / n["sum"] if n["sum"] > 0 else None
        cells = cell_ratios(n, o)
        worst = max(cells, key=lambda c: abs(c - 1)) if cells else None
        outside = ratio is None or abs(ratio - 1) > GOAL
        rows.append({"key": key, "unit": o["unit"], "nvbandwidth": n["sum"], "cudrv": o["sum"], "ratio": ratio,
                     "cells": len(cells), "worst": worst, "outside": outside})
    return rows


def fmt(v, digits=2):
    return "n/a" if v is None else f"{v:.{digits}f}"


def table(rows, nvb, nvb_status, ours, our_status):
    out = ["| test (matrix) | unit | nvbandwidth | cudrv-query | cudrv-query / nvbandwidth | cells | worst cell |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        mark = " **outside 2%**" if r["outside"] else ""
        out.append(f"| {r['key']} | {r['unit']} | {fmt(r['nvbandwidth'])} | {fmt(r['cudrv'])} | "
                   f"{fmt(r['ratio'], 3)}{mark} | {r['cells']} | {fmt(r['worst'], 3)} |")
    within = sum(1 for r in rows if not r["outside"])
    out.append("")
    out.append(f"{within} of {len(rows)} matrices within 2% of nvbandwidth's figures.")
    only_ours = [k for k in ours if k not in nvb]
    only_nvb = [k for k in nvb if k not in ours]
    for name, (status, nvb_name) in our_status.items():
        if status == "waived":
            out.append(f"- {name}: waived by cudrv-query")
    for k in only_ours:
        test = ours[k]["test"]
        why = "no nvbandwidth test" if our_status.get(test, (None, test))[1] is None else "not in nvbandwidth's output"
        out.append(f"- {k}: cudrv-query only ({why})")
    for k in only_nvb:
        out.append(f"- {k}: nvbandwidth only")
    for name, status in nvb_status.items():
        if status != "Running":
            out.append(f"- {name}: {status} by nvbandwidth")
    return "\n".join(out) + "\n"


def heatmap(matrix, test, out):
    """cudrv-query's matrix of @test as a heat map, its figure in each cell; N/A cells left blank."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = matrix["values"]
    grid = [[float("nan") if v is None else v for v in row] for row in values]
    n_rows, n_cols = len(grid), len(grid[0]) if grid else 0
    fig, ax = plt.subplots(figsize=(1.2 * n_cols + 2.5, 1.0 * n_rows + 1.8))
    finite = [v for row in values for v in row if v is not None]
    # The scale starts at 0: links within a fraction of a per cent of each other look alike, and one
    # that is half as fast stands out.
    top = max(finite) if finite else 1.0
    image = ax.imshow(grid, cmap="viridis", vmin=0.0, vmax=top)
    ax.set_xticks(range(n_cols), labels=[f"GPU {c}" for c in matrix["columns"]])
    ax.set_yticks(range(n_rows), labels=[f"GPU {r}" for r in matrix["rows"]])
    middle = top / 2
    for r in range(n_rows):
        for c in range(n_cols):
            v = values[r][c]
            ax.text(c, r, "N/A" if v is None else f"{v:.1f}", ha="center", va="center",
                    color="gray" if v is None else "black" if v > middle else "white", fontsize=9)
    ax.set_title(f"cudrv-query --bandwidth: {test}\n{matrix['title']}", fontsize=9)
    bar = fig.colorbar(image, ax=ax, label=matrix["unit"])
    bar.formatter.set_useOffset(False)
    bar.update_ticks()
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nvbandwidth", required=True, metavar="NVB.txt", help="nvbandwidth's plain text output")
    parser.add_argument("--cudrv", required=True, metavar="QUERY.json", help="cudrv-query --bandwidth --json")
    parser.add_argument("--markdown", "--out-md", metavar="OUT.md", help="also write the table to this file")
    parser.add_argument("--png", "--out-png", metavar="OUT.png", help="draw the heat map (needs matplotlib)")
    parser.add_argument("--heatmap-test", default=HEATMAP_TEST, metavar="NAME",
                        help=f"the device-to-device test drawn (default {HEATMAP_TEST})")
    parser.add_argument("--check", action="store_true", help="exit 3 when a row is outside 2%%")
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else 0
    try:
        nvb, nvb_status = read(args.nvbandwidth, "nvbandwidth")
        ours, our_status, _ = read(args.cudrv, "cudrv")
    except InputError as e:
        print(f"bandwidth-compare: {e}", file=sys.stderr)
        return EXIT_USAGE
    rows = compare(nvb, ours)
    if not rows:
        print("bandwidth-compare: no matrix in both files (were they run on the same machine?)", file=sys.stderr)
        return EXIT_USAGE
    text = table(rows, nvb, nvb_status, ours, our_status)
    sys.stdout.write(text)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    if args.png:
        matrix = ours.get(args.heatmap_test)
        if matrix is None or len(matrix["rows"]) < 2:
            print(f"bandwidth-compare: cudrv-query has no device-to-device matrix {args.heatmap_test}: no PNG",
                  file=sys.stderr)
        else:
            try:
                import matplotlib  # noqa: F401
            except ImportError:
                print(f"bandwidth-compare: matplotlib is not installed for {sys.executable}: no PNG "
                      "(scripts/install-deps.sh --plot)", file=sys.stderr)
            else:
                heatmap(matrix, args.heatmap_test, args.png)
                print(f"bandwidth-compare: wrote {args.png}", file=sys.stderr)
    if args.check and any(r["outside"] for r in rows):
        return EXIT_GOAL
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
