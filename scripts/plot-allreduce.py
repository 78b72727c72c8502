#!/usr/bin/env python3
"""Draws all-reduce bandwidth against message size, cudrv and raw NCCL, from bench_nccl's JSON.

    plot-allreduce.py BENCH.json OUT.png

BENCH.json is what `bench_nccl sweep --json BENCH.json` (or `all`) writes. Top: bus bandwidth (busbw,
nccl-tests' definition: algbw * 2(n-1)/n for n ranks) of both paths against the size, both axes
logarithmic; with one rank busbw is 0 by that definition, so the algorithm bandwidth (algbw = bytes /
time) is drawn instead and the axis says so. Bottom: the paired bandwidth ratio cudrv / raw per size
with the goal (>= 0.98 from 64 MiB up). Needs matplotlib (scripts/install-deps.sh --plot makes .venv).
"""
import json
import sys

GOAL = 0.98
GOAL_FROM = 64 << 20  # the goal holds from 64 MiB up


def size_label(b):
    """8, 512, 4K, 1M, 1G: powers of 1024 with K, M and G."""
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift}{suffix}"
    return str(b)


def read_sweep(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    sweep = doc.get("sweep")
    if not sweep or not sweep.get("rows"):
        raise SystemExit(f"plot-allreduce: {path} has no sweep rows (run bench_nccl sweep --json {path})")
    return doc, sweep


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    doc, sweep = read_sweep(argv[1])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rows = sorted(sweep["rows"], key=lambda r: r["bytes"])
    metric = sweep.get("bandwidth_metric", "busbw")
    ranks = doc.get("ranks", 1)
    sizes = [r["bytes"] for r in rows]
    cudrv = [r["cudrv"][f"{metric}_gbps"] for r in rows]
    raw = [r["raw"][f"{metric}_gbps"] for r in rows]
    ratios = [r["bandwidth_ratio"] for r in rows]

    fig, (bw, rt) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]})

    bw.plot(sizes, raw, marker="o", markersize=4, label="raw NCCL (ncclAllReduce)", color="tab:gray")
    bw.plot(sizes, cudrv, marker="s", markersize=4, label="cudrv (communicator::all_reduce)", color="tab:blue",
            linestyle="--")
    bw.set_xscale("log", base=2)
    bw.set_yscale("log")
    if metric == "busbw":
        bw.set_ylabel("bus bandwidth, busbw (GB/s)")
    else:
        bw.set_ylabel("algorithm bandwidth, algbw (GB/s)\n(one rank: busbw is 0 by definition)")
    bw.grid(True, which="both", alpha=0.3)
    bw.legend(loc="upper left")
    where = f"{ranks} rank{'s' if ranks != 1 else ''}"
    if doc.get("process_mode") == "mpi":
        where += " (MPI, one per GPU)"
    title = f"All-reduce, float sum, out of place: {where} on {doc.get('device', '?')}"
    if doc.get("nccl"):
        title += f", NCCL {doc['nccl']}"
    bw.set_title(title, fontsize=10)

    rt.plot(sizes, ratios, marker="s", markersize=4, color="tab:blue", label="cudrv / raw (paired median)")
    rt.axhline(1.0, color="black", linewidth=0.8)
    big = [s for s in sizes if s >= GOAL_FROM]
    if big:
        # The goal applies from 64M up: that part shaded, the goal drawn across it.
        rt.axvspan(big[0] / 1.2, sizes[-1] * 1.2, color="tab:red", alpha=0.06, linewidth=0)
        rt.plot([big[0] / 1.2, sizes[-1] * 1.2], [GOAL, GOAL], color="tab:red", linestyle="--", linewidth=1.5,
                zorder=3, label=f"goal >= {GOAL} (from 64M)")
    else:
        rt.axhline(GOAL, color="tab:red", linestyle="--", linewidth=1.5, zorder=3, label=f"goal >= {GOAL} (from 64M)")
    lo = min(ratios + [GOAL]) - 0.02
    hi = max(ratios + [1.0]) + 0.03  # room for the legend above the lines
    rt.set_ylim(lo, hi)
    rt.set_ylabel(f"{metric} ratio")
    rt.grid(True, alpha=0.3)
    rt.legend(loc="upper left", fontsize=8, ncol=2)

    rt.set_xticks(sizes)
    step = max(1, (len(sizes) + 13) // 14)  # at most about 14 labels
    rt.set_xticklabels([size_label(s) if i % step == 0 else "" for i, s in enumerate(sizes)], fontsize=8)
    rt.set_xlabel("message size in bytes (K, M, G: powers of 1024)")
    rt.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())  # the axes share x: one tick per size

    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    print(f"plot-allreduce: wrote {argv[2]} ({len(rows)} sizes, {metric}, {where})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
