// vector_add_nvrtc: compiles a CUDA C++ kernel at run time with NVRTC (through the persistent compile
// cache), loads the cubin, launches it with a typed kernel and checks the result on the host. Then it
// measures c = a + b at its memory limit: a float4 grid-stride variant over 1 GiB per array, against the
// device-to-device copy bandwidth (1 GiB, cuMemcpyAsync) measured in the same run.
//
//   example_vector_add_nvrtc [n]      n floats per array, K/M/G suffixes accepted (default 256M: 1 GiB)
//
// Run it twice: the second run finds the cubin in the cache ($CUDRV_CACHE_DIR, else
// $XDG_CACHE_HOME/cudrv/nvrtc, else ~/.cache/cudrv/nvrtc; CUDRV_DISABLE_CACHE=1 turns it off).
// Device code: kernels/vector_add.hpp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/vector_add.hpp"

namespace {

constexpr int repetitions = 20;
using add_signature = void(const float*, const float*, float*, unsigned long long);

bool run(std::size_t n) {
  cudrv::device dev(0);
  cudrv::program prog("vector_add.cu", example::vector_add_kernels::source);
  cudrv::compile_options options;
  options.arch = dev.arch();  // e.g. "sm_90": the cubin runs on this device as it is
  auto cache = cudrv::compile_cache::from_environment();
  auto t0 = std::chrono::steady_clock::now();
  cudrv::compile_result compiled = cache.compile(prog, cudrv::code_kind::cubin, options);
  cudrv::library lib(compiled.code);
  double compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("compile + load for %s: %.2f ms (%s)\n", options.arch.c_str(), compile_ms,
              cache.stats().hits > 0 ? "cache hit" : (cache.enabled() ? "compiled and cached" : "cache disabled"));

  auto add = lib.get_kernel<add_signature>("vector_add");
  auto add4 = lib.get_kernel<add_signature>("vector_add4");

  const unsigned seed = 42;
  std::mt19937 gen(seed);
  std::vector<float> a(n), b(n), c(n);
  for (std::size_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(gen() >> 8) * 0x1p-24f;  // uniform in [0, 1)
    b[i] = static_cast<float>(gen() >> 8) * 0x1p-24f;
  }
  cudrv::stream stream(dev);
  cudrv::device_buffer<float> da(dev, n), db(dev, n), dc(dev, n);
  cudrv::copy(da, a, stream);
  cudrv::copy(db, b, stream);

  // One element per thread, at the block size the occupancy calculator suggests.
  auto best = add.suggested_block_size(dev);
  const cudrv::launch_config config{.grid = cudrv::dims::checked((n + best.block_size - 1) / best.block_size),
                                    .block = best.block_size};
  // float4 grid-stride: one full wave of blocks, as many as fit on the GPU at once.
  const int threads4 = 256;
  const int sms = dev.attribute(cudrv::device_attributes::multiprocessor_count);
  const std::size_t wave = static_cast<std::size_t>(sms) * add4.max_active_blocks_per_multiprocessor(dev, threads4);
  const cudrv::launch_config config4{.grid = static_cast<unsigned>(
                                         std::clamp<std::size_t>((n / 4 + threads4 - 1) / threads4, 1, wave)),
                                     .block = threads4};

  // Launches kernel once on poisoned output and compares every element with the host's a + b (IEEE
  // addition rounds the same on both sides), then times it. Bytes per run: a and b read, c written.
  const double bytes = 3.0 * sizeof(float) * static_cast<double>(n);
  struct outcome {
    bool correct;
    double ms;
  };
  auto check_and_time = [&](const char* name, const cudrv::typed_kernel<add_signature>& kernel,
                            const cudrv::launch_config& cfg) {
    auto work = [&](cudrv::stream_ref s) { cudrv::launch(s, cfg, kernel, da.get(), db.get(), dc.get(), n); };
    cudrv::fill(dc, std::numeric_limits<float>::quiet_NaN(), stream);
    work(stream);
    cudrv::copy(c, dc, stream);
    stream.synchronize();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      wrong += !(c[i] == a[i] + b[i]);  // NaN, an element left unwritten, is never equal
    }
    const double ms = example::time_ms(dev, stream, repetitions, work);
    std::printf("%-11s of %zu elements, %u blocks of %u threads: %s, %.3f ms, %.0f GB/s\n", name, n, cfg.grid.x,
                cfg.block.x, wrong == 0 ? "all correct" : "WRONG", ms, bytes / (ms * 1e6));
    return outcome{wrong == 0, ms};
  };
  std::printf("inputs uniform in [0, 1), mt19937 seed %u\n", seed);
  const outcome scalar = check_and_time("vector_add", add, config);
  const outcome vec = check_and_time("vector_add4", add4, config4);
  const bool correct = scalar.correct && vec.correct;

  const double copy_gbs = example::copy_bandwidth_gbs(dev, stream, std::size_t{1} << 30);
  example::report({.example = "vector_add_nvrtc",
                   .metric = "GB/s",
                   .value = bytes / (vec.ms * 1e6),
                   .reference = copy_gbs,
                   .reference_name = "D2D copy",
                   .target = 0.95,
                   .detail = "float4 grid-stride kernel, 3 x " + std::to_string(n) + " floats per run, " +
                             (correct ? "results correct" : "result WRONG"),
                   .bytes = bytes,
                   .flops = static_cast<double>(n),  // one addition per element
                   .seconds = vec.ms * 1e-3});
  return correct;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("vector_add_nvrtc",
                      [&] { return run(example::size_arg(argc, argv, 1, std::size_t{256} << 20, "element count")); });
}
