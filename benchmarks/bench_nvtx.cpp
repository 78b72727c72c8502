// bench_nvtx: what the automatic NVTX ranges cost a launch, off (the default) and on.
//
//   bench_nvtx [--quick]
//
// The method of bench_launch: one device, one stream, one empty kernel with three parameters (a
// pointer, an int and a float, loaded from PTX), one block of 32 threads. Each round times, for every
// case, bursts of 200 launches (below the launch queue's depth, so the host never waits for the GPU)
// with steady_clock, and synchronises the stream between bursts outside the timed section; the order
// of the cases rotates from round to round. Reported per case: the median host time per launch over
// the rounds, the paired ratio and the paired difference against its reference (the medians over the
// rounds of case/reference and case - reference within the round). Cases:
//   raw cuLaunchKernel                                     the reference
//   cudrv typed launch, automatic ranges off               vs raw: the cost of the off switch
//   raw cuLaunchKernel (A/A copy)                          vs raw: the noise floor
//   cudrv typed launch, automatic ranges on                vs cudrv off: the cost of the ranges
//   raw cuLaunchKernel in an nvtx3 range (cudrv domain)    vs raw: a hand-written range, for scale
// With ranges off, cudrv's launch differs from bench_launch's "cudrv typed" only by the switch: one
// relaxed atomic load and a predictable branch on entry, a test of a local flag on exit. Without a
// profiler (NVTX_INJECTION64_PATH unset) an NVTX push or pop is a call through a null-checked
// function pointer; under Nsight Systems the "on" rows include the profiler's own recording.
// Heap allocations are counted with a replaced global operator new over the cudrv bursts; the "off"
// case must make none.
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA error or a heap
// allocation with the ranges off.
#include <cudaTypedefs.h>

#include <cudrv/cudrv.hpp>

#include <cudrv/nvtx.hpp>
#include <nvtx3/nvtx3.hpp>  // the hand-written range (nvtx.hpp leaves it out with CUDRV_ENABLE_NVTX=OFF)
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
  std::function<void()> setup;   // before each burst, outside the timed section
  std::function<void()> launch;  // one launch
  int against;                   // the reference case, -1 for none
  bool count_allocations;
  std::vector<double> per_launch_ns;
  long long launches = 0;
  long long allocations = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int rounds = 41;
  int bursts = 5;
  const int burst = 200;
  bool quick = false;
  if (int status = bench::start("bench_nvtx", argc, argv, quick); status >= 0) {
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
    cudrv::typed_kernel_ref<void(int*, int, float)> typed = fx.typed;
    int* ptr = fx.ptr;
    int n = fx.n;
    float x = fx.x;

    auto raw_launch =
        reinterpret_cast<PFN_cuLaunchKernel_v4000>(cudrv::driver::get_entry_point("cuLaunchKernel", 4000));
    CUfunction f = typed.native_function();
    CUstream hs = s.native_handle();
    const cudrv::launch_config plain{.grid = 1, .block = 32};

    auto raw = [&] {
      void* args[] = {&ptr, &n, &x};
      bench::check(raw_launch(f, 1, 1, 1, 32, 1, 1, 0, hs, args, nullptr), "cuLaunchKernel");
    };
    auto ranges_off = [] { cudrv::nvtx::enable_automatic_ranges(false); };
    auto ranges_on = [] { cudrv::nvtx::enable_automatic_ranges(true); };
    auto nothing = [] {};
    std::vector<bench_case> cases = {
        {"raw cuLaunchKernel", nothing, raw, -1, false, {}},
        {"cudrv typed, automatic ranges off",
         ranges_off,
         [&] { cudrv::launch(s, plain, typed, ptr, n, x); },
         0,
         true,
         {}},
        {"raw cuLaunchKernel (A/A copy)", nothing, raw, 0, false, {}},
        {"cudrv typed, automatic ranges on",
         ranges_on,
         [&] { cudrv::launch(s, plain, typed, ptr, n, x); },
         1,
         true,
         {}},
        {"raw cuLaunchKernel in an nvtx3 range",
         nothing,
         [&] {
           nvtx3::scoped_range_in<cudrv::nvtx::domain> r{"cudrv::launch args_kernel"};
           raw();
         },
         0,
         false,
         {}},
    };
    // Warm-up (this also runs NVTX's one-time initialisation).
    for (auto& c : cases) {
      c.setup();
      for (int i = 0; i < burst; ++i) {
        c.launch();
      }
      s.synchronize();
    }
    for (int round = 0; round < rounds; ++round) {
      for (std::size_t k = 0; k < cases.size(); ++k) {
        auto& c = cases[(k + static_cast<std::size_t>(round)) % cases.size()];
        double total = 0;
        for (int b = 0; b < bursts; ++b) {
          c.setup();
          const long long before = bench::heap_allocations.load();
          const auto t0 = steady::now();
          for (int i = 0; i < burst; ++i) {
            c.launch();
          }
          total += std::chrono::duration<double, std::nano>(steady::now() - t0).count();
          if (c.count_allocations) {
            c.allocations += bench::heap_allocations.load() - before;
            c.launches += burst;
          }
          s.synchronize();
        }
        c.per_launch_ns.push_back(total / (bursts * burst));
      }
      std::fprintf(stderr, "\rbench_nvtx: round %d/%d", round + 1, rounds);
    }
    std::fprintf(stderr, "\n");
    cudrv::nvtx::enable_automatic_ranges(false);

    auto paired = [&](std::size_t a, std::size_t b, bool ratio) {
      std::vector<double> r;
      for (int i = 0; i < rounds; ++i) {
        const double x_a = cases[a].per_launch_ns[static_cast<std::size_t>(i)];
        const double x_b = cases[b].per_launch_ns[static_cast<std::size_t>(i)];
        r.push_back(ratio ? x_a / x_b : x_a - x_b);
      }
      return bench::median(r);
    };
    const char* tool = std::getenv("NVTX_INJECTION64_PATH");
    std::printf("bench_nvtx: device 0 (%s), driver CUDA %d.%d; %d rounds x %d bursts of %d launches\n",
                dev.name().c_str(), cudrv::driver::version() / 1000, cudrv::driver::version() % 1000 / 10, rounds,
                bursts, burst);
    std::printf("NVTX tool: %s\n", tool != nullptr && tool[0] != '\0' ? tool : "none (NVTX_INJECTION64_PATH unset)");
    if (!cudrv::nvtx::compiled_in) {
      std::printf(
          "cudrv was built with CUDRV_ENABLE_NVTX=OFF: the automatic ranges are compiled out, so \"on\" is \"off\"\n");
    }
    std::printf("\n| case | host time per launch (median) | best round | paired ratio | paired difference | against |\n"
                "|---|---:|---:|---:|---:|---|\n");
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const auto& c = cases[i];
      const double best = *std::min_element(c.per_launch_ns.begin(), c.per_launch_ns.end());
      if (c.against < 0) {
        std::printf("| %s | %.3f us | %.3f us | | | |\n", c.name.c_str(), bench::median(c.per_launch_ns) / 1000,
                    best / 1000);
      } else {
        const auto ref = static_cast<std::size_t>(c.against);
        std::printf("| %s | %.3f us | %.3f us | %.3f | %+.1f ns | %s |\n", c.name.c_str(),
                    bench::median(c.per_launch_ns) / 1000, best / 1000, paired(i, ref, true), paired(i, ref, false),
                    cases[ref].name.c_str());
      }
    }
    std::printf("\n");
    for (const auto& c : cases) {
      if (c.count_allocations) {
        std::printf("heap allocations in %lld launches, %s: %lld (%.4f per launch)\n", c.launches, c.name.c_str(),
                    c.allocations, c.launches > 0 ? static_cast<double>(c.allocations) / c.launches : 0.0);
      }
    }
    return cases[1].allocations == 0 ? 0 : 4;  // the ranges off must not allocate
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "bench_nvtx: %s\n", e.what());
    return 4;
  }
}
