// cub_thrust: CUB and Thrust on cudrv buffers and a cudrv stream, their temporary storage from a cudrv
// memory pool through the CCCL bridge (<cudrv/cccl.hpp>), measured against the same CUB sort with
// temporary storage from cudaMalloc in the same run.
//
//   example_cub_thrust [n]      n random 32-bit keys, K/M/G suffixes accepted (default 64M, at most 2^31 - 1)
//
// What it shows (docs/examples.md, "CUB and Thrust on cudrv memory and streams"):
// - cub::DeviceRadixSort::SortPairs and cub::DeviceReduce::Sum / ::Max on cudrv::device_buffer memory,
//   enqueued on a cudrv::stream (a CUstream is a cudaStream_t);
// - CUB's two-phase temporary storage taken from a cudrv::memory_pool as CCCL code takes memory: a
//   cuda::mr::async_resource_ref over cudrv::cccl_device_resource, allocated and freed stream-ordered
//   on the sorting stream (cuMemAllocFromPoolAsync / cuMemFreeAsync: no synchronisation, and the pool
//   keeps the memory between calls);
// - Thrust on the same data with the cudrv stream as its execution policy's stream
//   (thrust::cuda::par_nosync(allocator).on(stream)), and Thrust's own temporary storage from the same
//   pool through a Thrust allocator over the same resource;
// - every result checked on the host: the sort against std::stable_sort of (key, index) (a radix sort
//   is stable, so the values must match exactly), the sums exactly in 64-bit integers, the Thrust
//   transform and descending sort against std::transform and std::sort; every output is poisoned first.
// The figure: pairs sorted per second with pool-backed temporary storage (allocated and freed on the
// stream at every sort), against the plain CUB call with one cudaMalloc'd temporary buffer.
//
// The CUB and Thrust calls are in cub_thrust.cu (built by nvcc, behind the plain interface of
// cub_thrust.hpp); this file is the host side. The CUDA runtime, which CUB and Thrust call, works in the
// current device's primary context, the one cudrv allocates in for a cudrv::device: the example makes it
// current first (dev.set_current()).
#include <cudrv/cudrv.hpp>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "cub_thrust.hpp"
#include "example_main.hpp"

namespace {

constexpr int repetitions = 20;
constexpr std::uint32_t poison32 = 0xA5A5A5A5u;
constexpr std::uint64_t poison64 = 0xA5A5A5A5A5A5A5A5ull;

// Empty when equal, otherwise how many differ and the first difference.
std::string compare(const std::vector<std::uint32_t>& got, const std::vector<std::uint32_t>& want) {
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i] && bad++ == 0) {
      first = i;
    }
  }
  if (bad == 0) {
    return {};
  }
  return std::to_string(bad) + " of " + std::to_string(want.size()) + " differ, the first at " + std::to_string(first) +
         " (got " + std::to_string(got[first]) + ", expected " + std::to_string(want[first]) + ")";
}

bool report_check(const char* what, const std::string& mismatch) {
  std::printf("  %-58s %s\n", what, mismatch.empty() ? "correct" : ("WRONG: " + mismatch).c_str());
  return mismatch.empty();
}

bool run(std::size_t count) {
  if (count > static_cast<std::size_t>(INT_MAX)) {
    throw example::usage_error{"at most 2^31 - 1 keys (CUB's 32-bit item count)"};
  }
  const int n = static_cast<int>(count);

  cudrv::device dev(0);
  dev.set_current();  // the runtime (CUB, Thrust, cudaMalloc) uses the current device's primary context
  cudrv::stream stream(dev);
  cudrv::memory_pool pool(dev);
  cudrv::pool_memory_resource upstream(pool);
  cudrv::cccl_device_resource adaptor(upstream);
  const example::cccl::device_resource_ref mr = adaptor;  // what CCCL code takes
  const cudrv::cccl_stream_ref cs = stream;               // a cuda::stream_ref and a cudrv::stream_ref

  // Random keys (every fourth one only 20 bits wide, so that there are duplicates) and their indices.
  const unsigned seed = 2025;
  std::mt19937 gen(seed);
  std::vector<std::uint32_t> keys(count), values(count);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t k = gen();
    keys[i] = (i % 4 == 0) ? (k & 0xFFFFFu) : k;
  }
  std::iota(values.begin(), values.end(), 0u);

  // Host references.
  std::vector<std::uint32_t> order(count);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  std::vector<std::uint32_t> sorted_keys(count), scrambled(count);
  for (std::size_t i = 0; i < count; ++i) {
    sorted_keys[i] = keys[order[i]];
  }
  const std::vector<std::uint32_t>& sorted_values = order;  // the indices in sorted order
  std::transform(sorted_keys.begin(), sorted_keys.end(), scrambled.begin(), example::cccl::scramble);
  std::sort(scrambled.begin(), scrambled.end(), std::greater<std::uint32_t>());
  const std::uint64_t sum = std::accumulate(keys.begin(), keys.end(), std::uint64_t{0});
  const std::uint32_t max = *std::max_element(keys.begin(), keys.end());

  cudrv::device_buffer<std::uint32_t> keys_in(dev, count), values_in(dev, count);
  cudrv::device_buffer<std::uint32_t> keys_out(dev, count), values_out(dev, count), thrust_out(dev, count);
  cudrv::device_buffer<std::uint64_t> d_sum(dev, 1);
  cudrv::device_buffer<std::uint32_t> d_max(dev, 1);
  cudrv::copy(keys_in, keys, stream);
  cudrv::copy(values_in, values, stream);
  auto poison_outputs = [&] {
    cudrv::fill(keys_out, poison32, stream);
    cudrv::fill(values_out, poison32, stream);
    cudrv::fill(thrust_out, poison32, stream);
    cudrv::copy(d_sum, std::span(&poison64, 1), stream);  // fill takes elements of 1, 2 or 4 bytes
    cudrv::fill(d_max, poison32, stream);
  };
  auto read = [&](const cudrv::device_buffer<std::uint32_t>& buf) {
    std::vector<std::uint32_t> host(count);
    cudrv::copy(std::span(host), buf, stream);
    stream.synchronize();
    return host;
  };
  auto check_sort = [&](const char* what) {
    std::string why = compare(read(keys_out), sorted_keys);
    if (why.empty()) {
      why = compare(read(values_out), sorted_values);
      why = why.empty() ? why : "values (stability): " + why;
    }
    return report_check(what, why);
  };
  auto sort_with_pool = [&] {
    example::cccl::sort_pairs(mr, cs, keys_in.get(), keys_out.get(), values_in.get(), values_out.get(), n);
  };

  std::printf("%d random 32-bit keys with their indices (mt19937 seed %u) on a cudrv stream, device %s\n", n, seed,
              dev.name().c_str());
  poison_outputs();

  // CUB: the sort and two reductions; then Thrust on the sorted keys, on the same stream. Every
  // temporary buffer comes from the cudrv pool, stream-ordered: nothing synchronises until the reads.
  sort_with_pool();
  example::cccl::sum(mr, cs, keys_in.get(), d_sum.get(), n);
  example::cccl::max(mr, cs, keys_in.get(), d_max.get(), n);
  const std::size_t thrust_allocations =
      example::cccl::scramble_sort_descending(mr, cs, keys_out.get(), thrust_out.get(), count);

  bool ok = check_sort("cub::DeviceRadixSort::SortPairs (pool temp storage):");
  std::uint64_t got_sum = 0;
  std::uint32_t got_max = 0;
  cudrv::copy(std::span(&got_sum, 1), d_sum, stream);
  cudrv::copy(std::span(&got_max, 1), d_max, stream);
  stream.synchronize();
  ok = report_check("cub::DeviceReduce::Sum (64-bit, exact):",
                    got_sum == sum ? "" : std::to_string(got_sum) + " instead of " + std::to_string(sum)) &&
       ok;
  ok = report_check("cub::DeviceReduce::Max:",
                    got_max == max ? "" : std::to_string(got_max) + " instead of " + std::to_string(max)) &&
       ok;
  ok = report_check("thrust::transform + thrust::sort (descending):", compare(read(thrust_out), scrambled)) && ok;
  std::printf("  Thrust took %zu temporary allocation(s) from the cudrv pool\n", thrust_allocations);
  if (thrust_allocations == 0) {  // the descending sort needs temporary storage: the allocator must have served it
    std::printf("  WRONG: Thrust's temporary storage did not come through the cudrv allocator\n");
    ok = false;
  }

  // The reference: the same sort with one temporary buffer from cudaMalloc, reused by every call.
  const example::cccl::plain_sort_pairs plain(n);
  auto sort_plain = [&] { plain.run(stream, keys_in.get(), keys_out.get(), values_in.get(), values_out.get()); };
  poison_outputs();
  sort_plain();
  ok = check_sort("cub::DeviceRadixSort::SortPairs (cudaMalloc temp storage):") && ok;

  // Timing in the same run, on the same stream and data: the median of each path.
  poison_outputs();
  const double pool_ms = example::time_ms(dev, stream, repetitions, [&](cudrv::stream_ref) { sort_with_pool(); });
  const double plain_ms = example::time_ms(dev, stream, repetitions, [&](cudrv::stream_ref) { sort_plain(); });
  ok = check_sort("the last timed sort:") && ok;

  const double pairs = static_cast<double>(count);
  char detail[200];
  std::snprintf(detail, sizeof detail, "%d pairs, %.1f us vs %.1f us, %zu bytes of temporary storage, result %s", n,
                pool_ms * 1e3, plain_ms * 1e3, plain.temp_bytes(), ok ? "correct" : "WRONG");
  example::report({.example = "cub_thrust",
                   .metric = "Gpairs/s",
                   .value = pairs / (pool_ms * 1e6),
                   .reference = pairs / (plain_ms * 1e6),
                   .reference_name = "CUB SortPairs, cudaMalloc temp",
                   .target = 0.95,
                   .detail = detail,
                   .seconds = pool_ms * 1e-3});
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("cub_thrust",
                      [&] { return run(example::size_arg(argc, argv, 1, std::size_t{64} << 20, "key count")); });
}
