// green_contexts: a latency-critical kernel keeps a few SMs of its own while a long kernel fills the rest.
//
//   example_green_contexts [reserved_sms [long_ms]]      defaults: 16 200
//
// The device's SMs are split in two (cudrv::sm_resource::split_by_count): a small group of at least
// `reserved_sms` SMs (the driver rounds the count up: on compute capability 9.0 to a multiple of 8)
// and the rest. Each half becomes a green context with a stream of its own. A long kernel (about
// long_ms on the whole GPU, in blocks that each run for a quarter of that) is started, and a quarter of
// its run later a short kernel (one block per reserved SM, tens of microseconds) is launched on a
// high-priority stream. Its latency, from the moment its stream reaches it to its end (two events on
// its stream), is measured three ways:
//
//   alone          the short kernel on an idle GPU: the figure to match;
//   plain streams  the long kernel on the whole GPU: every SM is busy with long blocks, so the short
//                  kernel waits until some of them finish (its high priority only puts it first in line);
//   green contexts the long kernel in the large green context, the short one in the small one: it
//                  starts at once on its reserved SMs.
//
// The price is the long kernel's throughput: it runs on fewer SMs. Its time alone on the whole GPU and
// alone in its green context are measured too (ideally in the ratio of the SM counts).
//
// Both kernels iterate x -> fmaf(x, x, -2) on every element (the map of example_overlap, whose kernel
// this reuses); each output element is checked bit for bit against the host after a contended run of
// each kind, with the outputs poisoned before.
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA or compiler error
// (among them not_supported_error where the driver or device has no green contexts), 5 an output
// element differs from the host's.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "example_main.hpp"
#include "kernels/overlap.hpp"

namespace {

using map_kernel = cudrv::typed_kernel<void(const float*, float*, unsigned, int)>;

constexpr std::size_t distinct_inputs = 64;         // random values the inputs are drawn from (the host's cost)
constexpr std::uint32_t poison_bits = 0x7FBADBADu;  // a NaN: what outputs hold before a verified run
constexpr int block = 256;
constexpr int repetitions = 5;

// One kernel's data: inputs drawn from `values` (which one each element holds is kept on the host),
// the output, and how long it iterates.
struct work {
  cudrv::device_buffer<float> in;
  cudrv::device_buffer<float> out;
  std::vector<std::uint16_t> which;
  unsigned blocks;
  int iterations = 1;

  work(const cudrv::device& dev, unsigned grid, const std::vector<float>& values, std::mt19937_64& rng)
      : in(dev, std::size_t{grid} * block), out(dev, std::size_t{grid} * block), which(in.size()), blocks(grid) {
    std::vector<float> host(in.size());
    std::uniform_int_distribution<std::size_t> pick(0, values.size() - 1);
    for (std::size_t i = 0; i < host.size(); ++i) {
      which[i] = static_cast<std::uint16_t>(pick(rng));
      host[i] = values[which[i]];
    }
    cudrv::copy(in, host);
  }
  void launch(cudrv::stream_ref s, const map_kernel& k) const {
    cudrv::launch(s, {.grid = blocks, .block = block}, k, in.get(), out.get(), static_cast<unsigned>(in.size()),
                  iterations);
  }
  // Every output element against the host's result for its input, bit for bit (the host computes the
  // map once per distinct input).
  [[nodiscard]] bool verify(const std::vector<float>& values, const char* what) const {
    std::vector<float> expected(values.size());
    for (std::size_t v = 0; v < values.size(); ++v) {
      expected[v] = example::overlap_kernels::host_chebyshev(values[v], iterations);
    }
    std::vector<float> output(out.size());
    cudrv::copy(output, out);
    std::size_t wrong = 0;
    std::size_t first = 0;
    for (std::size_t i = 0; i < output.size(); ++i) {
      if (std::bit_cast<std::uint32_t>(output[i]) != std::bit_cast<std::uint32_t>(expected[which[i]])) {
        if (wrong++ == 0) {
          first = i;
        }
      }
    }
    if (wrong != 0) {
      std::printf("%s: %zu of %zu elements WRONG; first at %zu: %.9g, expected %.9g\n", what, wrong, output.size(),
                  first, static_cast<double>(output[first]), static_cast<double>(expected[which[first]]));
      return false;
    }
    return true;
  }
  void poison(cudrv::stream_ref s) { cudrv::fill(out, std::bit_cast<float>(poison_bits), s); }
};

// The median time of work(s) on s, in milliseconds, between two events of the stream's own context (a
// green context's stream needs events of the green context).
template <class Work>
double time_on(cudrv::stream_ref s, int reps, Work&& fn) {
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    cudrv::event start = s.record(cudrv::event_flags::timing);
    fn(s);
    cudrv::event stop = s.record(cudrv::event_flags::timing);
    stop.synchronize();
    times.push_back(cudrv::elapsed_time(start, stop).count());
  }
  return example::median(times);
}

// The short kernel's latency while the long kernel runs: the long kernel starts on long_stream, and a
// quarter of its expected time later the short one is launched on short_stream. Returns the median
// latency (ms); the last repetition's outputs are poisoned first and verified after.
struct contended_result {
  double short_ms;
  double long_ms;
  bool ok;
};
contended_result contended(cudrv::stream_ref long_stream, cudrv::stream_ref short_stream, work& long_work,
                           work& short_work, const map_kernel& k, const std::vector<float>& values,
                           double long_expected_ms, const char* what) {
  std::vector<double> latencies, long_times;
  bool ok = true;
  for (int r = 0; r < repetitions; ++r) {
    const bool verified = r == repetitions - 1;
    if (verified) {
      long_work.poison(long_stream);
      short_work.poison(short_stream);
      long_stream.synchronize();
      short_stream.synchronize();
    }
    cudrv::event long_start = long_stream.record(cudrv::event_flags::timing);
    long_work.launch(long_stream, k);
    cudrv::event long_stop = long_stream.record(cudrv::event_flags::timing);
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(long_expected_ms * 250)));
    cudrv::event start = short_stream.record(cudrv::event_flags::timing);
    short_work.launch(short_stream, k);
    cudrv::event stop = short_stream.record(cudrv::event_flags::timing);
    stop.synchronize();
    long_stop.synchronize();
    latencies.push_back(cudrv::elapsed_time(start, stop).count());
    long_times.push_back(cudrv::elapsed_time(long_start, long_stop).count());
    if (verified) {
      ok = long_work.verify(values, what) && short_work.verify(values, what);
    }
  }
  return {example::median(latencies), example::median(long_times), ok};
}

bool run(unsigned reserved, double long_target_ms) {
  cudrv::device dev(0);
  const cudrv::sm_resource all = cudrv::sm_resource::of(dev);
  if (reserved >= all.sm_count()) {
    throw example::usage_error{"reserved_sms must be below the device's " + std::to_string(all.sm_count()) + " SMs"};
  }
  const cudrv::sm_split split = all.split_by_count(reserved, 1);
  const cudrv::sm_resource& small = split.groups[0];
  const cudrv::sm_resource& rest = split.remainder;
  if (!rest) {
    throw example::usage_error{"reserving " + std::to_string(small.sm_count()) +
                               " SMs leaves none for the long kernel"};
  }
  std::printf("green_contexts: %s, %u SMs: %u reserved for the short kernel (asked %u; groups are rounded up to "
              "at least %u and a multiple of %u), %u for the long one\n",
              dev.name().c_str(), all.sm_count(), small.sm_count(), reserved, all.min_partition_size(),
              all.coscheduled_alignment(), rest.sm_count());

  cudrv::compile_options options;
  options.fmad = false;
  options.ftz = false;
  const cudrv::library lib = example::compile(dev, "overlap.cu", example::overlap_kernels::source,
                                              example::overlap_kernels::name_expressions, options);
  const map_kernel k = lib.get_kernel<void(const float*, float*, unsigned, int)>("chebyshev");

  // The green contexts and their streams; the short kernel's streams have the highest priority.
  const int high = dev.stream_priority_range().first;
  cudrv::green_context short_ctx(dev, small);
  cudrv::green_context long_ctx(dev, rest);
  cudrv::stream short_green = short_ctx.create_stream({.priority = high});
  cudrv::stream long_green = long_ctx.create_stream();
  cudrv::stream short_plain(dev, {.priority = high});
  cudrv::stream long_plain(dev);

  // The long kernel: four waves of full occupancy on the whole GPU. The short one: one block per
  // reserved SM.
  const int per_sm = k.max_active_blocks_per_multiprocessor(dev, block);
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const std::vector<float> values = example::overlap_kernels::random_starts(distinct_inputs, rng);
  work long_work(dev, 4u * all.sm_count() * static_cast<unsigned>(per_sm), values, rng);
  work short_work(dev, small.sm_count(), values, rng);

  // Tune the iteration counts: the kernels' times grow linearly with them.
  auto tune = [&](work& w, cudrv::stream_ref s, double target_ms) {
    const int lo = 256;
    const int hi = 4096;
    w.iterations = lo;
    const double t_lo = time_on(s, 3, [&](cudrv::stream_ref st) { w.launch(st, k); });
    w.iterations = hi;
    const double t_hi = time_on(s, 3, [&](cudrv::stream_ref st) { w.launch(st, k); });
    const double per_iteration = std::max((t_hi - t_lo) / (hi - lo), 1e-9);
    w.iterations = static_cast<int>(std::clamp(std::lround(lo + (target_ms - t_lo) / per_iteration), 16L, 1L << 24));
  };
  tune(long_work, long_plain, long_target_ms);
  tune(short_work, short_plain, 0.05);

  // The short kernel alone, and the long kernel alone on the whole GPU and in its green context.
  const double alone_ms = time_on(short_plain, repetitions, [&](cudrv::stream_ref s) { short_work.launch(s, k); });
  const double alone_green_ms =
      time_on(short_green, repetitions, [&](cudrv::stream_ref s) { short_work.launch(s, k); });
  const double long_full_ms = time_on(long_plain, 3, [&](cudrv::stream_ref s) { long_work.launch(s, k); });
  const double long_green_ms = time_on(long_green, 3, [&](cudrv::stream_ref s) { long_work.launch(s, k); });
  std::printf("short kernel alone: %.1f us (%d iterations; in its green context %.1f us); long kernel alone: "
              "%.1f ms on all SMs, %.1f ms on its %u (%d iterations, %u blocks of %d threads)\n",
              alone_ms * 1e3, short_work.iterations, alone_green_ms * 1e3, long_full_ms, long_green_ms, rest.sm_count(),
              long_work.iterations, long_work.blocks, block);

  // Contended: plain streams, then green contexts.
  const contended_result plain =
      contended(long_plain, short_plain, long_work, short_work, k, values, long_full_ms, "plain streams");
  const contended_result green =
      contended(long_green, short_green, long_work, short_work, k, values, long_green_ms, "green contexts");
  std::printf("short kernel while the long one runs: %.1f us with plain streams (it waits for SMs), %.1f us with "
              "green contexts (%.1fx alone); long kernel meanwhile %.1f ms and %.1f ms\n",
              plain.short_ms * 1e3, green.short_ms * 1e3, green.short_ms / alone_ms, plain.long_ms, green.long_ms);
  if (plain.ok && green.ok) {
    std::printf("every output element of both kernels matches the host bit for bit, in both runs\n");
  }

  const double throughput = long_full_ms / long_green_ms;
  const double share = static_cast<double>(rest.sm_count()) / all.sm_count();
  char json[512];
  std::snprintf(json, sizeof(json),
                "\"sms\": %u, \"reserved_sms\": %u, \"alone_us\": %.4g, \"plain_us\": %.4g, \"green_us\": %.4g, "
                "\"long_full_ms\": %.4g, \"long_green_ms\": %.4g, \"long_throughput\": %.4f, \"sm_share\": %.4f",
                all.sm_count(), small.sm_count(), alone_ms * 1e3, plain.short_ms * 1e3, green.short_ms * 1e3,
                long_full_ms, long_green_ms, throughput, share);
  // The figure: the short kernel's speed under contention with green contexts, as a fraction of its
  // speed alone (1 = no slower than on an idle GPU); also printed for plain streams in the detail.
  example::figure f{"green_contexts", "1/ms (short kernel)", 1.0 / green.short_ms,
                    1.0 / alone_ms,   "short kernel alone",  0.5};
  f.detail = "plain streams " + std::to_string(alone_ms / plain.short_ms).substr(0, 5) +
             " x alone; long kernel keeps " + std::to_string(throughput).substr(0, 5) + " of its throughput on " +
             std::to_string(rest.sm_count()) + " of " + std::to_string(all.sm_count()) + " SMs";
  f.seconds = green.short_ms * 1e-3;
  f.json = json;
  example::report(f);
  return plain.ok && green.ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("green_contexts", [&] {
    if (argc > 3) {
      throw example::usage_error{"usage: example_green_contexts [reserved_sms [long_ms]]   (defaults: 16 200)"};
    }
    const std::size_t reserved = example::size_arg(argc, argv, 1, 16, "reserved SM count");
    const std::size_t long_ms = example::size_arg(argc, argv, 2, 200, "long kernel time in ms");
    if (reserved > 4096 || long_ms > 100000) {
      throw example::usage_error{"at most 4096 reserved SMs and 100000 ms"};
    }
    return run(static_cast<unsigned>(reserved), static_cast<double>(long_ms));
  });
}
