// bench_launch: the host cost of a cudrv launch against the raw driver call, and heap allocations.
//
//   bench_launch [--quick]
//
// One binary, one device, one stream, one kernel (an empty kernel with three parameters: a pointer,
// an int and a float, loaded from PTX). Each round times, for every case, bursts of 200 launches
// (below the launch queue's depth, so the host never waits for the GPU) with steady_clock, and
// synchronises the stream between bursts outside the timed section. The order of the cases rotates
// from round to round. Reported per case: the median host time per launch over the rounds and the
// paired ratio (the median over the rounds of cudrv/raw within the round). Pairs:
//   cudrv typed    vs raw cuLaunchKernel
//   cudrv untyped  vs raw cuLaunchKernel   (argument sizes checked against the cached layout)
//   cudrv typed, launch_config with a priority  vs raw cuLaunchKernelEx with the priority attribute
//   raw cuLaunchKernel vs itself (A/A: the noise floor)
// Heap allocations are counted with a replaced global operator new over all cudrv bursts.
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA error.
#include <cudaTypedefs.h>

#include <cudrv/cudrv.hpp>

#include "bench_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <vector>

namespace {

using steady = std::chrono::steady_clock;

struct bench_case {
  std::string name;
  std::function<void()> launch;  // one launch
  bool is_cudrv;
  std::vector<double> per_launch_ns;
};

}  // namespace

int main(int argc, char** argv) {
  int rounds = 41;
  int bursts = 5;
  const int burst = 200;
  bool quick = false;
  if (int status = bench::start("bench_launch", argc, argv, quick); status >= 0) {
    return status;
  }
  if (quick) {
    rounds = 7;
    bursts = 2;
  }
  try {
    bench::args_kernel_fixture fx;
    cudrv::device& dev = fx.dev;
    cudrv::stream& s = fx.stream;
    cudrv::library& lib = fx.lib;
    cudrv::typed_kernel_ref<void(int*, int, float)> typed = fx.typed;
    cudrv::kernel untyped = lib.get_kernel("args_kernel");
    int* ptr = fx.ptr;
    int n = fx.n;
    float x = fx.x;

    auto raw_launch =
        reinterpret_cast<PFN_cuLaunchKernel_v4000>(cudrv::driver::get_entry_point("cuLaunchKernel", 4000));
    auto raw_launch_ex =
        reinterpret_cast<PFN_cuLaunchKernelEx_v11060>(cudrv::driver::get_entry_point("cuLaunchKernelEx", 11060));
    CUfunction f = untyped.native_function();
    CUstream hs = s.native_handle();
    int lo = 0, hi = 0;
    auto range = reinterpret_cast<PFN_cuCtxGetStreamPriorityRange_v5050>(
        cudrv::driver::get_entry_point("cuCtxGetStreamPriorityRange", 5050));
    bench::check(range(&lo, &hi), "cuCtxGetStreamPriorityRange");
    const int priority = hi;  // the highest priority

    const cudrv::launch_config plain{.grid = 1, .block = 32};
    cudrv::launch_config with_priority = plain;
    with_priority.priority = priority;

    auto raw = [&] {
      void* args[] = {&ptr, &n, &x};
      bench::check(raw_launch(f, 1, 1, 1, 32, 1, 1, 0, hs, args, nullptr), "cuLaunchKernel");
    };
    auto raw_ex = [&] {
      void* args[] = {&ptr, &n, &x};
      CUlaunchAttribute attr{};
      attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
      attr.value.priority = priority;
      CUlaunchConfig lc{};
      lc.gridDimX = lc.gridDimY = lc.gridDimZ = 1;
      lc.blockDimX = 32;
      lc.blockDimY = lc.blockDimZ = 1;
      lc.hStream = hs;
      lc.attrs = &attr;
      lc.numAttrs = 1;
      bench::check(raw_launch_ex(&lc, f, args, nullptr), "cuLaunchKernelEx");
    };
    std::vector<bench_case> cases = {
        {"raw cuLaunchKernel", raw, false, {}},
        {"cudrv typed", [&] { cudrv::launch(s, plain, typed, ptr, n, x); }, true, {}},
        {"cudrv untyped", [&] { cudrv::launch(s, plain, untyped, ptr, n, x); }, true, {}},
        {"raw cuLaunchKernelEx (priority)", raw_ex, false, {}},
        {"cudrv typed (priority)", [&] { cudrv::launch(s, with_priority, typed, ptr, n, x); }, true, {}},
        {"raw cuLaunchKernel (A/A copy)", raw, false, {}},
    };
    // Warm-up.
    for (auto& c : cases) {
      for (int i = 0; i < burst; ++i) {
        c.launch();
      }
      s.synchronize();
    }
    long long cudrv_launches = 0;
    long long cudrv_allocations = 0;
    for (int round = 0; round < rounds; ++round) {
      for (std::size_t k = 0; k < cases.size(); ++k) {
        auto& c = cases[(k + static_cast<std::size_t>(round)) % cases.size()];
        double total = 0;
        for (int b = 0; b < bursts; ++b) {
          long long before = bench::heap_allocations.load();
          auto t0 = steady::now();
          for (int i = 0; i < burst; ++i) {
            c.launch();
          }
          total += std::chrono::duration<double, std::nano>(steady::now() - t0).count();
          if (c.is_cudrv) {
            cudrv_allocations += bench::heap_allocations.load() - before;
            cudrv_launches += burst;
          }
          s.synchronize();
        }
        c.per_launch_ns.push_back(total / (bursts * burst));
      }
      std::fprintf(stderr, "\rbench_launch: round %d/%d", round + 1, rounds);
    }
    std::fprintf(stderr, "\n");

    auto paired = [&](std::size_t a, std::size_t b) {
      std::vector<double> r;
      for (int i = 0; i < rounds; ++i) {
        r.push_back(cases[a].per_launch_ns[i] / cases[b].per_launch_ns[i]);
      }
      return bench::median(r);
    };
    std::printf("bench_launch: device 0 (%s), driver CUDA %d.%d; %d rounds x %d bursts of %d launches\n",
                dev.name().c_str(), cudrv::driver::version() / 1000, cudrv::driver::version() % 1000 / 10, rounds,
                bursts, burst);
    std::printf(
        "\n| case | host time per launch (median) | best round | paired ratio | against |\n|---|---:|---:|---:|---|\n");
    const std::size_t against[] = {0, 0, 0, 3, 3, 0};
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto& c = cases[i];
      double best = *std::min_element(c.per_launch_ns.begin(), c.per_launch_ns.end());
      if (i == 0 || i == 3) {  // the baselines
        std::printf("| %s | %.3f us | %.3f us | | |\n", c.name.c_str(), bench::median(c.per_launch_ns) / 1000,
                    best / 1000);
      } else {
        std::printf("| %s | %.3f us | %.3f us | %.3f | %s |\n", c.name.c_str(), bench::median(c.per_launch_ns) / 1000,
                    best / 1000, paired(i, against[i]), cases[against[i]].name.c_str());
      }
    }
    std::printf("\nheap allocations in %lld cudrv launches: %lld (%.4f per launch)\n", cudrv_launches,
                cudrv_allocations, cudrv_launches > 0 ? static_cast<double>(cudrv_allocations) / cudrv_launches : 0.0);
    return cudrv_allocations == 0 ? 0 : 4;
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "bench_launch: %s\n", e.what());
    return 4;
  }
}
