#!/usr/bin/env python3
"""Host cost of cuda.core's launch, measured like bench_launch measures cudrv (for comparison).

    python3 benchmarks/bench_launch_cuda_core.py [--quick]

Same kernel (an empty kernel taking a pointer, an int and a float), same shape (1 block of 32
threads), bursts of 200 launches below the queue depth timed on the host, the stream synchronised
between bursts outside the timed section; the median over the rounds of the time per launch.
Needs cuda.core (1.x, or 0.x as cuda.core.experimental) and numpy. Exit status 2 without them.
"""
import statistics
import sys
import time

try:
    import numpy as np
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch
    except ImportError:
        from cuda.core.experimental import Device, LaunchConfig, Program, ProgramOptions, launch
except ImportError as e:  # pragma: no cover
    print(f"bench_launch_cuda_core: cuda.core or numpy missing: {e}", file=sys.stderr)
    sys.exit(2)

SOURCE = 'extern "C" __global__ void args_kernel(int* p, int n, float x) {}'


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    rounds, bursts, burst = (7, 2, 200) if quick else (41, 5, 200)
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    arch = "".join(str(v) for v in dev.compute_capability)
    prog = Program(SOURCE, code_type="c++", options=ProgramOptions(arch=f"sm_{arch}"))
    kernel = prog.compile("cubin").get_kernel("args_kernel")
    buf = dev.allocate(4, stream=stream)
    n, x = np.int32(1), np.float32(2.0)
    config = LaunchConfig(grid=1, block=32)
    for _ in range(burst):  # warm-up
        launch(stream, config, kernel, buf, n, x)
    stream.sync()
    per_launch = []
    for _ in range(rounds):
        total = 0
        for _ in range(bursts):
            t0 = time.perf_counter_ns()
            for _ in range(burst):
                launch(stream, config, kernel, buf, n, x)
            total += time.perf_counter_ns() - t0
            stream.sync()
        per_launch.append(total / (bursts * burst))
    print(f"bench_launch_cuda_core: {dev.name}, {rounds} rounds x {bursts} bursts of {burst} launches")
    print(f"| cuda.core launch | {statistics.median(per_launch) / 1000:.3f} us | best round {min(per_launch) / 1000:.3f} us |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
