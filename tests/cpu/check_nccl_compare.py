#!/usr/bin/env python3
"""Checks scripts/nccl-compare.py on the samples in tests/cpu/nccl_compare/.

    check_nccl_compare.py SCRIPT FIXTURE_DIR

The samples: all_reduce_perf output for 4 GPUs in one process (one Pid) and for 2 ranks under mpirun
(two Pids; three cycles, -N 3, whose 8 B times differ), laid out as nccl-tests prints its table (NCCL INFO lines in
between), and bench_nccl JSON documents for 2, 4 and 8 GPUs (the 8-GPU one timed by the events
method, with no all_reduce_perf output beside it). Every expected ratio is computed here from the
samples' own numbers, independently of the script. --png is checked where matplotlib is installed.
"""
import json
import os
import re
import shutil
import statistics
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


def nccl_tests_times(path):
    """{bytes: [out-of-place time]} read from the sample (size first, time the 6th field)."""
    times = {}
    for line in open(path, encoding="utf-8"):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit() and f[2] == "float":
            times.setdefault(int(f[0]), []).append(float(f[5]))
    return times


def bench_times(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    return {r["bytes"]: (r["cudrv"]["time_us"], r["raw"]["time_us"]) for r in doc["sweep"]["rows"]}


def section(text, gpus):
    """The part of the output for one GPU count."""
    m = re.search(rf"^### {gpus} GPUs:.*?(?=^### |\Z)", text, re.S | re.M)
    return m.group(0) if m else ""


def row(text, size):
    m = re.search(rf"^\| {re.escape(size)} \|.*$", text, re.M)
    return m.group(0) if m else ""


def expect_pair(out, fixtures, gpus):
    """Each common size's ratio and goal mark, and the latency row, as computed from the samples."""
    ref = nccl_tests_times(os.path.join(fixtures, f"all_reduce_perf_{gpus}gpu.txt"))
    bench = bench_times(os.path.join(fixtures, f"bench_nccl_{gpus}gpu.json"))
    part = section(out, gpus)
    check(part != "", f"{gpus} GPUs: a section")
    labels = {8: "8 B", 16: "16 B", 64: "64 B", 512: "512 B", 4096: "4 KiB", 32768: "32 KiB", 262144: "256 KiB",
              2097152: "2 MiB", 16777216: "16 MiB", 134217728: "128 MiB", 1073741824: "1 GiB"}
    bandwidth_rows = part.split("| latency |")[0]
    missed = False
    for nbytes, label in labels.items():
        line = row(bandwidth_rows, label)
        if nbytes not in ref or nbytes not in bench:
            check(line == "", f"{gpus} GPUs: {label} (measured by one side only) left out")
            continue
        ratio = statistics.median(ref[nbytes]) / bench[nbytes][0]
        raw_ratio = statistics.median(ref[nbytes]) / bench[nbytes][1]
        cells = [c.strip() for c in line.strip("|").split("|")]
        check(len(cells) == 7 and cells[3] == f"{ratio:.3f}" and cells[5] == f"{raw_ratio:.3f}",
              f"{gpus} GPUs, {label}: cudrv / nccl-tests {ratio:.3f}, raw / nccl-tests {raw_ratio:.3f} ({line})")
        if nbytes >= 64 << 20:
            below = ratio < 0.99
            missed = missed or below
            check(("**below goal**" in line) == below, f"{gpus} GPUs, {label}: marked {'below' if below else 'met'}")
        else:
            check("goal" not in line and "met" not in line, f"{gpus} GPUs, {label}: no goal below 64 MiB")
    ref8 = statistics.median(ref[8])
    latency = row(part.split("| latency |")[1] if "| latency |" in part else "", "8 B")
    ratio = bench[8][0] / ref8
    check(latency.startswith(f"| 8 B | {ref8:.2f} us | {bench[8][0]:.2f} us | {ratio:.3f} |"),
          f"{gpus} GPUs: latency row with the median nccl-tests time {ref8:.2f} us and ratio {ratio:.3f} ({latency})")
    check(("**below goal**" in latency) == (ratio > 1.02), f"{gpus} GPUs: latency goal mark")
    return missed or ratio > 1.02


def main():
    script, fixtures = sys.argv[1], sys.argv[2]
    files = sorted(os.path.join(fixtures, f) for f in os.listdir(fixtures))
    rc, out, err = run(script, *files)
    check(rc == 0, f"a run over every sample exits 0 (got {rc}; {err.strip()})")
    missed4 = expect_pair(out, fixtures, 4)
    missed2 = expect_pair(out, fixtures, 2)
    check(missed4 and not missed2, "the samples: 4 GPUs miss a goal, 2 GPUs meet every goal")
    check("bench_nccl_8gpu_events.json: no all_reduce_perf output with 8 GPUs, mpi," in out,
          "an 8-GPU document without all_reduce_perf output is named, not compared")
    check(re.search(r"2 GPUs.*\(mpi,", out) is not None and re.search(r"4 GPUs.*\(single-process,", out) is not None,
          "each table names bench_nccl's process mode")

    with tempfile.TemporaryDirectory() as tmp:
        md = os.path.join(tmp, "cmp.md")
        rc, out_md, _ = run(script, "--markdown", md, *files)
        check(rc == 0 and open(md, encoding="utf-8").read() == out_md, "--markdown writes what stdout shows")
        rc, _, _ = run(script, "--check", *files)
        check(rc == 3, f"--check exits 3 when a goal is missed (got {rc})")
        two = [os.path.join(fixtures, "all_reduce_perf_2gpu.txt"), os.path.join(fixtures, "bench_nccl_2gpu.json")]
        rc, _, _ = run(script, "--check", *two)
        check(rc == 0, f"--check exits 0 when every goal is met (got {rc})")

        events = os.path.join(tmp, "events.json")
        with open(two[1], encoding="utf-8") as f:
            doc = json.load(f)
        doc["sweep"]["method"] = "events"
        with open(events, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        rc, out_ev, _ = run(script, two[0], events)
        check(rc == 0 and "not like nccl-tests" in out_ev, "a run timed by the events method is flagged")

        four_mpi = os.path.join(tmp, "four_mpi.json")
        with open(os.path.join(fixtures, "bench_nccl_4gpu.json"), encoding="utf-8") as f:
            doc = json.load(f)
        doc["process_mode"] = "mpi"
        with open(four_mpi, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        rc, out_mode, _ = run(script, os.path.join(fixtures, "all_reduce_perf_4gpu.txt"), four_mpi)
        check(rc == 1 and "no all_reduce_perf output with 4 GPUs, mpi," in out_mode and "4 GPUs single-process" in out_mode
              and "no bench_nccl document with 4 GPUs, single-process" in out_mode,
              "one process is not compared with several (all_reduce_perf's rank lines name one Pid)")

        empty = os.path.join(tmp, "empty.txt")
        open(empty, "w", encoding="utf-8").write("# nccl-tests version 2.19.6\n# no table here\n")
        rc, _, err = run(script, empty, two[1])
        check(rc == 1 and "no all_reduce_perf table found" in err, f"a text without the table is refused ({err.strip()})")
        other = os.path.join(tmp, "other.json")
        open(other, "w", encoding="utf-8").write('{"benchmark": "bench_vmm"}\n')
        rc, _, err = run(script, two[0], other)
        check(rc == 1 and "not bench_nccl's" in err, f"another program's JSON is refused ({err.strip()})")
        rc, _, err = run(script, two[0])
        check(rc == 1 and "needs at least one bench_nccl JSON" in err, "nccl-tests output alone is refused")
        rc, _, err = run(script, two[0], os.path.join(tmp, "missing.json"))
        check(rc == 1 and "missing.json" in err, "a missing file is named")

        # The form scripts/gpu-suite.sh uses: each file's kind named, one GPU count.
        rc, out_flags, err = run(script, "--nccl-tests", os.path.join(fixtures, "all_reduce_perf_4gpu.txt"),
                                 "--bench", os.path.join(fixtures, "bench_nccl_4gpu.json"), "--ranks", "4",
                                 "--out-md", md)
        def table_lines(text):
            return [line for line in section(text, 4).splitlines() if line.startswith("|")]

        check(rc == 0 and table_lines(out_flags) == table_lines(out) and table_lines(out) and section(out_flags, 2) == ""
              and open(md, encoding="utf-8").read() == out_flags,
              f"--nccl-tests/--bench/--ranks/--out-md give the same 4-GPU table ({err.strip()})")
        rc, _, err = run(script, "--bench", os.path.join(fixtures, "all_reduce_perf_4gpu.txt"), two[0])
        check(rc == 1 and "given as bench_nccl's JSON" in err, "a file of the other kind than named is refused")
        rc, _, err = run(script, "--ranks", "8", *two)
        check(rc == 1 and "not --ranks 8" in err, "--ranks with no run of that size is refused")

        png = os.path.join(tmp, "cmp.png")
        rc, _, err = run(script, "--png", png, *files)
        if "matplotlib is not installed" in err:
            check(rc == 0 and not os.path.exists(png), "without matplotlib: no PNG, exit 0")
            print("skipped the PNG's content: matplotlib is not installed for " + sys.executable)
        else:
            with open(png, "rb") as f:
                head = f.read(8)
            check(rc == 0 and head == b"\x89PNG\r\n\x1a\n", f"--png writes a PNG (rc {rc}; {err.strip()})")
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
