// histogram: a 256-bin histogram of bytes, in two versions (examples/kernels/histogram.hpp). Both
// count into a histogram private to the block, in shared memory, with shared-memory atomics: 32
// interleaved copies of it, so that each lane of a warp has its own bank and the atomics of a warp
// never conflict, whatever the data. The privatised version merges each block's histogram into the
// global one with global atomics; the cluster version launches clusters of 4 blocks
// (cudrv::launch_config::cluster) whose blocks first merge their histograms through distributed shared
// memory, then write each bin once per cluster. Both run on a grid sized from the occupancy queries
// (blocks per SM, active clusters) and are timed on uniform random bytes and on bytes all equal (every
// count lands in one bin: the worst case for a histogram with a single copy per block); every count is
// checked against the host's.
//
//   example_histogram [bytes]       bytes to count, default 1G (K, M and G suffixes allowed)
//
// The figure is bytes read over the faster version's time on uniform bytes, against the device-to-device
// copy bandwidth measured in the same run, bytes read plus bytes written per second: the rate at which
// device memory moves bytes in either direction, which a kernel that only reads can reach too (the
// reduce example reads at CUB's rate, the same figure). The target is 0.80.
#include <array>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/histogram.hpp"

namespace {

namespace kernels = example::histogram_kernels;
using histogram_fn = void(const unsigned char*, unsigned long long, unsigned long long*);
using counts = std::array<unsigned long long, 256>;

constexpr unsigned block_size = 512;  // the kernels' __launch_bounds__
constexpr unsigned cluster_size = 4;  // blocks per cluster: 2 to 8 are portable on sm_90

struct version {
  const char* name;
  const cudrv::typed_kernel<histogram_fn>& kernel;
  cudrv::launch_config config;
};

bool run(std::size_t n) {
  cudrv::device dev(0);
  cudrv::stream stream(dev);
  cudrv::library lib = example::compile(dev, "histogram.cu", kernels::source, kernels::name_expressions);
  auto privatised = lib.get_kernel<histogram_fn>("histogram_privatised");
  auto clustered = lib.get_kernel<histogram_fn>("histogram_cluster");

  if (!dev.attribute(cudrv::device_attributes::cluster_launch)) {
    throw std::runtime_error("device " + dev.name() + " cannot launch thread-block clusters (sm_90 or newer)");
  }
  // 4 blocks of 512 threads fill an SM, each with 33 KB of shared memory: ask for the largest
  // shared-memory share of the SM's L1 (the bytes are read once: a cache has nothing to keep).
  privatised.set_preferred_shared_memory_carveout(dev, 100);
  clustered.set_preferred_shared_memory_carveout(dev, 100);
  // Persistent grids: as many blocks (clusters) as can be resident at once, each looping over its share.
  const int sms = dev.attribute(cudrv::device_attributes::multiprocessor_count);
  const int blocks_per_sm = privatised.max_active_blocks_per_multiprocessor(dev, block_size);
  cudrv::launch_config cluster_config{.grid = cluster_size, .block = block_size, .cluster = cluster_size};
  const int clusters = clustered.max_active_clusters(dev, cluster_config);
  cluster_config.grid = static_cast<unsigned>(clusters) * cluster_size;
  const version versions[] = {
      {"privatised", privatised, {.grid = sms * blocks_per_sm, .block = block_size}},
      {"cluster", clustered, cluster_config},
  };

  std::vector<unsigned char> data(n);
  std::mt19937 rng(20240607);
  for (std::size_t i = 0; i < n; i += 4) {  // four random bytes a draw
    const std::uint32_t word = rng();
    for (std::size_t k = 0; k < 4 && i + k < n; ++k) {
      data[i + k] = static_cast<unsigned char>(word >> (8 * k));
    }
  }
  counts uniform{};
  for (unsigned char b : data) {
    ++uniform[b];
  }
  const unsigned char skew_byte = static_cast<unsigned char>(rng() >> 24);
  counts skewed{};
  skewed[skew_byte] = n;

  cudrv::device_buffer<unsigned char> din(dev, n);
  cudrv::device_buffer<unsigned long long> dcounts(dev, 256);
  // The counts are accumulated with atomics, so every run starts by zeroing them (a 2 KiB memset,
  // part of the time). cudrv::fill takes 1-, 2- or 4-byte elements: zero the 64-bit counts as words.
  const cudrv::device_span<std::uint32_t> count_words(dcounts.data(), 2 * dcounts.size());
  counts result{};

  // Times one version on the bytes now in din, then checks the counts of its last run; the GB/s, or a
  // negative value when a count differs from expected.
  auto time_and_check = [&](const version& v, const counts& expected, const char* data_name) {
    const double ms = example::time_ms(dev, stream, 20, [&](cudrv::stream_ref s) {
      cudrv::fill(count_words, 0u, s);
      cudrv::launch(s, v.config, v.kernel, din.get(), static_cast<unsigned long long>(n), dcounts.get());
    });
    cudrv::copy(result, dcounts, stream);
    stream.synchronize();
    for (int bin = 0; bin < 256; ++bin) {
      if (result[bin] != expected[bin]) {
        std::fprintf(stderr, "histogram: %s version, %s bytes: bin %d counts %llu, expected %llu\n", v.name, data_name,
                     bin, result[bin], expected[bin]);
        return -1.0;
      }
    }
    return static_cast<double>(n) / (ms * 1e6);
  };

  cudrv::copy(din, data, stream);
  const double uniform_gbs[] = {time_and_check(versions[0], uniform, "uniform"),
                                time_and_check(versions[1], uniform, "uniform")};
  cudrv::fill(din, skew_byte, stream);
  const double skewed_gbs[] = {time_and_check(versions[0], skewed, "equal"),
                               time_and_check(versions[1], skewed, "equal")};
  if (uniform_gbs[0] < 0 || uniform_gbs[1] < 0 || skewed_gbs[0] < 0 || skewed_gbs[1] < 0) {
    return false;
  }

  const double memory_gbs = example::copy_bandwidth_gbs(dev, stream, n);
  const int best = uniform_gbs[1] > uniform_gbs[0] ? 1 : 0;
  char detail[320];
  std::snprintf(detail, sizeof detail,
                "%zu bytes, best: %s; uniform bytes: privatised %.4g, cluster %.4g GB/s; all bytes equal: "
                "privatised %.4g, cluster %.4g GB/s; %u blocks of %u threads, %d clusters of %u",
                n, versions[best].name, uniform_gbs[0], uniform_gbs[1], skewed_gbs[0], skewed_gbs[1],
                versions[0].config.grid.x, block_size, clusters, cluster_size);
  example::report({.example = "histogram",
                   .metric = "GB/s",
                   .value = uniform_gbs[best],
                   .reference = memory_gbs,
                   .reference_name = "D2D copy (bytes moved)",
                   .target = 0.80,
                   .detail = detail,
                   .bytes = static_cast<double>(n),
                   .seconds = static_cast<double>(n) / (uniform_gbs[best] * 1e9)});
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("histogram",
                      [&] { return run(example::size_arg(argc, argv, 1, std::size_t{1} << 30, "byte count")); });
}
