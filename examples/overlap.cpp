// overlap: hides host <-> device copies behind computation with several streams.
//
//   example_overlap [bytes [streams]]      defaults: 1G 4
//
// The data (floats in pinned host memory) is cut into 32 chunks. Each chunk is copied to the device
// (H2D), transformed by a kernel, and copied back (D2H). On one stream the 96 steps run one after the
// other. On N streams chunk k goes to stream k % N, and the GPU can run one chunk's H2D, another's
// kernel and a third's D2H at the same time: H2D and D2H each have a copy engine of their own and the
// kernel runs on the SMs. With the three stages equally long that is up to 3x faster, less the pipeline
// filling and draining (two stages' worth out of 34).
//
// So that the three stages are equally long, the kernel's work per element is tuned at run time: the
// program times one chunk's H2D, and the kernel at two iteration counts, and picks the count at which
// the kernel takes as long as the copy (printed).
//
// Shows: pinned host memory (cudrv::pinned_buffer), without which copies are neither asynchronous nor
// fast; one staging buffer pair per stream, reused safely because work on one stream is ordered;
// events that order (the streams fork from the control stream and join it again, stream.wait(event))
// and measure (example::time_ms); NVTX ranges around each stage, and named streams, to look at it
// in Nsight Systems:
//
//   nsys profile --trace=cuda,nvtx -o overlap ./example_overlap
//
// (the ranges cover the issuing of each step on the CPU; the CUDA rows of the timeline show the copies
// and kernels on the named streams, overlapping).
//
// Every output element is checked, bit for bit (tolerance 0), against the host: the kernel's only
// arithmetic is fmaf, rounded once per step as std::fma is, and one float addition. The inputs are
// drawn from 8192 random values, so the host computes the map once per distinct value.
//
// Exit status: 0 success, 1 usage error, 2 no CUDA driver, 3 no CUDA device, 4 CUDA or compiler
// error, 5 an output element differs from the host's.
#include <cudrv/nvtx.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/overlap.hpp"

namespace {

namespace nvtx = cudrv::nvtx;
using map_kernel = cudrv::typed_kernel<void(const float*, float*, unsigned, int)>;

constexpr std::size_t chunk_target = 32;            // chunks the data is cut into
constexpr std::size_t distinct_inputs = 1u << 13;   // random values the inputs are drawn from
constexpr std::uint32_t poison_bits = 0x7FBADBADu;  // a NaN: what outputs hold before a verified run

// Which of the distinct values input element i holds (a hash of i and the seed).
std::size_t pick(std::size_t i, std::uint64_t seed) {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::size_t>((z ^ (z >> 31)) % distinct_inputs);
}

// One stream of the pipeline with its staging buffers (one chunk each) and the event that marks its
// last step, which the control stream waits for.
struct lane {
  cudrv::stream stream;
  cudrv::device_buffer<float> in;
  cudrv::device_buffer<float> out;
  cudrv::event done;
};

// The whole job: n floats from input through the kernel into output, in chunks.
struct job {
  std::span<const float> input;
  std::span<float> output;
  std::size_t chunk;  // elements per chunk (the last one may be shorter)
  const map_kernel& kernel;
  int iterations;

  [[nodiscard]] std::size_t chunks() const { return (input.size() + chunk - 1) / chunk; }

  void launch_kernel(cudrv::stream_ref s, const cudrv::device_buffer<float>& in, cudrv::device_buffer<float>& out,
                     std::size_t count, int iters) const {
    const cudrv::launch_config config{.grid = cudrv::dims::checked((count + 255) / 256), .block = 256};
    cudrv::launch(s, config, kernel, in.get(), out.get(), static_cast<unsigned>(count), iters);
  }

  // Enqueues every chunk on `lanes` (chunk k on lane k % lanes.size()), after the work queued on
  // control so far, and makes control wait for all of it: time it with events on control.
  void enqueue(cudrv::stream_ref control, std::span<lane> lanes, const cudrv::event& fork) const {
    nvtx::range whole{"pipeline", nvtx::payload{static_cast<std::int64_t>(lanes.size())}};
    control.record(fork);
    for (lane& l : lanes) {
      l.stream.wait(fork);
    }
    for (std::size_t k = 0; k < chunks(); ++k) {
      lane& l = lanes[k % lanes.size()];
      const std::size_t offset = k * chunk;
      const std::size_t count = std::min(chunk, input.size() - offset);
      const nvtx::payload which{static_cast<std::int64_t>(k)};
      {
        nvtx::range r{"H2D", nvtx::rgb{40, 120, 255}, which};
        cudrv::copy(l.in, input.subspan(offset, count), l.stream);
      }
      {
        nvtx::range r{"kernel", nvtx::rgb{118, 185, 0}, which};
        launch_kernel(l.stream, l.in, l.out, count, iterations);
      }
      {
        nvtx::range r{"D2H", nvtx::rgb{255, 140, 0}, which};
        cudrv::copy(output.subspan(offset, count), l.out, count, l.stream);
      }
    }
    for (lane& l : lanes) {
      l.stream.record(l.done);
      control.wait(l.done);
    }
  }
};

// Runs the job once with poisoned outputs (host and staging buffers) and checks every element.
bool run_verified(const job& w, cudrv::stream_ref control, std::span<lane> lanes, const cudrv::event& fork,
                  const std::vector<float>& expected, std::uint64_t seed, const char* what) {
  nvtx::range r{"verified run"};
  const float poison = std::bit_cast<float>(poison_bits);
  std::fill(w.output.begin(), w.output.end(), poison);
  for (lane& l : lanes) {
    cudrv::fill(l.in, poison, l.stream);
    cudrv::fill(l.out, poison, l.stream);  // before the lane's steps: one stream is ordered
  }
  w.enqueue(control, lanes, fork);
  control.synchronize();
  std::size_t wrong = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < w.output.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(w.output[i]) != std::bit_cast<std::uint32_t>(expected[pick(i, seed)])) {
      if (wrong++ == 0) {
        first = i;
      }
    }
  }
  if (wrong != 0) {
    std::printf("%s: %zu of %zu elements WRONG; first at %zu: %.9g, expected %.9g\n", what, wrong, w.output.size(),
                first, static_cast<double>(w.output[first]), static_cast<double>(expected[pick(first, seed)]));
    return false;
  }
  std::printf("%s: all %zu elements match the host bit for bit\n", what, w.output.size());
  return true;
}

bool run(std::size_t bytes, std::size_t stream_count) {
  const std::size_t n = bytes / sizeof(float);
  if (n == 0 || stream_count > 64) {
    throw example::usage_error{"need at least 4 bytes and at most 64 streams"};
  }
  const std::size_t chunk = (n + chunk_target - 1) / chunk_target;
  if (chunk > 0x7FFFFFFFu) {
    throw example::usage_error{"at most 2^31 - 1 floats per chunk"};
  }

  cudrv::device dev(0);
  dev.set_current();  // stream-ordered copies run in the current context
  nvtx::name(dev, "GPU 0");
  cudrv::compile_options options;
  options.fmad = false;  // no contraction beyond the kernel's explicit fmaf (there is none to make)
  options.ftz = false;   // denormals as on the host
  const cudrv::library lib = example::compile(dev, "overlap.cu", example::overlap_kernels::source,
                                              example::overlap_kernels::name_expressions, options);
  const map_kernel kernel = lib.get_kernel<void(const float*, float*, unsigned, int)>("chebyshev");

  // Random inputs in [-2, 2], each element one of distinct_inputs values.
  const std::uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const std::vector<float> values = example::overlap_kernels::random_starts(distinct_inputs, rng);
  cudrv::pinned_buffer<float> input(dev, n);
  cudrv::pinned_buffer<float> output(dev, n);
  for (std::size_t i = 0; i < n; ++i) {
    input[i] = values[pick(i, seed)];
  }

  cudrv::stream control(dev);
  nvtx::name(control, "control");
  cudrv::event fork(dev);
  std::vector<lane> lanes;
  lanes.reserve(stream_count);
  for (std::size_t i = 0; i < stream_count; ++i) {
    lanes.push_back(lane{cudrv::stream(dev), cudrv::device_buffer<float>(dev, chunk),
                         cudrv::device_buffer<float>(dev, chunk), cudrv::event(dev)});
    nvtx::name(lanes.back().stream, "lane " + std::to_string(i));
  }
  job work{input.view(), output.view(), chunk, kernel, 0};
  const std::size_t chunks = work.chunks();
  std::printf("overlap: %zu MiB of floats in %zu chunks of %.1f MiB, %zu streams, on %s (%d copy engines)\n",
              bytes >> 20, chunks, static_cast<double>(chunk * sizeof(float)) / (1 << 20), stream_count,
              dev.name().c_str(), dev.attribute(cudrv::device_attributes::async_engine_count));

  // Tune: one chunk's copies, and the kernel at two iteration counts. The kernel's time grows
  // linearly with the count (t = a + b * iterations); solve for the H2D time.
  double h2d = 0, d2h = 0, kernel_ms = 0;
  {
    nvtx::range r{"tune"};
    lane& l = lanes[0];
    const auto first_chunk = work.input.first(chunk);
    h2d = example::time_ms(dev, l.stream, 10, [&](cudrv::stream_ref s) { cudrv::copy(l.in, first_chunk, s); });
    d2h = example::time_ms(dev, l.stream, 10,
                           [&](cudrv::stream_ref s) { cudrv::copy(work.output.first(chunk), l.out, s); });
    auto kernel_time = [&](int iters) {
      return example::time_ms(dev, l.stream, 10,
                              [&](cudrv::stream_ref s) { work.launch_kernel(s, l.in, l.out, chunk, iters); });
    };
    const int lo = 256;
    const int hi = 4096;
    const double t_lo = kernel_time(lo);
    const double t_hi = kernel_time(hi);
    const double per_iteration = (t_hi - t_lo) / (hi - lo);
    const double fit = per_iteration > 0 ? lo + (h2d - t_lo) / per_iteration : hi;
    work.iterations = static_cast<int>(std::clamp(std::lround(fit), 1L, 1L << 20));
    kernel_ms = kernel_time(work.iterations);
  }
  const double slowest = std::max({h2d, kernel_ms, d2h});
  const double ideal = chunks * (h2d + kernel_ms + d2h) / ((h2d + kernel_ms + d2h) + (chunks - 1) * slowest);
  const double mib = static_cast<double>(chunk * sizeof(float)) / (1 << 20);
  std::printf("per chunk: H2D %.3f ms (%.1f GB/s), kernel %.3f ms at %d iterations per element (tuned to the H2D "
              "time), D2H %.3f ms (%.1f GB/s); ideal speedup with %zu chunks: %.2fx\n",
              h2d, mib * 1.048576 / h2d, kernel_ms, work.iterations, d2h, mib * 1.048576 / d2h, chunks, ideal);

  // The host's results, once per distinct input value.
  std::vector<float> expected(distinct_inputs);
  for (std::size_t v = 0; v < distinct_inputs; ++v) {
    expected[v] = example::overlap_kernels::host_chebyshev(values[v], work.iterations);
  }

  std::span<lane> all(lanes);
  std::span<lane> one = all.first(1);
  const std::string many = std::to_string(stream_count) + " streams";
  bool ok = run_verified(work, control, one, fork, expected, seed, "one stream");
  ok = run_verified(work, control, all, fork, expected, seed, many.c_str()) && ok;

  const int repetitions = 5;
  double one_ms = 0, many_ms = 0;
  {
    nvtx::range r{"one stream"};
    one_ms = example::time_ms(dev, control, repetitions, [&](cudrv::stream_ref s) { work.enqueue(s, one, fork); });
  }
  {
    nvtx::range r{"N streams"};
    many_ms = example::time_ms(dev, control, repetitions, [&](cudrv::stream_ref s) { work.enqueue(s, all, fork); });
  }
  const double gb = 2.0 * static_cast<double>(n * sizeof(float)) / 1e9;
  std::printf("one stream: %.2f ms; %zu streams: %.2f ms (%.1f GB/s over the link, both directions counted)\n", one_ms,
              stream_count, many_ms, gb / (many_ms * 1e-3));

  example::figure f{"overlap", "speedup", one_ms / many_ms, 1.0, "one stream", 1.8};
  f.detail = std::to_string(bytes >> 20) + " MiB, " + std::to_string(chunks) + " chunks, " +
             std::to_string(stream_count) + " streams, " + std::to_string(work.iterations) + " iterations; ideal " +
             std::to_string(ideal).substr(0, 4) + "x";
  f.seconds = many_ms * 1e-3;
  example::report(f);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("overlap", [&] {
    if (argc > 3) {
      throw example::usage_error{"usage: example_overlap [bytes [streams]]   (defaults: 1G 4)"};
    }
    return run(example::size_arg(argc, argv, 1, std::size_t{1} << 30, "size in bytes"),
               example::size_arg(argc, argv, 2, 4, "stream count"));
  });
}
