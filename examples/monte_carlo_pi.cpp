// monte_carlo_pi: estimates pi from points drawn uniformly in the unit square, the fraction inside the
// quarter circle being pi / 4, with a counter-based random generator, the work split over several
// streams and each stream's count reduced on the device.
//
//   example_monte_carlo_pi [samples]     default 64G (2^36); the GPU test uses 16M
//
// The generator is Philox4x32-10 written in the kernel (no cuRAND): point p of a seed is a pure
// function of (p, seed), so a thread draws its points directly from their indices, and the result
// does not depend on how the points are split over threads, blocks or streams. The points are split
// into 4 chunks, one per stream; in each, threads count their hits, blocks sum them (shuffles, then
// shared memory) and add the sum to the stream's 64-bit counter with one atomic. The host adds the
// 4 counters.
//
// Prints a table of estimates for 2^20, 2^22, ... samples up to the total (an independent seed for
// each), where |error| shrinks like 1/sqrt(N): |error| * sqrt(N) stays of the order of
// 4 sqrt(p (1 - p)) = 1.64 (p = pi / 4), and |error| / sigma is a standard normal's magnitude.
// Checks (exit 5): every estimate within 6 sigma of pi; the host's Philox against published
// known-answer vectors, and its count of the first row's points against the device's, exactly; the
// same count from 1 stream and from 4.
//
// The figure: samples per second over 4 streams, against the same 4 chunk launches on 1 stream (the
// median of 3 timed runs each). Each launch alone fills the GPU, so the streams are not expected to
// be faster here: they show how independent pieces of work are issued, joined and combined.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/monte_carlo_pi.hpp"

namespace {

constexpr int stream_count = 4;
constexpr int block_size = 256;  // the kernel's block reduction assumes 256 threads
constexpr std::uint64_t base_seed = 0x5eed'2026'0611ull;

// The host's Philox4x32-10 and inside test, as the kernel's.
struct words {
  std::uint32_t x, y, z, w;
};

words philox4x32_10(words c, std::uint32_t k0, std::uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t p0 = std::uint64_t{0xD2511F53u} * c.x;
    const std::uint64_t p1 = std::uint64_t{0xCD9E8D57u} * c.z;
    c = {static_cast<std::uint32_t>(p1 >> 32) ^ c.y ^ k0, static_cast<std::uint32_t>(p1),
         static_cast<std::uint32_t>(p0 >> 32) ^ c.w ^ k1, static_cast<std::uint32_t>(p0)};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

bool inside(std::uint32_t rx, std::uint32_t ry) {
  const std::uint64_t x = rx >> 1, y = ry >> 1;
  return x * x + y * y < (std::uint64_t{1} << 62);
}

// The hits among points 0 .. points - 1 of seed's sequence, counted on the host.
std::uint64_t count_on_host(std::uint64_t points, std::uint64_t seed) {
  std::uint64_t hits = 0;
  for (std::uint64_t pair = 0; 2 * pair < points; ++pair) {
    const words r = philox4x32_10({static_cast<std::uint32_t>(pair), static_cast<std::uint32_t>(pair >> 32), 0, 0},
                                  static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
    hits += inside(r.x, r.y);
    hits += 2 * pair + 1 < points && inside(r.z, r.w);
  }
  return hits;
}

// The generator's known-answer vectors (Salmon et al., Random123), for counter and key all 0, all 1
// bits, and the digits of pi.
bool philox_matches_published_vectors() {
  const words a = philox4x32_10({0, 0, 0, 0}, 0, 0);
  const words b = philox4x32_10({~0u, ~0u, ~0u, ~0u}, ~0u, ~0u);
  const words c = philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, 0xa4093822u, 0x299f31d0u);
  return a.x == 0x6627e8d5u && a.y == 0xe169c58du && a.z == 0xbc57ac4cu && a.w == 0x9b00dbd8u && b.x == 0x408f276du &&
         b.y == 0x41c83b0eu && b.z == 0xa20bc7c6u && b.w == 0x6d5451fdu && c.x == 0xd16cfe09u && c.y == 0x94fdccebu &&
         c.z == 0x5001e420u && c.w == 0x24126ea1u;
}

// The standard deviation of the estimate 4 * hits / n.
double sigma_of(std::uint64_t n) {
  const double p = std::numbers::pi / 4;
  return 4 * std::sqrt(p * (1 - p) / static_cast<double>(n));
}

bool run(std::uint64_t total) {
  cudrv::device dev(0);
  dev.set_current();  // stream-ordered copies and fills run in the current context
  cudrv::library lib = example::compile(dev, "monte_carlo_pi.cu", example::monte_carlo_pi_kernels::source);
  using u64 = unsigned long long;
  auto count_hits = lib.get_kernel<void(u64, u64, u64, u64*)>("count_hits");
  // Enough blocks to fill every SM, no more: threads loop over their pairs of points.
  const std::uint64_t full_grid =
      static_cast<std::uint64_t>(dev.attribute(cudrv::device_attributes::multiprocessor_count)) *
      static_cast<std::uint64_t>(count_hits.max_active_blocks_per_multiprocessor(dev, block_size));

  cudrv::stream control(dev);
  std::vector<cudrv::stream> streams;
  for (int c = 0; c < stream_count; ++c) {
    streams.emplace_back(dev);
  }
  const std::vector<cudrv::stream_ref> four(streams.begin(), streams.end());
  const std::vector<cudrv::stream_ref> one(stream_count, control);
  cudrv::device_buffer<u64> counters(dev, stream_count);  // one per chunk
  cudrv::pinned_buffer<u64> partial(dev, stream_count);   // their values, copied back

  // Enqueues the count of points 0 .. points - 1 of seed's sequence in stream_count chunks, chunk c on
  // lanes[c] (lanes may repeat), which start after the work queued on ctl so far; ctl then waits for
  // all of them (fork and join). Chunks start at even points, so that no Philox call is split.
  auto enqueue = [&](cudrv::stream_ref ctl, const std::vector<cudrv::stream_ref>& lanes, std::uint64_t points,
                     std::uint64_t seed) {
    // Fork, work, join, in three loops: joining inside the work loop would make the next lane's fork
    // wait for the previous lane, serialising them.
    for (cudrv::stream_ref s : lanes) {
      if (s != ctl) {
        s.wait(ctl);
      }
    }
    const std::uint64_t chunk = ((points + stream_count - 1) / stream_count + 1) / 2 * 2;
    for (int c = 0; c < stream_count; ++c) {
      const cudrv::stream_ref s = lanes[c];
      const std::uint64_t first = c * chunk;
      const std::uint64_t count = first < points ? std::min(chunk, points - first) : 0;
      // cuMemsetD32 writes 32-bit words: the 64-bit counter is two of them.
      cudrv::fill(cudrv::device_span<unsigned>(counters.data() + c * sizeof(u64), 2), 0u, s);
      if (count > 0) {
        const std::uint64_t pairs = (count + 1) / 2;
        const std::uint64_t blocks = std::min(full_grid, (pairs + block_size - 1) / block_size);
        cudrv::launch(s, {.grid = cudrv::dims::checked(blocks), .block = block_size}, count_hits, first, count, seed,
                      counters.get() + c);
      }
      cudrv::copy(std::span<u64>(partial.data() + c, 1), counters.view().subspan(c, 1), s);
    }
    for (cudrv::stream_ref s : lanes) {
      if (s != ctl) {
        ctl.wait(s);
      }
    }
  };
  auto sum_of_partials = [&] {
    std::uint64_t hits = 0;
    for (u64 h : partial) {
      hits += h;
    }
    return hits;
  };

  std::printf("monte_carlo_pi: %llu samples on %s over %d streams, %llu blocks of %d threads per launch at most\n",
              static_cast<unsigned long long>(total), dev.name().c_str(), stream_count,
              static_cast<unsigned long long>(full_grid), block_size);
  bool ok = philox_matches_published_vectors();
  std::printf("  Philox4x32-10 on the host against the published known-answer vectors: %s\n", ok ? "ok" : "WRONG");

  // The sweep: N = 2^20, 2^22, ... and the total, each with its own seed.
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t n = std::uint64_t{1} << 20; n < total; n *= 4) {
    sizes.push_back(n);
  }
  sizes.push_back(total);
  std::printf("  %14s  %14s  %10s  %14s  %13s\n", "N", "estimate", "|error|", "|error|*sqrt(N)", "|error|/sigma");
  std::uint64_t last_hits = 0;
  std::uint64_t last_seed = 0;
  for (std::size_t row = 0; row < sizes.size(); ++row) {
    const std::uint64_t n = sizes[row];
    const std::uint64_t seed = base_seed + row;
    enqueue(control, four, n, seed);
    control.synchronize();
    const std::uint64_t hits = sum_of_partials();
    const double estimate = 4.0 * static_cast<double>(hits) / static_cast<double>(n);
    const double error = std::fabs(estimate - std::numbers::pi);
    const bool within = error <= 6 * sigma_of(n);
    std::printf("  %14llu  %14.10f  %10.3e  %14.3f  %13.2f%s\n", static_cast<unsigned long long>(n), estimate, error,
                error * std::sqrt(static_cast<double>(n)), error / sigma_of(n), within ? "" : "  OUTSIDE 6 sigma");
    ok = ok && within;
    if (row == 0) {
      const std::uint64_t host_hits = count_on_host(n, seed);
      std::printf("  host count of the first row's %llu points: %llu, device: %llu: %s\n",
                  static_cast<unsigned long long>(n), static_cast<unsigned long long>(host_hits),
                  static_cast<unsigned long long>(hits), host_hits == hits ? "equal" : "WRONG");
      ok = ok && host_hits == hits;
    }
    last_hits = hits;
    last_seed = seed;
  }

  // Timing: the last row again, over 4 streams and then on 1; both must count the same hits.
  constexpr int repetitions = 3;
  const double four_ms =
      example::time_ms(dev, control, repetitions, [&](cudrv::stream_ref s) { enqueue(s, four, total, last_seed); });
  const std::uint64_t four_hits = sum_of_partials();
  const double one_ms =
      example::time_ms(dev, control, repetitions, [&](cudrv::stream_ref s) { enqueue(s, one, total, last_seed); });
  const std::uint64_t one_hits = sum_of_partials();
  const bool same = four_hits == last_hits && one_hits == last_hits;
  std::printf("  %d streams: %.3f ms, 1 stream: %.3f ms; hits %s\n", stream_count, four_ms, one_ms,
              same ? "identical in every run" : "DIFFERENT");
  ok = ok && same;

  const double gsps_four = static_cast<double>(total) / (four_ms * 1e6);
  const double gsps_one = static_cast<double>(total) / (one_ms * 1e6);
  const double estimate = 4.0 * static_cast<double>(last_hits) / static_cast<double>(total);
  char detail[160];
  std::snprintf(detail, sizeof detail, "%llu samples, pi ~ %.9f, |error| %.2e = %.2f sigma",
                static_cast<unsigned long long>(total), estimate, std::fabs(estimate - std::numbers::pi),
                std::fabs(estimate - std::numbers::pi) / sigma_of(total));
  example::report({.example = "monte_carlo_pi",
                   .metric = "Gsamples/s",
                   .value = gsps_four,
                   .reference = gsps_one,
                   .reference_name = "same launches on 1 stream",
                   .target = 0,
                   .detail = detail,
                   .seconds = four_ms * 1e-3});
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("monte_carlo_pi", [&] {
    const std::size_t samples = example::size_arg(argc, argv, 1, std::size_t{1} << 36, "sample count");
    if (samples > (std::size_t{1} << 62)) {  // the counters and the sweep's sizes must not wrap
      throw example::usage_error{"at most 2^62 samples"};
    }
    return run(samples);
  });
}
