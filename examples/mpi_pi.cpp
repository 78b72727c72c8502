// mpi_pi: Monte Carlo pi over MPI ranks, one GPU each. The points are one global sequence of a
// counter-based generator (Philox4x32-10, the kernel of example_monte_carlo_pi): point p is a pure
// function of (p, seed), so rank r counts a disjoint range of the same sequence, and the hits of N
// ranks are exactly the hits of one GPU drawing all the points.
//
//   mpirun -np N example_mpi_pi [samples] [--share-devices]
//       samples  points in all (default 64G = 2^36; the GPU tier uses 16M)
//       --share-devices  let ranks share a GPU (device_policy::shared)
// It runs without mpirun too (one rank).
//
// Rank r counts the pairs of points [P r / N, P (r + 1) / N), P = ceil(samples / 2) (a Philox call
// gives two points, so no call is split between ranks), on its GPU; the counts are added with
// MPI_Allreduce. Checks (exit 5): rank 0 counts all the points again on its own GPU, and the count
// must be equal, exactly; the estimate must lie within 6 sigma of pi.
//
// The figure: aggregate samples per second (the median over 5 repetitions of the slowest rank's wall
// time, from a barrier to every rank holding the total) against the rate of rank 0's GPU counting
// all the points alone: the speedup of N ranks over one GPU.
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
#include "mpi_example.hpp"

namespace {

using u64 = unsigned long long;
constexpr int block_size = 256;  // the kernel's block reduction assumes 256 threads
constexpr u64 seed = 0x5eed'2026'0612ull;
constexpr int repetitions = 5;
const char* const usage = "example_mpi_pi [samples] [--share-devices]";

struct gpu {
  cudrv::device dev;
  cudrv::typed_kernel<void(u64, u64, u64, u64*)> count_hits;
  u64 full_grid;  // blocks of block_size that fill every SM once
};

gpu setup(const cudrv::device& dev) {
  cudrv::library lib = example::compile(dev, "monte_carlo_pi.cu", example::monte_carlo_pi_kernels::source);
  auto count_hits = lib.get_kernel<void(u64, u64, u64, u64*)>("count_hits");
  const u64 full_grid = static_cast<u64>(dev.attribute(cudrv::device_attributes::multiprocessor_count)) *
                        static_cast<u64>(count_hits.max_active_blocks_per_multiprocessor(dev, block_size));
  return gpu{dev, std::move(count_hits), full_grid};
}

// Enqueues *hits = the hits among points first .. first + count - 1 (first even).
void enqueue_count(const gpu& g, cudrv::stream_ref s, u64 first, u64 count, cudrv::device_buffer<u64>& hits) {
  cudrv::fill(cudrv::device_span<unsigned>(hits.data(), 2), 0u, s);  // the 64-bit counter as two words
  if (count > 0) {
    const u64 pairs = (count + 1) / 2;
    const u64 blocks = std::min(g.full_grid, (pairs + block_size - 1) / block_size);
    cudrv::launch(s, {.grid = cudrv::dims::checked(blocks), .block = block_size}, g.count_hits, first, count, seed,
                  hits.get());
  }
}

double sigma_of(u64 n) {
  const double p = std::numbers::pi / 4;
  return 4 * std::sqrt(p * (1 - p) / static_cast<double>(n));
}

bool run(const example::mpi::world& w, u64 samples, bool share) {
  // Rank r's points: whole pairs, [2 P r / N, min(2 P (r + 1) / N, samples)).
  const u64 pairs = (samples + 1) / 2;
  auto pair_start = [&](int r) {
    return static_cast<u64>(r) * (pairs / static_cast<u64>(w.size)) +
           std::min<u64>(static_cast<u64>(r), pairs % static_cast<u64>(w.size));
  };
  const u64 first = 2 * pair_start(w.rank);
  // A rank past the last pair (fewer pairs than ranks) counts nothing.
  const u64 end = std::min(2 * pair_start(w.rank + 1), samples);
  const u64 count = end > first ? end - first : 0;

  const cudrv::device dev = example::mpi::phase("mpi_pi", w, [&] { return example::mpi::select_device(w, share); });
  gpu g = example::mpi::phase("mpi_pi", w, [&] { return setup(dev); });
  const int gpus = example::mpi::distinct_devices(example::mpi::placements("mpi_pi", w, g.dev));
  cudrv::stream s(g.dev);
  cudrv::device_buffer<u64> hits(g.dev, 1);
  cudrv::pinned_buffer<u64> host(g.dev, 1);
  const std::span<u64> host_value(host.data(), 1);

  // The distributed count: every rank counts its range, MPI adds the counts.
  auto distributed_count = [&]() -> u64 {
    enqueue_count(g, s, first, count, hits);
    cudrv::copy(host_value, hits, s);
    s.synchronize();
    return example::mpi::all_reduce(w, static_cast<u64>(host[0]), MPI_SUM);
  };
  const u64 total_hits = distributed_count();
  std::vector<double> times;
  bool ok = true;
  for (int r = 0; r < repetitions; ++r) {
    cudrv::mpi::check(MPI_Barrier(w.comm), "MPI_Barrier");
    const double t0 = MPI_Wtime();
    const u64 again = distributed_count();
    times.push_back((MPI_Wtime() - t0) * 1e3);
    ok = ok && again == total_hits;
  }
  const double ranks_ms = example::mpi::median_of_slowest(w, times);

  // One GPU, all the points: rank 0 alone, while the others wait at the barrier below.
  if (w.root()) {
    enqueue_count(g, s, 0, samples, hits);
    cudrv::copy(host_value, hits, s);
    s.synchronize();
    const u64 one_gpu_hits = host[0];
    const double one_ms =
        example::time_ms(g.dev, s, repetitions, [&](cudrv::stream_ref st) { enqueue_count(g, st, 0, samples, hits); });
    const double estimate = 4.0 * static_cast<double>(total_hits) / static_cast<double>(samples);
    const double error = std::fabs(estimate - std::numbers::pi);
    const bool within = error <= 6 * sigma_of(samples);
    std::printf("mpi_pi: %llu samples over %d rank%s on %d GPU%s (%s)\n", samples, w.size, w.size == 1 ? "" : "s", gpus,
                gpus == 1 ? "" : "s", g.dev.name().c_str());
    std::printf("  hits: %llu from %d rank%s, %llu from one GPU: %s; repetitions %s\n", total_hits, w.size,
                w.size == 1 ? "" : "s", one_gpu_hits, one_gpu_hits == total_hits ? "equal" : "DIFFERENT",
                ok ? "identical" : "DIFFERENT");
    std::printf("  pi ~ %.10f, |error| %.3e = %.2f sigma%s\n", estimate, error, error / sigma_of(samples),
                within ? "" : " OUTSIDE 6 sigma");
    ok = ok && within && one_gpu_hits == total_hits;

    const double rate = static_cast<double>(samples) / (ranks_ms * 1e6);
    const double one_rate = static_cast<double>(samples) / (one_ms * 1e6);
    char detail[200];
    std::snprintf(detail, sizeof detail, "%llu samples, %d ranks on %d GPUs, %.3f ms (one GPU %.3f ms), pi ~ %.9f",
                  samples, w.size, gpus, ranks_ms, one_ms, estimate);
    char json[96];
    std::snprintf(json, sizeof json, "\"ranks\": %d, \"gpus\": %d, \"hits\": %llu", w.size, gpus, total_hits);
    example::report({.example = "mpi_pi",
                     .metric = "Gsamples/s",
                     .value = rate,
                     .reference = one_rate,
                     .reference_name = "one GPU, all samples",
                     .target = 0,
                     .detail = detail,
                     .seconds = ranks_ms * 1e-3,
                     .json = json});
  }
  cudrv::mpi::check(MPI_Barrier(w.comm), "MPI_Barrier");
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::mpi::run("mpi_pi", argc, argv, [&](const example::mpi::world& w) {
    const auto [args, samples] = example::mpi::phase("mpi_pi", w, [&] {
      example::mpi::arguments a = example::mpi::parse(argc, argv, {"--share-devices"}, 1, usage);
      const u64 n = a.size(0, std::size_t{1} << 36, "sample count");
      if (n > (u64{1} << 62)) {  // the counters must not wrap
        throw example::usage_error{"at most 2^62 samples"};
      }
      return std::pair(std::move(a), n);
    });
    return run(w, samples, args.has("--share-devices"));
  });
}
