// bench_rtc_pch: the cold compilation of a CUB-using kernel with and without NVRTC's precompiled
// headers, and a compile-cache hit on the same kernel. NVRTC runs on the CPU: no GPU or driver needed.
//
//   bench_rtc_pch [--quick]
//
// The kernel is CUB's BlockReduce (tests/support/cccl_kernels.hpp's block_sum<int, 256>), compiled to
// a cubin for sm_90 with the toolkit's headers (compile_options::toolkit_headers). Every compilation
// gets a source of its own (a different constant after the includes), so nothing NVRTC may keep
// between compilations other than the PCH can help. Automatic PCH (-pch) is created once, by a
// warm-up compilation, then used by every "with PCH" compilation, as in a process that compiles many
// kernels with the same includes. Rounds are interleaved pairs, the order alternating:
//   pch   (no PCH, with PCH): ratio no PCH / with PCH, the speed-up;
//   A/A   (no PCH, no PCH):   the noise of the ratio on this machine.
// Reported: the median of the paired ratios, its spread (min and max), the median times, then the
// creation cost (the first compilation with -pch, against the median without) and a cache hit.
// A human table, then one JSON line.
//
// Exit status: 0 success, 1 usage error, 4 a compilation failed.
#include <unistd.h>

#include <cudrv/cudrv.hpp>
#include <cudrv/rtc.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "../tests/support/cccl_kernels.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

int round_number = 0;

// One cold compilation of a fresh variant of the kernel; returns milliseconds.
double compile_once(const cudrv::compile_options& options, cudrv::pch_status* status = nullptr,
                    std::size_t* heap_required = nullptr) {
  const std::string source = std::string(cudrv::test::cub_block_sum_source) +
                             "\n__device__ int variant = " + std::to_string(++round_number) + ";\n";
  const cudrv::program prog("block_sum.cu", source);
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = prog.compile(cudrv::code_kind::cubin, options, {"block_sum<int, 256>"});
  const double ms = ms_since(t0);
  if (status != nullptr) {
    *status = r.pch;
  }
  if (heap_required != nullptr) {
    *heap_required = r.pch_heap_required;
  }
  return ms;
}

struct pairs {
  std::vector<double> a, b, ratio;
  void add(double x, double y) {
    a.push_back(x);
    b.push_back(y);
    ratio.push_back(x / y);
  }
};

const char* status_name(cudrv::pch_status s) {
  switch (s) {
    case cudrv::pch_status::created: return "created";
    case cudrv::pch_status::not_attempted: return "not_attempted";
    case cudrv::pch_status::heap_exhausted: return "heap_exhausted";
    case cudrv::pch_status::failed: return "failed";
    default: return "not_requested";
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      rounds = 3;
    } else {
      std::fprintf(stderr, "usage: bench_rtc_pch [--quick]\n");
      return 1;
    }
  }
  const auto dir = std::filesystem::temp_directory_path() / ("cudrv-bench-rtc-pch-" + std::to_string(::getpid()));
  int status = 0;
  try {
    const cudrv::compile_options plain{.arch = "sm_90", .toolkit_headers = true};
    cudrv::compile_options pch = plain;
    pch.pch.automatic = true;
    (void)compile_once(plain);  // loads NVRTC, warms the file cache
    double plain_before = compile_once(plain);
    cudrv::pch_status created = cudrv::pch_status::not_requested;
    std::size_t heap_required = 0;
    const double create_ms = compile_once(pch, &created, &heap_required);
    cudrv::pch_status used = cudrv::pch_status::not_requested;
    (void)compile_once(pch, &used);
    pairs with_pch;
    pairs aa;
    for (int i = 0; i < rounds; ++i) {
      if (i % 2 == 0) {
        const double x = compile_once(plain);
        with_pch.add(x, compile_once(pch));
        const double y = compile_once(plain);
        aa.add(y, compile_once(plain));
      } else {
        const double y = compile_once(pch);
        with_pch.add(compile_once(plain), y);
        const double x = compile_once(plain);
        const double z = compile_once(plain);
        aa.add(z, x);
      }
    }
    // A compile-cache hit on the same kernel (a fresh directory: one miss, then hits).
    cudrv::compile_cache cache(dir.string());
    const cudrv::program prog("block_sum.cu", cudrv::test::cub_block_sum_source);
    (void)cache.compile(prog, cudrv::code_kind::cubin, plain, {"block_sum<int, 256>"});
    std::vector<double> hits;
    for (int i = 0; i < 101; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      (void)cache.compile(prog, cudrv::code_kind::cubin, plain, {"block_sum<int, 256>"});
      hits.push_back(ms_since(t0));
    }
    const double hit_ms = median(hits);
    const auto st = cache.stats();
    const auto& tk = cudrv::find_toolkit_headers();
    const double no_pch_ms = median(with_pch.a);
    const double pch_ms = median(with_pch.b);
    const double speedup = median(with_pch.ratio);
    const double aa_ratio = median(aa.ratio);
    auto lo = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    auto hi = [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); };
    std::printf("bench_rtc_pch: CUB BlockReduce<int, 256> to a cubin for sm_90, NVRTC %d.%d, CCCL %d, %d rounds, "
                "PCH heap %zu MiB (this PCH needs %zu MiB; first -pch compilation: %s, next: %s)\n",
                cudrv::nvrtc_version() / 1000, cudrv::nvrtc_version() % 1000 / 10, tk.cccl_version, rounds,
                cudrv::nvrtc_pch_heap_size() >> 20, heap_required >> 20, status_name(created), status_name(used));
    std::printf("\n| case | median | spread |\n|---|---:|---:|\n");
    std::printf("| cold compile, no PCH | %.0f ms | %.0f to %.0f ms |\n", no_pch_ms, lo(with_pch.a), hi(with_pch.a));
    std::printf("| cold compile, with automatic PCH | %.0f ms | %.0f to %.0f ms |\n", pch_ms, lo(with_pch.b),
                hi(with_pch.b));
    std::printf("| speed-up (no PCH / PCH, paired) | %.2fx | %.2fx to %.2fx |\n", speedup, lo(with_pch.ratio),
                hi(with_pch.ratio));
    std::printf("| A/A (no PCH / no PCH, paired) | %.2fx | %.2fx to %.2fx |\n", aa_ratio, lo(aa.ratio), hi(aa.ratio));
    std::printf("| first compile with -pch (creates it) | %.0f ms | one (no PCH just before: %.0f ms) |\n", create_ms,
                plain_before);
    std::printf("| compile_cache hit, same kernel | %.3f ms | %.3f to %.3f ms |\n", hit_ms, lo(hits), hi(hits));
    std::printf("\ncache hit <= 1 ms: %s (hits %llu, misses %llu)\n", hit_ms <= 1.0 ? "yes" : "NO",
                static_cast<unsigned long long>(st.hits), static_cast<unsigned long long>(st.misses));
    std::printf("{\"bench\":\"rtc_pch\",\"nvrtc\":%d,\"cccl\":%d,\"rounds\":%d,\"no_pch_ms\":%.1f,\"pch_ms\":%.1f,"
                "\"speedup\":%.3f,\"speedup_min\":%.3f,\"speedup_max\":%.3f,\"aa_ratio\":%.3f,\"aa_min\":%.3f,"
                "\"aa_max\":%.3f,\"create_ms\":%.1f,\"pch_created\":\"%s\",\"pch_used\":\"%s\",\"cache_hit_ms\":%.4f,"
                "\"pch_heap_required\":%zu,\"cache_hit_limit_ms\":1.0}\n",
                cudrv::nvrtc_version(), tk.cccl_version, rounds, no_pch_ms, pch_ms, speedup, lo(with_pch.ratio),
                hi(with_pch.ratio), aa_ratio, lo(aa.ratio), hi(aa.ratio), create_ms, status_name(created),
                status_name(used), hit_ms, heap_required);
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "bench_rtc_pch: %s\n", e.what());
    status = 4;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return status;
}
