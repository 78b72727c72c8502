// saxpy_template: template kernels compiled with NVRTC for two element types. Name expressions
// ("saxpy<float>", "saxpy<double>") make NVRTC instantiate the templates and report their lowered
// (mangled) names; the library loaded from the compilation finds the kernels by those expressions.
// Each type has two kernels: saxpy, one element per thread, and saxpy_vec, one 16-byte vector (float4,
// double2) per thread over a grid-stride loop. Both are checked; the float saxpy_vec is measured over
// 1 GiB per array against the device-to-device copy bandwidth (1 GiB, cuMemcpyAsync) of the same run.
//
//   example_saxpy_template [n]      n elements per array, K/M/G suffixes accepted (default 256M: 1 GiB
//                                   of floats, 2 GiB of doubles)
//
// Device code: kernels/saxpy.hpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/saxpy.hpp"

namespace {

constexpr int repetitions = 20;

struct outcome {
  bool correct = true;
  double vec_ms = 0;  // saxpy_vec's median time
};

template <class T>
outcome run_saxpy(const cudrv::library& lib, const char* type, const cudrv::device& dev, cudrv::stream_ref stream,
                  std::size_t n, std::mt19937& gen) {
  using signature = void(T, const T*, T*, unsigned long long);
  const std::string scalar_name = std::string("saxpy<") + type + ">";
  const std::string vec_name = std::string("saxpy_vec<") + type + ">";
  auto saxpy = lib.get_kernel<signature>(scalar_name);
  auto saxpy_vec = lib.get_kernel<signature>(vec_name);

  const T a = T(2.5);
  std::vector<T> x(n), y(n), out(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<T>(gen() >> 8) * T(0x1p-24);         // uniform in [0, 1)
    y[i] = static_cast<T>(gen() >> 8) * T(0x1p-23) - T(1);  // uniform in [-1, 1)
  }
  cudrv::device_buffer<T> dx(dev, n), dy(dev, n);
  cudrv::copy(dx, x, stream);

  // One element per thread; and one 16-byte vector per thread over one full wave of blocks.
  const cudrv::launch_config config{.grid = cudrv::dims::checked((n + 255) / 256), .block = 256};
  const std::size_t width = 16 / sizeof(T);
  const int sms = dev.attribute(cudrv::device_attributes::multiprocessor_count);
  const std::size_t wave = static_cast<std::size_t>(sms) * saxpy_vec.max_active_blocks_per_multiprocessor(dev, 256);
  const cudrv::launch_config config_vec{.grid = static_cast<unsigned>(
                                            std::clamp<std::size_t>((n / width + 255) / 256, 1, wave)),
                                        .block = 256};

  // Runs kernel once from the original y and checks every element against a * x + y in long double.
  // The GPU rounds a * x + y at most twice (once when it fuses them into an FMA), each time by at most
  // half an ulp: |out - exact| <= eps * (|a x| + |y|), with 1% to spare for second-order terms.
  auto check = [&](const std::string& name, const cudrv::typed_kernel<signature>& kernel,
                   const cudrv::launch_config& cfg) {
    cudrv::copy(dy, y, stream);
    cudrv::launch(stream, cfg, kernel, a, dx.get(), dy.get(), n);
    cudrv::copy(out, dy, stream);
    stream.synchronize();
    const long double eps = std::numeric_limits<T>::epsilon();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const long double ax = static_cast<long double>(a) * x[i];
      const long double err = std::fabs(static_cast<long double>(out[i]) - (ax + y[i]));
      wrong += !(err <= 1.01L * eps * (std::fabs(ax) + std::fabs(static_cast<long double>(y[i]))));  // NaN fails
    }
    std::printf("%-17s -> %-30s %s", name.c_str(), kernel.name().c_str(), wrong == 0 ? "correct" : "WRONG");
    return wrong == 0;
  };
  // y is updated in place, so the timed runs start from whatever the previous one left: fine for timing.
  auto time = [&](const cudrv::typed_kernel<signature>& kernel, const cudrv::launch_config& cfg) {
    const double ms = example::time_ms(dev, stream, repetitions, [&](cudrv::stream_ref s) {
      cudrv::launch(s, cfg, kernel, a, dx.get(), dy.get(), n);
    });
    std::printf(", %u blocks of %u threads, %.3f ms, %.0f GB/s\n", cfg.grid.x, cfg.block.x, ms,
                3.0 * sizeof(T) * static_cast<double>(n) / (ms * 1e6));
    return ms;
  };
  outcome result;
  result.correct = check(scalar_name, saxpy, config);
  time(saxpy, config);
  result.correct = check(vec_name, saxpy_vec, config_vec) && result.correct;
  result.vec_ms = time(saxpy_vec, config_vec);
  return result;
}

bool run(std::size_t n) {
  cudrv::device dev(0);
  const cudrv::library lib =
      example::compile(dev, "saxpy.cu", example::saxpy_kernels::source, example::saxpy_kernels::name_expressions);
  cudrv::stream stream(dev);
  const unsigned seed = 7;
  std::mt19937 gen(seed);
  std::printf("y = 2.5 x + y over %zu elements, x uniform in [0, 1), y in [-1, 1), mt19937 seed %u\n", n, seed);
  const outcome f = run_saxpy<float>(lib, "float", dev, stream, n, gen);
  const outcome d = run_saxpy<double>(lib, "double", dev, stream, n, gen);
  const bool correct = f.correct && d.correct;

  const double bytes = 3.0 * sizeof(float) * static_cast<double>(n);  // x and y read, y written
  const double copy_gbs = example::copy_bandwidth_gbs(dev, stream, std::size_t{1} << 30);
  example::report({.example = "saxpy_template",
                   .metric = "GB/s",
                   .value = bytes / (f.vec_ms * 1e6),
                   .reference = copy_gbs,
                   .reference_name = "D2D copy",
                   .target = 0.95,
                   .detail = "saxpy_vec<float> (float4 grid-stride), 3 x " + std::to_string(n) + " floats per run, " +
                             (correct ? "results correct" : "result WRONG"),
                   .bytes = bytes,
                   .flops = 2.0 * static_cast<double>(n),  // one multiply-add per element
                   .seconds = f.vec_ms * 1e-3});
  return correct;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("saxpy_template",
                      [&] { return run(example::size_arg(argc, argv, 1, std::size_t{256} << 20, "element count")); });
}
