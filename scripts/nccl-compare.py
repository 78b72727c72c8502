#!/usr/bin/env python3
"""Sets bench_nccl's all-reduce sweep beside nccl-tests' all_reduce_perf, per GPU count.

    nccl-compare.py [--markdown OUT.md] [--png OUT.png] [--check] [--ranks N] FILE...
    nccl-compare.py --nccl-tests PERF.txt --bench BENCH.json [--ranks N] [--out-md OUT.md] [--out-png OUT.png]

Each FILE is either the JSON document of `bench_nccl sweep --json FILE` (or `all`), or the text that
nccl-tests' `all_reduce_perf` printed (its table, with the `#  Rank ...` lines that name the GPUs). The
kind is read from the content. Files are grouped by their number of ranks (GPUs) and how they ran (one
process over every GPU, or several processes under mpirun: all_reduce_perf's rank lines name one Pid or
several): for each group with both kinds, one markdown table per bench_nccl document:

  size | nccl-tests busbw (out of place) | cudrv busbw | cudrv / nccl-tests | raw NCCL busbw | raw / nccl-tests

then the latency row at the smallest size (8 B by default): both times and cudrv / nccl-tests. Goals
(issue 35): bus bandwidth >= 0.99x nccl-tests from 64 MiB, latency <= 1.02x at the smallest size; a row
that misses its goal is marked "**below goal**". With one rank busbw is 0 by nccl-tests' definition, so
algbw is compared. Sizes only one side measured are left out; several nccl-tests outputs for one count
(or repeated rows, from `-N`) give the median per size.

bench_nccl's times come from its sweep's main method (`"method"` in the JSON): "nccl-tests" (host
clock over --iters calls, mean over ranks: what all_reduce_perf measures) or "events" (an older
run; the table says so, as its small sizes are not comparable).

The second form names each file's kind (--nccl-tests and --bench may be repeated, and mixed with
files given by position). --ranks N compares only the groups of N GPUs and refuses a run where there
is none. --markdown (or --out-md) writes the tables to a file as well as stdout. --png (or --out-png)
draws bus bandwidth against size (nccl-tests and cudrv, one panel per comparison, the ratio below)
with matplotlib (the project's .venv: scripts/install-deps.sh --plot); without matplotlib it says so
on stderr and writes no PNG. --check: exit 3 when a goal is missed.

Exit status: 0 done, 1 bad arguments, a file that cannot be read or nothing to compare, 3 a goal
missed (--check).
"""
import argparse
import json
import re
import statistics
import sys

BANDWIDTH_GOAL = 0.99  # cudrv busbw / nccl-tests busbw, from GOAL_FROM up
GOAL_FROM = 64 << 20
LATENCY_GOAL = 1.02  # cudrv time / nccl-tests time at the smallest size
EXIT_USAGE = 1
EXIT_GOAL = 3


class InputError(Exception):
    """A file that is neither kind, or has no rows."""


def size_label(b):
    """8 B, 512 B, 4 KiB, 1 MiB, 1 GiB."""
    for shift, suffix in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {suffix}"
    return f"{b} B"


def parse_nccl_tests(path, text):
    """all_reduce_perf's output: {"ranks", "device", "rows": {bytes: [(oop_us, oop_algbw, oop_busbw)]}}."""
    ranks = 0
    pids = set()
    device = ""
    columns = None
    rows = {}
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            body = stripped[1:].split()
            m = re.match(r"#\s*Rank\s+\d+\s+Group\s+\d+\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)$",
                         stripped)
            if m:
                ranks += 1
                pids.add((m.group(2), m.group(1)))
                device = device or m.group(3).strip()
            elif body[:2] == ["size", "count"]:
                columns = body
            continue
        if columns is None:
            continue
        fields = stripped.split()
        if len(fields) < len(columns) - 1 or not fields[0].isdigit():
            continue  # not a row of the table (a warning, a footer)
        try:
            time_col = [i for i, c in enumerate(columns) if c in ("time", "cputime")][0]
            algbw_col = columns.index("algbw")
            busbw_col = columns.index("busbw")
            nbytes = int(fields[0])
            row = (float(fields[time_col]), float(fields[algbw_col]), float(fields[busbw_col]))
        except (ValueError, IndexError) as e:
            raise InputError(f"{path}: cannot read the row '{stripped}' ({e})") from None
        rows.setdefault(nbytes, []).append(row)
    if columns is None or not rows:
        raise InputError(f"{path}: no all_reduce_perf table found (a header '# size count ...' and its rows)")
    if ranks == 0:
        raise InputError(f"{path}: no '#  Rank N Group ...' lines: cannot tell the number of GPUs")
    mode = "mpi" if len(pids) > 1 else "single-process"
    return {"kind": "nccl-tests", "path": path, "ranks": ranks, "mode": mode, "device": device, "rows": rows}


def parse_bench(path, doc):
    """bench_nccl's JSON: {"ranks", "device", "method", "metric", "rows": {bytes: row}}."""
    sweep = doc.get("sweep")
    if not isinstance(sweep, dict) or not sweep.get("rows"):
        raise InputError(f"{path}: a bench_nccl document without sweep rows (run bench_nccl sweep --json FILE)")
    rows = {}
    for r in sweep["rows"]:
        try:
            rows[int(r["bytes"])] = r
            for side in ("cudrv", "raw"):
                float(r[side]["time_us"])
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{path}: a sweep row without {e}: {r}") from None
    return {
        "kind": "bench",
        "path": path,
        "ranks": int(doc.get("ranks", 0)),
        "device": doc.get("device", ""),
        "mode": doc.get("process_mode", ""),
        "nccl": doc.get("nccl", ""),
        "method": sweep.get("method", "events"),
        "rows": rows,
    }


def read_input(path, kind=None):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: {e.strerror}") from None
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"{path}: not valid JSON ({e})") from None
        if doc.get("benchmark") != "bench_nccl":
            raise InputError(f"{path}: a JSON document, but not bench_nccl's (no \"benchmark\": \"bench_nccl\")")
        if kind == "nccl-tests":
            raise InputError(f"{path}: given as all_reduce_perf output, but it is bench_nccl's JSON")
        return parse_bench(path, doc)
    if kind == "bench":
        raise InputError(f"{path}: given as bench_nccl's JSON, but it is not JSON")
    return parse_nccl_tests(path, text)


def bandwidth(nbytes, time_us, ranks):
    """The compared bandwidth from a time, by nccl-tests' definitions: busbw = algbw * 2(n-1)/n, with
    algbw = bytes / time; algbw itself with one rank (where busbw is 0). Computed from the times rather
    than read from all_reduce_perf's busbw column, which keeps two decimals (nothing at small sizes)."""
    algbw = nbytes / (time_us * 1e-6) / 1e9
    return algbw if ranks == 1 else algbw * 2 * (ranks - 1) / ranks


def gbps(v):
    """A bandwidth with enough digits at small sizes."""
    return f"{v:.2f} GB/s" if v >= 1 else f"{v:.4f} GB/s"


def compare(bench, tests):
    """The rows of one comparison: a list of dicts, by size, and the latency row."""
    reference = {}
    for t in tests:
        for nbytes, rs in t["rows"].items():
            reference.setdefault(nbytes, []).extend(rs)
    ranks = bench["ranks"]
    rows = []
    for nbytes in sorted(set(reference) & set(bench["rows"])):
        ref_us = statistics.median(r[0] for r in reference[nbytes])
        b = bench["rows"][nbytes]
        cudrv_us, raw_us = float(b["cudrv"]["time_us"]), float(b["raw"]["time_us"])
        ref_bw, cudrv_bw, raw_bw = (bandwidth(nbytes, t, ranks) for t in (ref_us, cudrv_us, raw_us))
        ratio = ref_us / cudrv_us  # = cudrv bandwidth / nccl-tests bandwidth
        rows.append({
            "bytes": nbytes,
            "ref_us": ref_us,
            "ref_bw": ref_bw,
            "cudrv_us": cudrv_us,
            "cudrv_bw": cudrv_bw,
            "raw_us": raw_us,
            "raw_bw": raw_bw,
            "ratio": ratio,
            "raw_ratio": ref_us / raw_us,
            "below": nbytes >= GOAL_FROM and not ratio >= BANDWIDTH_GOAL,
        })
    latency = None
    if rows:
        r = rows[0]
        ratio = r["cudrv_us"] / r["ref_us"]
        latency = {"bytes": r["bytes"], "ref_us": r["ref_us"], "cudrv_us": r["cudrv_us"], "raw_us": r["raw_us"],
                   "ratio": ratio, "raw_ratio": r["raw_us"] / r["ref_us"], "below": not ratio <= LATENCY_GOAL}
    return rows, latency


def table(bench, tests, rows, latency):
    """One comparison as markdown lines."""
    ranks = bench["ranks"]
    metric = "algbw" if ranks == 1 else "busbw"
    lines = [
        f"### {ranks} GPU{'s' if ranks != 1 else ''}: bench_nccl ({bench['mode'] or '?'}, {bench['path']}) "
        f"against all_reduce_perf ({', '.join(t['path'] for t in tests)})",
        "",
        f"{bench['device'] or tests[0]['device']}, NCCL {bench['nccl'] or '?'}; all-reduce, float sum, out of place; "
        f"bench_nccl's method: {bench['method']}.",
    ]
    if bench["method"] != "nccl-tests":
        lines.append("bench_nccl timed this run with CUDA events over long batches (the events method), not like "
                     "nccl-tests: the small sizes are not comparable.")
    if ranks == 1:
        lines.append("One rank: busbw is 0 by nccl-tests' definition, so algbw is compared.")
    lines += [
        "",
        f"| size | nccl-tests {metric} | cudrv {metric} | cudrv / nccl-tests | raw NCCL {metric} (bench_nccl) | "
        f"raw / nccl-tests | goal |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        goal = "—"
        if r["bytes"] >= GOAL_FROM:
            goal = f"**below goal** (>= {BANDWIDTH_GOAL:.2f})" if r["below"] else f"met (>= {BANDWIDTH_GOAL:.2f})"
        lines.append(f"| {size_label(r['bytes'])} | {gbps(r['ref_bw'])} | {gbps(r['cudrv_bw'])} | {r['ratio']:.3f} | "
                     f"{gbps(r['raw_bw'])} | {r['raw_ratio']:.3f} | {goal} |")
    if latency:
        goal = f"**below goal** (<= {LATENCY_GOAL:.2f})" if latency["below"] else f"met (<= {LATENCY_GOAL:.2f})"
        lines += [
            "",
            "| latency | nccl-tests | cudrv | cudrv / nccl-tests | raw NCCL (bench_nccl) | raw / nccl-tests | goal |",
            "|---|---:|---:|---:|---:|---:|---|",
            f"| {size_label(latency['bytes'])} | {latency['ref_us']:.2f} us | {latency['cudrv_us']:.2f} us | "
            f"{latency['ratio']:.3f} | {latency['raw_us']:.2f} us | {latency['raw_ratio']:.3f} | {goal} |",
        ]
    big = [r for r in rows if r["bytes"] >= GOAL_FROM]
    if big:
        worst = min(big, key=lambda r: r["ratio"])
        lines += ["", f"Lowest {metric} ratio from {size_label(GOAL_FROM)}: {worst['ratio']:.3f} at "
                      f"{size_label(worst['bytes'])} (goal >= {BANDWIDTH_GOAL:.2f}: "
                      f"{'NOT met' if any(r['below'] for r in big) else 'met'})."]
    return lines


def plot(comparisons, out):
    """One column per comparison: bandwidth against size on top, cudrv / nccl-tests below."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(comparisons)
    fig, axes = plt.subplots(2, n, figsize=(7.5 * n, 6.5), sharex="col", squeeze=False,
                             gridspec_kw={"height_ratios": [3, 1]})
    for col, (bench, tests, rows, _) in enumerate(comparisons):
        bw, rt = axes[0][col], axes[1][col]
        sizes = [r["bytes"] for r in rows]
        metric = "algbw" if bench["ranks"] == 1 else "busbw"
        bw.plot(sizes, [r["ref_bw"] for r in rows], marker="o", markersize=4, color="tab:gray",
                label="nccl-tests all_reduce_perf (out of place)")
        bw.plot(sizes, [r["cudrv_bw"] for r in rows], marker="s", markersize=4, linestyle="--", color="tab:blue",
                label="cudrv (bench_nccl)")
        bw.set_xscale("log", base=2)
        bw.set_yscale("log")
        bw.set_ylabel(f"{metric} (GB/s)")
        bw.set_title(f"All-reduce, {bench['ranks']} GPU{'s' if bench['ranks'] != 1 else ''} "
                     f"({bench['device'] or '?'}, {bench['mode'] or '?'})")
        bw.grid(True, which="both", alpha=0.3)
        bw.legend(loc="upper left")
        rt.plot(sizes, [r["ratio"] for r in rows], marker="s", markersize=4, color="tab:blue")
        rt.axhline(1.0, color="black", linewidth=0.8)
        goal_sizes = [s for s in sizes if s >= GOAL_FROM]
        if goal_sizes:
            rt.hlines(BANDWIDTH_GOAL, goal_sizes[0], goal_sizes[-1], colors="tab:red", linestyles=":",
                      label=f"goal >= {BANDWIDTH_GOAL} from {size_label(GOAL_FROM)}")
            rt.legend(loc="lower right")
        rt.set_xscale("log", base=2)
        rt.set_xlabel("message size (bytes)")
        rt.set_ylabel("cudrv / nccl-tests")
        rt.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", metavar="FILE", help="bench_nccl JSON or all_reduce_perf output")
    parser.add_argument("--nccl-tests", action="append", default=[], metavar="PERF.txt",
                        help="all_reduce_perf output (may be repeated)")
    parser.add_argument("--bench", action="append", default=[], metavar="BENCH.json",
                        help="bench_nccl's JSON (may be repeated)")
    parser.add_argument("--ranks", type=int, metavar="N", help="compare only the runs of N GPUs")
    parser.add_argument("--markdown", "--out-md", metavar="OUT.md", help="also write the tables to this file")
    parser.add_argument("--png", "--out-png", metavar="OUT.png", help="draw both curves (needs matplotlib)")
    parser.add_argument("--check", action="store_true", help="exit 3 when a goal is missed")
    args = parser.parse_args(argv[1:])
    try:
        inputs = ([read_input(p) for p in args.files] + [read_input(p, "nccl-tests") for p in args.nccl_tests] +
                  [read_input(p, "bench") for p in args.bench])
    except InputError as e:
        print(f"nccl-compare: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.ranks is not None:
        kept = [i for i in inputs if i["ranks"] == args.ranks]
        for i in inputs:
            if i["ranks"] != args.ranks:
                print(f"nccl-compare: {i['path']} has {i['ranks']} GPUs, not --ranks {args.ranks}: left out",
                      file=sys.stderr)
        inputs = kept
    benches = [i for i in inputs if i["kind"] == "bench"]
    tests = [i for i in inputs if i["kind"] == "nccl-tests"]
    if not benches or not tests:
        print("nccl-compare: needs at least one bench_nccl JSON and one all_reduce_perf output", file=sys.stderr)
        return EXIT_USAGE
    lines = ["## All-reduce: bench_nccl (cudrv) against nccl-tests' all_reduce_perf", ""]
    comparisons = []
    missed = False
    for bench in sorted(benches, key=lambda b: (b["ranks"], b["path"])):
        same = [t for t in tests if t["ranks"] == bench["ranks"] and t["mode"] == bench["mode"]]
        if not same:
            given = ", ".join(f"{t['ranks']} GPUs {t['mode']}" for t in tests)
            lines += [f"{bench['path']}: no all_reduce_perf output with {bench['ranks']} GPUs, {bench['mode']}, to "
                      f"compare with (those given: {given}).", ""]
            continue
        rows, latency = compare(bench, same)
        if not rows:
            lines += [f"{bench['path']}: no message size in common with {', '.join(t['path'] for t in same)}.", ""]
            continue
        comparisons.append((bench, same, rows, latency))
        lines += table(bench, same, rows, latency) + [""]
        missed = missed or any(r["below"] for r in rows) or (latency is not None and latency["below"])
    for t in tests:
        if not any(b["ranks"] == t["ranks"] and b["mode"] == t["mode"] for b in benches):
            lines += [f"{t['path']}: no bench_nccl document with {t['ranks']} GPUs, {t['mode']}, to compare with.", ""]
    text = "\n".join(lines).rstrip() + "\n"
    sys.stdout.write(text)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(text)
    if not comparisons:
        print("nccl-compare: nothing to compare (no GPU count with both kinds of file)", file=sys.stderr)
        return EXIT_USAGE
    if args.png:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print(f"nccl-compare: matplotlib is not installed for {sys.executable}: no PNG "
                  "(scripts/install-deps.sh --plot makes .venv with it)", file=sys.stderr)
        else:
            plot(comparisons, args.png)
            print(f"nccl-compare: wrote {args.png}")
    return EXIT_GOAL if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
