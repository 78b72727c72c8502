#!/usr/bin/env python3
"""Checks scripts/bandwidth-compare.py on the samples in tests/cpu/bandwidth_compare/.

    check_bandwidth_compare.py SCRIPT FIXTURE_DIR

The samples (issue 36: bandwidth), written by hand in the layouts the two tools print for 2 GPUs:
nvbandwidth's plain text (its header, "Running <test>." lines, captions, N/A cells, SUM lines, a
bidirectional test's three matrices, a latency test, a test only nvbandwidth ran and a waived one) and
cudrv-query's --bandwidth --json document (one bidirectional matrix 7% below, a waived test and the
all-to-all test nvbandwidth has not). Every expected ratio and mark is computed here from the samples'
own numbers, independently of the script. --png is checked where matplotlib is installed.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

failures = []


def check(condition, what):
    print(("ok      " if condition else "FAILED  ") + what)
    if not condition:
        failures.append(what)


def run(script, *args):
    p = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, check=False)
    return p.returncode, p.stdout, p.stderr


def nvbandwidth_matrices(path):
    """{key: (cells, sum)}: each matrix's numbers in reading order and its SUM, read from the sample."""
    out, cells = {}, []
    for line in open(path, encoding="utf-8"):
        f = line.split()
        if f and f[0] == "SUM":
            out[f[1]] = (cells, float(f[2]))
            cells = []
        elif len(f) >= 2 and re.fullmatch(r"\d+", f[0]) and any(re.fullmatch(r"[\d.]+|N/A", x) for x in f[1:]) \
                and not all(re.fullmatch(r"\d+", x) for x in f):
            cells.extend(None if x == "N/A" else float(x) for x in f[1:])
    return out


def main():
    script, fixtures = sys.argv[1], sys.argv[2]
    nvb_path = os.path.join(fixtures, "nvbandwidth-2gpu.txt")
    ours_path = os.path.join(fixtures, "cudrv-query-2gpu.json")
    nvb = nvbandwidth_matrices(nvb_path)
    with open(ours_path, encoding="utf-8") as f:
        doc = json.load(f)
    ours = {m["key"]: m for t in doc["bandwidth"]["tests"] for m in t["matrices"]}
    rc, out, err = run(script, "--nvbandwidth", nvb_path, "--cudrv", ours_path)
    check(rc == 0, f"a run over the samples exits 0 (got {rc}; {err.strip()})")
    common = [k for k in ours if k in nvb]
    check(len(common) == 7, f"the samples share 7 matrices (got {len(common)})")
    any_outside = False
    for key in common:
        nvb_cells, nvb_sum = nvb[key]
        mine = ours[key]
        ratio = mine["sum"] / nvb_sum
        flat = [v for row in mine["values"] for v in row]
        pairs = [(o / n) for o, n in zip(flat, nvb_cells) if o is not None and n is not None]
        worst = max(pairs, key=lambda c: abs(c - 1))
        outside = abs(ratio - 1) > 0.02
        any_outside = any_outside or outside
        line = next((l for l in out.splitlines() if l.startswith(f"| {key} |")), "")
        cells = [c.strip() for c in line.strip("|").split("|")]
        check(len(cells) == 7 and cells[2] == f"{nvb_sum:.2f}" and cells[3] == f"{mine['sum']:.2f}"
              and cells[4].startswith(f"{ratio:.3f}") and cells[5] == str(len(pairs)) and cells[6] == f"{worst:.3f}",
              f"{key}: sums {nvb_sum:.2f} / {mine['sum']:.2f}, ratio {ratio:.3f}, {len(pairs)} cells, worst {worst:.3f} ({line})")
        check(("**outside 2%**" in line) == outside, f"{key}: marked {'outside' if outside else 'within'} 2%")
    check(any_outside, "the samples: a matrix outside 2%")
    within = sum(1 for k in common if abs(ours[k]["sum"] / nvb[k][1] - 1) <= 0.02)
    check(f"{within} of {len(common)} matrices within 2%" in out, f"the count line says {within} of {len(common)}")
    check("- all_to_all_memcpy_write_ce: cudrv-query only (no nvbandwidth test)" in out, "cudrv-query's own test named")
    check("- one_to_all_write_ce: nvbandwidth only" in out, "a test only nvbandwidth ran is named")
    check("- device_to_device_latency_sm: waived by cudrv-query" in out, "cudrv-query's waived test is named")
    check("- multinode_device_to_device_memcpy_read_ce: Waived by nvbandwidth" in out, "nvbandwidth's waived test")
    check("| host_device_latency_sm | ns |" in out, "the latency row carries its unit")

    with tempfile.TemporaryDirectory() as tmp:
        md = os.path.join(tmp, "cmp.md")
        rc, out_md, _ = run(script, "--nvbandwidth", nvb_path, "--cudrv", ours_path, "--markdown", md)
        check(rc == 0 and open(md, encoding="utf-8").read() == out_md, "--markdown writes what stdout shows")
        rc, _, _ = run(script, "--nvbandwidth", nvb_path, "--cudrv", ours_path, "--check")
        check(rc == 3, f"--check exits 3 when a matrix is outside 2% (got {rc})")
        fixed = os.path.join(tmp, "fixed.json")
        for t in doc["bandwidth"]["tests"]:
            for m in t["matrices"]:
                if m["key"] in nvb:
                    m["sum"] = nvb[m["key"]][1]
        with open(fixed, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        rc, _, _ = run(script, "--nvbandwidth", nvb_path, "--cudrv", fixed, "--check")
        check(rc == 0, f"--check exits 0 when every matrix is within 2% (got {rc})")

        other = os.path.join(tmp, "other.json")
        open(other, "w", encoding="utf-8").write('{"view": "bench", "bench": {}}\n')
        rc, _, err = run(script, "--nvbandwidth", nvb_path, "--cudrv", other)
        check(rc == 1 and "not a cudrv-query --bandwidth --json document" in err, f"another view is refused ({err.strip()})")
        empty = os.path.join(tmp, "empty.txt")
        open(empty, "w", encoding="utf-8").write("nvbandwidth Version: v0.8\n")
        rc, _, err = run(script, "--nvbandwidth", empty, "--cudrv", ours_path)
        check(rc == 1 and "no nvbandwidth test" in err, f"a text without a test is refused ({err.strip()})")
        rc, _, err = run(script, "--nvbandwidth", os.path.join(tmp, "missing.txt"), "--cudrv", ours_path)
        check(rc == 1 and "missing.txt" in err, "a missing file is named")
        rc, _, _ = run(script, "--cudrv", ours_path)
        check(rc == 1, "--nvbandwidth is required")

        png = os.path.join(tmp, "heat.png")
        rc, _, err = run(script, "--nvbandwidth", nvb_path, "--cudrv", ours_path, "--png", png)
        if "matplotlib is not installed" in err:
            check(rc == 0 and not os.path.exists(png), "without matplotlib: no PNG, exit 0")
            print("skipped the PNG's content: matplotlib is not installed for " + sys.executable)
        else:
            with open(png, "rb") as f:
                head = f.read(8)
            check(rc == 0 and head == b"\x89PNG\r\n\x1a\n", f"--png writes a PNG (rc {rc}; {err.strip()})")
        rc, _, err = run(script, "--nvbandwidth", nvb_path, "--cudrv", ours_path, "--png", png,
                         "--heatmap-test", "device_local_copy")
        check(rc == 0 and "no device-to-device matrix device_local_copy" in err, "a one-row matrix draws no heat map")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
