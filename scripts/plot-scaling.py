#!/usr/bin/env python3
"""Tabulates and draws the heat_halo scaling runs of `scripts/gpu-suite.sh --only scaleout`.

    plot-scaling.py SCALING.jsonl [OUT.png]

SCALING.jsonl holds one JSON line per run and exchange method: example_heat_halo's line with
"scaling" ("strong": the same grid over k ranks; "weak": the same cells per rank), "cells" (the whole
grid) and "steps" added. Skipped methods (the GPU-aware exchange where MPI is not GPU-aware) are left
out. Prints a Markdown table per kind: ranks, steps per second and efficiency of each method, where

    strong efficiency(k) = steps/s(k) / (k * steps/s(1))   (ideal: k ranks are k times as fast)
    weak efficiency(k)   = steps/s(k) / steps/s(1)         (ideal: the same speed with k times the grid)

and steps/s(1) is the same method's run with one rank. With OUT.png (needs matplotlib:
scripts/install-deps.sh --plot makes .venv), draws the strong-scaling speedup and the weak-scaling
efficiency against the number of ranks, with the ideal lines.
"""
import json
import sys


def read_runs(path):
    """{(kind, method): {ranks: steps_per_second}} of the runs that were not skipped."""
    runs = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            r = json.loads(line)
            if r.get("skipped") or r.get("example") != "heat_halo":
                continue
            runs.setdefault((r["scaling"], r["exchange"]), {})[int(r["ranks"])] = float(r["value"])
    return runs


def efficiency(kind, ranks, rate, base):
    ideal = base * ranks if kind == "strong" else base
    return rate / ideal if ideal > 0 else 0.0


def table(runs, kind):
    methods = sorted(m for (k, m) in runs if k == kind)
    if not methods:
        return ""
    ranks = sorted({n for m in methods for n in runs[(kind, m)]})
    head = "| ranks | " + " | ".join(f"{m}: steps/s | {m}: efficiency" for m in methods) + " |"
    rule = "|---:|" + "---:|---:|" * len(methods)
    rows = [head, rule]
    for n in ranks:
        cells = []
        for m in methods:
            series = runs[(kind, m)]
            if n in series and 1 in series:
                cells += [f"{series[n]:.0f}", f"{efficiency(kind, n, series[n], series[1]):.3f}"]
            else:
                cells += ["", ""]
        rows.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def plot(runs, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (strong, weak) = plt.subplots(1, 2, figsize=(11, 4.2))
    top = 1
    for (kind, method), series in sorted(runs.items()):
        if 1 not in series:
            continue
        ranks = sorted(series)
        top = max(top, ranks[-1])
        if kind == "strong":
            strong.plot(ranks, [series[n] / series[1] for n in ranks], marker="o", label=method)
        else:
            weak.plot(ranks, [series[n] / series[1] for n in ranks], marker="o", label=method)
    strong.plot([1, top], [1, top], linestyle="--", color="grey", label="ideal")
    strong.set_title("strong scaling: one grid over more GPUs")
    strong.set_xlabel("ranks (one GPU each)")
    strong.set_ylabel("speedup over one rank")
    weak.axhline(1.0, linestyle="--", color="grey", label="ideal")
    weak.set_ylim(0, 1.1)
    weak.set_title("weak scaling: the same cells per GPU")
    weak.set_xlabel("ranks (one GPU each)")
    weak.set_ylabel("efficiency (steps/s against one rank)")
    for ax in (strong, weak):
        ax.set_xticks(range(1, top + 1))
        ax.grid(True, alpha=0.3)
        ax.legend()
    fig.suptitle("example_heat_halo: 1-D heat equation, halo exchange every step")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 1
    runs = read_runs(argv[1])
    if not runs:
        print(f"plot-scaling: no heat_halo runs in {argv[1]}", file=sys.stderr)
        return 1
    for kind in ("strong", "weak"):
        t = table(runs, kind)
        if t:
            print(f"{kind} scaling\n\n{t}\n")
    if len(argv) == 3:
        plot(runs, argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
