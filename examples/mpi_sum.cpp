// mpi_sum: the sum of a global vector split over MPI ranks, one GPU each: every rank generates its
// slice on its GPU from the global index, sums it there, and the partial sums are combined with
// MPI_Allreduce on the host, or, with --nccl, with an NCCL all-reduce on the device.
//
//   mpirun -np N example_mpi_sum [n] [--nccl] [--share-devices]
//       n  elements of the global vector (default 1G = 2^30, 4 GiB of 32-bit integers over all ranks;
//          the GPU tier uses 10000019)
//       --nccl           combine on the device: cudrv::nccl all_reduce of each rank's partial sum
//       --share-devices  let ranks share a GPU (device_policy::shared), e.g. 2 ranks on a 1-GPU machine;
//                        the NCCL path refuses it (status 6: NCCL needs one GPU per rank)
// It runs without mpirun too (one rank).
//
// Element g of the vector is g mod 1021: integers, so the sums are exact and the result is the same
// for any number of ranks. Rank r owns elements [n r / N, n (r + 1) / N) (balanced to one element).
// Checks (exit 5): each rank's partial sum against the closed form of its slice; the combined sum
// against the closed form of the whole vector; and, on rank 0, the sum of the whole vector generated
// and summed on rank 0's GPU alone (when it fits in half of the free memory), which must be equal.
//
// The figure: the bandwidth of the distributed sum, 4n bytes over the wall time from a barrier to
// every rank holding the total (the median over 20 repetitions of the slowest rank's time), against
// the aggregate device-to-device copy bandwidth of the ranks' GPUs (each rank measures its copy
// bandwidth at the same time as the others, so that ranks sharing a GPU share it here too). It also
// prints the time of the local sums alone and the share of the combine.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/integer_sum.hpp"
#include "mpi_example.hpp"

namespace {

using u64 = unsigned long long;
constexpr u64 period = 1021;  // element g is g mod period, as in the kernel
constexpr int block_size = 256;
constexpr int repetitions = 20;
const char* const usage = "example_mpi_sum [n] [--nccl] [--share-devices]";

// The sum of elements 0 .. m - 1 of the global vector, in closed form.
u64 prefix_sum(u64 m) {
  const u64 whole = m / period;
  const u64 rest = m % period;
  return whole * (period * (period - 1) / 2) + (rest == 0 ? 0 : rest * (rest - 1) / 2);
}

// The first element of rank r's slice of n elements over size ranks.
u64 slice_start(u64 n, int r, int size) {
  const u64 base = n / static_cast<u64>(size);
  const u64 extra = n % static_cast<u64>(size);
  const u64 ru = static_cast<u64>(r);
  return ru * base + std::min(ru, extra);
}

// A rank's GPU and the example's kernels on it.
struct gpu {
  cudrv::device dev;
  cudrv::library lib;
  cudrv::typed_kernel<void(unsigned*, u64, u64)> generate;
  cudrv::typed_kernel<void(const unsigned*, u64, u64*)> sum;
  u64 full_grid;  // blocks of block_size that fill every SM once
};

gpu setup(const cudrv::device& dev) {
  cudrv::library lib = example::compile(dev, "integer_sum.cu", example::integer_sum_kernels::source);
  auto generate = lib.get_kernel<void(unsigned*, u64, u64)>("generate");
  auto sum = lib.get_kernel<void(const unsigned*, u64, u64*)>("sum_u32");
  const u64 full_grid = static_cast<u64>(dev.attribute(cudrv::device_attributes::multiprocessor_count)) *
                        static_cast<u64>(sum.max_active_blocks_per_multiprocessor(dev, block_size));
  return gpu{dev, std::move(lib), std::move(generate), std::move(sum), full_grid};
}

// Enqueues x = elements first .. first + x.size() - 1 of the vector.
void enqueue_generate(const gpu& g, cudrv::stream_ref s, cudrv::device_buffer<unsigned>& x, u64 first) {
  const u64 blocks = std::min<u64>(g.full_grid, (x.size() + block_size - 1) / block_size);
  cudrv::launch(s, {.grid = cudrv::dims::checked(blocks), .block = block_size}, g.generate, x.get(), first,
                static_cast<u64>(x.size()));
}

// Enqueues *result = the sum of x (the counter is zeroed first).
void enqueue_sum(const gpu& g, cudrv::stream_ref s, const cudrv::device_buffer<unsigned>& x,
                 cudrv::device_buffer<u64>& result) {
  // cuMemsetD32 writes 32-bit words: the 64-bit counter is two of them.
  cudrv::fill(cudrv::device_span<unsigned>(result.data(), 2), 0u, s);
  const u64 vectors = (x.size() + 3) / 4;
  const u64 blocks = std::min<u64>(g.full_grid, (vectors + block_size - 1) / block_size);
  cudrv::launch(s, {.grid = cudrv::dims::checked(blocks), .block = block_size}, g.sum,
                static_cast<const unsigned*>(x.get()), static_cast<u64>(x.size()), result.get());
}

bool run(const example::mpi::world& w, u64 n, bool use_nccl, bool share) {
  const u64 first = slice_start(n, w.rank, w.size);
  const u64 count = slice_start(n, w.rank + 1, w.size) - first;

  // Setup, agreed by every rank: a device (refused for NCCL when ranks share one, before any other
  // work), the kernels, the slice generated on the device.
  const cudrv::device dev = example::mpi::phase("mpi_sum", w, [&] {
    if (n < static_cast<u64>(w.size)) {
      throw example::usage_error{"n = " + std::to_string(n) + " is less than the number of ranks"};
    }
    return example::mpi::select_device(w, share);
  });
  const std::vector<example::mpi::placement> where = example::mpi::placements("mpi_sum", w, dev);
  const int gpus = example::mpi::distinct_devices(where);
  cudrv::nccl::communicator comm;
  if (use_nccl) {
    comm = example::mpi::make_communicator("mpi_sum", w, dev, where);
  }
  gpu g = example::mpi::phase("mpi_sum", w, [&] { return setup(dev); });
  cudrv::stream s(g.dev);
  cudrv::device_buffer<unsigned> x(g.dev, count);
  cudrv::device_buffer<u64> partial(g.dev, 1);
  cudrv::pinned_buffer<u64> host(g.dev, 1);
  const std::span<u64> host_value(host.data(), 1);
  enqueue_generate(g, s, x, first);
  s.synchronize();

  if (w.root()) {
    std::printf("mpi_sum: %llu elements over %d rank%s on %d GPU%s (%s), %s combine\n", n, w.size,
                w.size == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s", g.dev.name().c_str(),
                use_nccl ? "NCCL all-reduce on the device" : "MPI_Allreduce on the host");
  }

  // Each rank's partial sum against the closed form of its slice.
  enqueue_sum(g, s, x, partial);
  cudrv::copy(host_value, partial, s);
  s.synchronize();
  const bool partial_ok = host[0] == prefix_sum(first + count) - prefix_sum(first);
  const int wrong_partials = example::mpi::all_reduce(w, partial_ok ? 0 : 1, MPI_SUM);

  // The distributed sum: local sums, then the combine; every rank ends with the total on the host.
  auto distributed_sum = [&]() -> u64 {
    enqueue_sum(g, s, x, partial);
    if (use_nccl) {
      comm.all_reduce(partial, cudrv::nccl::reduction::sum, s);
    }
    cudrv::copy(host_value, partial, s);
    s.synchronize();
    u64 total = host[0];
    if (!use_nccl) {
      total = example::mpi::all_reduce(w, total, MPI_SUM);
    }
    return total;
  };
  const u64 total = distributed_sum();
  const u64 expected = prefix_sum(n);
  bool ok = wrong_partials == 0 && total == expected;

  // The same vector on rank 0's GPU alone.
  if (w.root()) {
    std::printf("  partial sums: %s; total %llu, closed form %llu: %s\n",
                wrong_partials == 0 ? "every rank's equals its closed form"
                                    : (std::to_string(wrong_partials) + " rank(s) WRONG").c_str(),
                total, expected, total == expected ? "equal" : "WRONG");
    if (n * sizeof(unsigned) <= g.dev.free_memory() / 2) {
      cudrv::device_buffer<unsigned> whole(g.dev, n);
      enqueue_generate(g, s, whole, 0);
      enqueue_sum(g, s, whole, partial);
      cudrv::copy(host_value, partial, s);
      s.synchronize();
      std::printf("  one GPU, the whole vector: %llu: %s\n", static_cast<u64>(host[0]),
                  host[0] == total ? "equal to the distributed sum" : "DIFFERENT from the distributed sum");
      ok = ok && host[0] == total;
    } else {
      std::printf("  one GPU, the whole vector: skipped (%llu bytes do not fit in half of the free memory)\n",
                  n * sizeof(unsigned));
    }
  }

  // Timing: the whole distributed sum, and the local sums alone (events on each rank's stream).
  std::vector<double> times;
  for (int r = 0; r < repetitions; ++r) {
    cudrv::mpi::check(MPI_Barrier(w.comm), "MPI_Barrier");
    const double t0 = MPI_Wtime();
    const u64 again = distributed_sum();
    times.push_back((MPI_Wtime() - t0) * 1e3);
    ok = ok && again == expected;
  }
  const double total_ms = example::mpi::median_of_slowest(w, times);
  cudrv::mpi::check(MPI_Barrier(w.comm), "MPI_Barrier");
  const double local_ms =
      example::mpi::all_reduce(w,
                               example::time_ms(g.dev, s, repetitions,
                                                [&](cudrv::stream_ref st) { enqueue_sum(g, st, x, partial); }),
                               MPI_MAX);
  cudrv::mpi::check(MPI_Barrier(w.comm), "MPI_Barrier");
  const std::size_t copy_bytes =
      std::max<std::size_t>(std::min<std::size_t>(count * sizeof(unsigned), 256u << 20), 1u << 20);
  const double copy_gbs = example::mpi::all_reduce(w, example::copy_bandwidth_gbs(g.dev, s, copy_bytes), MPI_SUM);

  if (w.root()) {
    const double bytes = static_cast<double>(n) * sizeof(unsigned);
    const double gbs = bytes / (total_ms * 1e6);
    std::printf("  distributed sum %.3f ms (local sums %.3f ms, combine %.1f %%), %s\n", total_ms, local_ms,
                total_ms > 0 ? 100.0 * std::max(0.0, total_ms - local_ms) / total_ms : 0.0,
                ok ? "every repetition exact" : "a repetition was WRONG");
    char detail[200];
    std::snprintf(detail, sizeof detail, "%llu elements, %d ranks on %d GPUs, %s, %.3f ms, combine %.1f %%", n, w.size,
                  gpus, use_nccl ? "NCCL all-reduce" : "MPI_Allreduce", total_ms,
                  total_ms > 0 ? 100.0 * std::max(0.0, total_ms - local_ms) / total_ms : 0.0);
    char json[160];
    std::snprintf(json, sizeof json, "\"ranks\": %d, \"gpus\": %d, \"combine\": \"%s\", \"local_ms\": %.6g", w.size,
                  gpus, use_nccl ? "nccl" : "mpi", local_ms);
    example::report({.example = "mpi_sum",
                     .metric = "GB/s",
                     .value = gbs,
                     .reference = copy_gbs,
                     .reference_name = "aggregate D2D copy",
                     .target = 0,
                     .detail = detail,
                     .bytes = bytes,
                     .seconds = total_ms * 1e-3,
                     .json = json});
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::mpi::run("mpi_sum", argc, argv, [&](const example::mpi::world& w) {
    const auto [args, n] = example::mpi::phase("mpi_sum", w, [&] {
      example::mpi::arguments a = example::mpi::parse(argc, argv, {"--nccl", "--share-devices"}, 1, usage);
      const u64 size = a.size(0, std::size_t{1} << 30, "n");
      return std::pair(std::move(a), size);
    });
    return run(w, n, args.has("--nccl"), args.has("--share-devices"));
  });
}
