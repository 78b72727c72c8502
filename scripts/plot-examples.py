#!/usr/bin/env python3
"""Draws the examples' figures (docs/examples.png) from the JSON lines scripts/run-examples.sh collects.

    plot-examples.py EXAMPLES.jsonl DEVICE.json OUT.png

Left: each example's fraction of its limit (the copy bandwidth, CUB, cuBLAS, one stream, ...) with the
target it should reach. Right: a roofline of the device, its memory bandwidth and FP32 peak computed
from the attributes in DEVICE.json (cudrv-query --details --json), with each example that counted its
floating-point operations and bytes placed on it. Needs matplotlib (scripts/install-deps.sh --plot).
"""
import json
import sys


def read_figures(path):
    figures = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                figures.append(json.loads(line))
    if not figures:
        raise SystemExit(f"plot-examples: no figures in {path}")
    return figures


def device_peaks(path):
    """(name, bytes per second, FP32 FLOP per second) of device 0, from its attributes."""
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    dev = doc["devices"][0]
    attrs = dev["attributes"]

    def value(key):
        return float(attrs[key]["value"])

    bandwidth = 2.0 * value("memory_clock_rate") * 1e3 * value("global_memory_bus_width") / 8.0  # DDR: 2 per clock
    # FP32 lanes per multiprocessor: 64 on compute capability 6.0, 7.x and 8.0, 128 on the others
    # (5.x, 6.1, 6.2, 8.6 and later, Hopper included); the same rule as examples/sgemm.cpp.
    cc = (int(value("compute_capability_major")), int(value("compute_capability_minor")))
    lanes = 64 if cc[0] == 7 or cc in ((6, 0), (8, 0)) else 128
    flops = 2.0 * lanes * value("multiprocessor_count") * value("clock_rate") * 1e3  # an FMA is 2 operations
    return dev["name"], bandwidth, flops


def main(argv):
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = read_figures(argv[1])
    name, bandwidth, flops = device_peaks(argv[2])

    fig, (bars, roof) = plt.subplots(1, 2, figsize=(14, 5.5))

    # Left: fraction of the limit per figure, in the order measured; the target as a tick.
    names = []
    for f in figures:
        n = f["example"]
        # Several figures of one example (sgemm at two sizes): tell them apart by the size in their detail.
        same = [g for g in figures if g["example"] == n]
        names.append(n if len(same) == 1 else f"{n} #{same.index(f) + 1}")
    fractions = [f["fraction"] for f in figures]
    colors = ["tab:green" if f["target"] <= 0 or f["fraction"] >= f["target"] else "tab:red" for f in figures]
    y = range(len(figures))
    bars.barh(list(y), fractions, color=colors)
    for i, f in enumerate(figures):
        if f["target"] > 0:
            bars.plot([f["target"], f["target"]], [i - 0.4, i + 0.4], color="black", linewidth=2)
        bars.text(f["fraction"] + 0.02, i, f'{f["fraction"]:.2f} x {f["reference_name"]}', va="center", fontsize=8)
    bars.set_yticks(list(y))
    bars.set_yticklabels(names)
    bars.invert_yaxis()
    bars.set_xlabel("fraction of the reference (black: target)")
    bars.set_xlim(0, max(2.0, max(fractions) * 1.35))
    bars.set_title("Each example against its limit, same run")

    # Right: roofline. x: FLOP per byte moved through device memory; y: FLOP/s. Only the examples that
    # count floating-point operations and bytes can be placed; the others are named under the plot.
    placed = [(f, n) for f, n in zip(figures, names)
              if f.get("flops", 0) > 0 and f.get("bytes", 0) > 0 and f.get("seconds", 0) > 0]
    unplaced = sorted({f["example"] for f in figures} - {f["example"] for f, _ in placed})
    xs = [f["flops"] / f["bytes"] for f, _ in placed]
    lo = min(xs + [0.05]) / 2
    hi = max(xs + [flops / bandwidth * 4]) * 2
    ridge = flops / bandwidth
    roof.plot([lo, ridge, hi], [lo * bandwidth, flops, flops], color="black")
    roof.text(lo * 1.2, lo * bandwidth * 1.6, f"{bandwidth / 1e9:.0f} GB/s", rotation=0, fontsize=8)
    roof.text(ridge * 1.2, flops * 1.15, f"FP32 {flops / 1e12:.1f} TFLOP/s", fontsize=8)
    for i, ((f, n), x) in enumerate(zip(placed, xs)):
        rate = f["flops"] / f["seconds"]
        roof.scatter([x], [rate], zorder=3)
        # Alternate below and above the point, so that neighbours (sgemm at two sizes) stay readable.
        roof.annotate(n, (x, rate), textcoords="offset points", xytext=(5, -12 if i % 2 == 0 else 6), fontsize=8)
    if unplaced:
        roof.text(0.02, 0.02, "no FLOPs counted (not placed): " + ", ".join(unplaced), transform=roof.transAxes,
                  fontsize=7, va="bottom")
    roof.set_xscale("log")
    roof.set_yscale("log")
    roof.set_xlabel("arithmetic intensity (FLOP per byte of device memory)")
    roof.set_ylabel("FLOP/s")
    roof.set_title(f"Roofline of {name} (from its attributes)")
    roof.grid(True, which="both", alpha=0.3)

    fig.tight_layout()
    fig.savefig(argv[3], dpi=110)
    print(f"plot-examples: wrote {argv[3]} ({len(figures)} figures, {len(placed)} on the roofline)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
