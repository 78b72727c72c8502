// bench_batch_copy: 1,000 copies through one cudrv batch against 1,000 raw cuMemcpyAsync calls, in one
// binary, interleaved.
//
//   bench_batch_copy [--quick]
//
// 1,000 copies of sizes spread log-uniformly over 4 KiB-1 MiB (a fixed seed: the same sizes every run),
// between disjoint ranges of two buffers, in three directions: device to device, pinned host to device,
// device to pinned host. Each sample is timed twice: the host (enqueue) time, from the first call to the
// return of the last, and the end-to-end time, to the return of cuStreamSynchronize. Each round runs
// every pair of a row back to back, in alternating order; a row reports the median of the per-round
// ratios (first / second) over the rounds. Rows, per direction:
//   batch / raw loop      cudrv::copy(batch, stream) (the driver's batch where it has one) against
//                         1,000 cuMemcpyAsync;
//   fallback / raw loop   the same batch with batch_copy_mode::fallback_loop against the raw loop
//                         (the overhead of the fallback);
//   raw loop / raw loop   A/A: the noise of the measurement;
//   batch / raw batch     cudrv's batch against a raw cuMemcpyBatchAsync with the same arrays (what
//                         cudrv adds to the driver's batch; only where the driver has it).
// Prints a Markdown table and one JSON line (prefix "JSON ").
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA error.
#include <cudaTypedefs.h>

#include <cudrv/cudrv.hpp>

#include "bench_support.hpp"

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace {

constexpr std::size_t copies = 1000;

struct sample {
  double host_ns = 0;
  double e2e_ns = 0;
};

struct row {
  std::string direction;
  std::string name;
  std::vector<double> host_a, host_b, e2e_a, e2e_b;  // per round: first and second of the pair
};

double ratio_median(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (std::size_t i = 0; i < a.size(); ++i) {
    r.push_back(a[i] / b[i]);
  }
  return bench::median(r);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 21;
  bool quick = false;
  if (int status = bench::start("bench_batch_copy", argc, argv, quick); status >= 0) {
    return status;
  }
  if (quick) {
    rounds = 5;
  }
  try {
    cudrv::device dev(0);
    dev.set_current();
    cudrv::stream s(dev);
    const CUstream hs = s.native_handle();
    auto raw_copy = reinterpret_cast<PFN_cuMemcpyAsync_v4000>(cudrv::driver::get_entry_point("cuMemcpyAsync", 4000));
    auto raw_sync =
        reinterpret_cast<PFN_cuStreamSynchronize_v2000>(cudrv::driver::get_entry_point("cuStreamSynchronize", 2000));
    const bool have_batch = cudrv::batch_copy_supported();
#if CUDA_VERSION >= 12080
    PFN_cuMemcpyBatchAsync_v12080 raw_batch = have_batch
                                                  ? reinterpret_cast<PFN_cuMemcpyBatchAsync_v12080>(
                                                        cudrv::driver::get_entry_point("cuMemcpyBatchAsync", 12080))
                                                  : nullptr;
#endif

    // The sizes (log-uniform over 4 KiB-1 MiB, multiples of 256 bytes) and their offsets.
    std::mt19937_64 rng(17);
    std::uniform_real_distribution<double> exponent(12.0, 20.0);
    std::vector<std::size_t> sizes, offsets;
    std::size_t total = 0;
    for (std::size_t i = 0; i < copies; ++i) {
      const auto bytes = static_cast<std::size_t>(std::pow(2.0, exponent(rng))) / 256 * 256;
      sizes.push_back(bytes);
      offsets.push_back(total);
      total += bytes;
    }
    cudrv::device_buffer<std::byte> dev_a(dev, total), dev_b(dev, total);
    cudrv::pinned_buffer<std::byte> pinned(dev, total);
    cudrv::fill(dev_a, std::byte{1}, s);
    cudrv::fill(dev_b, std::byte{2}, s);
    s.synchronize();

    struct direction {
      const char* name;
      CUdeviceptr dst, src;
    };
    const CUdeviceptr host = pinned.device_view().data();
    const direction directions[] = {{"device to device", dev_b.data(), dev_a.data()},
                                    {"pinned host to device", dev_b.data(), host},
                                    {"device to pinned host", host, dev_a.data()}};

    std::vector<row> rows;
    for (const direction& d : directions) {
      std::vector<CUdeviceptr> dsts, srcs;
      cudrv::batch_copy batch;
      batch.reserve(copies);
      for (std::size_t i = 0; i < copies; ++i) {
        dsts.push_back(d.dst + offsets[i]);
        srcs.push_back(d.src + offsets[i]);
        batch.add(cudrv::device_span<std::byte>(dsts.back(), sizes[i]),
                  cudrv::device_span<const std::byte>(srcs.back(), sizes[i]));
      }
      using fn = std::function<void()>;
      const fn raw_loop = [&] {
        for (std::size_t i = 0; i < copies; ++i) {
          bench::check(raw_copy(dsts[i], srcs[i], sizes[i], hs), "cuMemcpyAsync");
        }
      };
      const fn cudrv_batch = [&] { (void)cudrv::copy(batch, s); };
      const fn cudrv_fallback = [&] { (void)cudrv::copy(batch, s, cudrv::batch_copy_mode::fallback_loop); };
      fn raw_batched;
#if CUDA_VERSION >= 12080
      if (have_batch) {
        raw_batched = [&] {
          CUmemcpyAttributes attr{};
          attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
          std::size_t idx = 0;
          std::size_t fail = 0;
          bench::check(raw_batch(dsts.data(), srcs.data(), sizes.data(), copies, &attr, &idx, 1, &fail, hs),
                       "cuMemcpyBatchAsync");
        };
      }
#endif
      struct pair {
        const char* name;
        const fn* a;
        const fn* b;
      };
      const pair all_pairs[] = {{"batch / raw loop", &cudrv_batch, &raw_loop},
                                {"fallback / raw loop", &cudrv_fallback, &raw_loop},
                                {"raw loop / raw loop (A/A)", &raw_loop, &raw_loop},
                                {"batch / raw batch", &cudrv_batch, &raw_batched}};
      // The last pair only where the driver has the batch.
      const std::span<const pair> pairs(all_pairs, raw_batched ? 4 : 3);
      auto measure = [&](const fn& f) {
        bench::check(raw_sync(hs), "cuStreamSynchronize");
        const auto t0 = std::chrono::steady_clock::now();
        f();
        const auto t1 = std::chrono::steady_clock::now();
        bench::check(raw_sync(hs), "cuStreamSynchronize");
        const auto t2 = std::chrono::steady_clock::now();
        return sample{std::chrono::duration<double, std::nano>(t1 - t0).count(),
                      std::chrono::duration<double, std::nano>(t2 - t0).count()};
      };
      for (const pair& p : pairs) {  // warm-up: every path once
        (void)measure(*p.a);
        (void)measure(*p.b);
      }
      const std::size_t first = rows.size();
      for (const pair& p : pairs) {
        rows.push_back({d.name, p.name, {}, {}, {}, {}});
      }
      for (int r = 0; r < rounds; ++r) {
        for (std::size_t k = 0; k < pairs.size(); ++k) {
          row& out = rows[first + k];
          sample a, b;
          if (r % 2 == 0) {
            a = measure(*pairs[k].a);
            b = measure(*pairs[k].b);
          } else {
            b = measure(*pairs[k].b);
            a = measure(*pairs[k].a);
          }
          out.host_a.push_back(a.host_ns);
          out.host_b.push_back(b.host_ns);
          out.e2e_a.push_back(a.e2e_ns);
          out.e2e_b.push_back(b.e2e_ns);
        }
        std::fprintf(stderr, "\rbench_batch_copy: %s, round %d/%d   ", d.name, r + 1, rounds);
      }
    }
    std::fprintf(stderr, "\n");

    const int v = cudrv::driver::version();
    std::printf("bench_batch_copy: device 0 (%s), driver CUDA %d.%d; %zu copies of 4 KiB-1 MiB (%.1f MiB in all); "
                "driver batch %s; %d rounds\n",
                dev.name().c_str(), v / 1000, v % 1000 / 10, copies, static_cast<double>(total) / (1 << 20),
                have_batch ? "available" : "absent (cudrv takes the fallback)", rounds);
    std::printf("\n| direction | pair (first / second) | host: first | host: second | host ratio | end-to-end: first | "
                "end-to-end: second | end-to-end ratio |\n|---|---|---:|---:|---:|---:|---:|---:|\n");
    std::string json = "{\"bench\":\"batch_copy\",\"device\":\"" + dev.name() + "\",\"driver\":" + std::to_string(v) +
                       ",\"copies\":" + std::to_string(copies) + ",\"bytes\":" + std::to_string(total) +
                       ",\"driver_batch\":" + (have_batch ? "true" : "false") +
                       ",\"rounds\":" + std::to_string(rounds) + ",\"rows\":[";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const row& r = rows[i];
      const double host_ratio = ratio_median(r.host_a, r.host_b);
      const double e2e_ratio = ratio_median(r.e2e_a, r.e2e_b);
      std::printf("| %s | %s | %.1f us | %.1f us | %.3f | %.1f us | %.1f us | %.3f |\n", r.direction.c_str(),
                  r.name.c_str(), bench::median(r.host_a) / 1000, bench::median(r.host_b) / 1000, host_ratio,
                  bench::median(r.e2e_a) / 1000, bench::median(r.e2e_b) / 1000, e2e_ratio);
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s{\"direction\":\"%s\",\"pair\":\"%s\",\"host_first_us\":%.2f,\"host_second_us\":%.2f,"
                    "\"host_ratio\":%.4f,\"e2e_first_us\":%.2f,\"e2e_second_us\":%.2f,\"e2e_ratio\":%.4f}",
                    i > 0 ? "," : "", r.direction.c_str(), r.name.c_str(), bench::median(r.host_a) / 1000,
                    bench::median(r.host_b) / 1000, host_ratio, bench::median(r.e2e_a) / 1000,
                    bench::median(r.e2e_b) / 1000, e2e_ratio);
      json += buf;
    }
    std::printf("\nJSON %s]}\n", json.c_str());
    return 0;
  } catch (const cudrv::error& e) {
    std::fprintf(stderr, "bench_batch_copy: %s\n", e.what());
    return 4;
  }
}
