// reduce: the sum of 1 GiB of floats in a single kernel launch, measured against CUB's
// cub::DeviceReduce::Sum over the same buffer in the same run.
//
//   example_reduce [n]      n floats, K/M/G suffixes accepted (default 256M: 1 GiB)
//
// What it shows (device code in kernels/reduce.hpp):
// - a grid of exactly one full wave, SMs x blocks per SM, from the kernel's occupancy query
//   (kernel.max_active_blocks_per_multiprocessor), each thread striding over the whole input;
// - 16-byte loads (LDG.E.128), four independent ones in flight per thread before the first add;
// - warp shuffles and shared memory for the sum of a block;
// - a single pass: every block writes its partial sum, and the last block to finish (an atomic
//   ticket after a __threadfence) adds up the partials and resets the ticket counter, so the kernel
//   can be launched again and again with no memset in between;
// - inputs of any length and alignment: a scalar head up to the first 16-byte boundary and a tail.
// The result is checked against a double-precision host sum with a derived error bound (see
// error_bound below), also for a misaligned sub-range and after the timed launches.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/reduce.hpp"
#include "reference/cub_reduce.hpp"

namespace {

constexpr int block_threads = 256;
constexpr int repetitions = 50;

// The exact sum (to double rounding) and the sum of magnitudes of x[first, first + count).
struct host_sum {
  double sum = 0;
  double sum_abs = 0;
};

host_sum sum_on_host(const std::vector<float>& x, std::size_t first, std::size_t count) {
  host_sum s;
  for (std::size_t i = first; i < first + count; ++i) {
    s.sum += x[i];
    s.sum_abs += std::fabs(x[i]);
  }
  return s;
}

// A bound on |GPU sum - host sum|. In any summation tree, each rounding multiplies by (1 + d) with
// |d| <= u, so |computed - exact| <= gamma(h) * sum|x|, gamma(h) = h u / (1 - h u), where h is the most
// float additions on the path of any one input to the result (Higham, Accuracy and Stability of
// Numerical Algorithms, ch. 4). Here an input meets: 2 additions inside its float4, at most m + 1 into
// its thread's accumulator (m = float4s per thread, plus a head or tail float), 2 combining the four
// accumulators, 5 in the warp shuffle and 5 across the warps: h = m + 15. The double additions of the
// partials, the final rounding to float and the host's own double sum add their (far smaller) shares.
double error_bound(std::size_t n, unsigned grid, double sum_abs) {
  const double u = std::numeric_limits<float>::epsilon() / 2;
  const double ud = std::numeric_limits<double>::epsilon() / 2;
  const double threads = static_cast<double>(grid) * block_threads;
  const double h = std::ceil(static_cast<double>(n) / 4 / threads) + 15;
  const double h_partials = std::ceil(static_cast<double>(grid) / block_threads) + 10;
  return (h * u / (1 - h * u) + u + (h_partials + static_cast<double>(n)) * ud) * sum_abs;
}

bool run(std::size_t n) {
  cudrv::device dev(0);
  cudrv::stream stream(dev);
  const cudrv::library lib =
      example::compile(dev, "reduce.cu", example::reduce_kernels::source, example::reduce_kernels::name_expressions);
  auto reduce = lib.get_kernel<void(const float*, unsigned long long, float*, unsigned*, float*)>("reduce_sum");

  // One full wave: as many blocks as fit on the GPU at once, no more than there is work for.
  const int sms = dev.attribute(cudrv::device_attributes::multiprocessor_count);
  const int per_sm = reduce.max_active_blocks_per_multiprocessor(dev, block_threads);
  const std::size_t useful = (n / 4 + block_threads - 1) / block_threads;
  const auto grid = static_cast<unsigned>(std::clamp<std::size_t>(useful, 1, static_cast<std::size_t>(sms) * per_sm));
  const cudrv::launch_config config{.grid = grid, .block = block_threads};

  const unsigned seed = 2024;
  std::mt19937 gen(seed);
  std::vector<float> x(n);
  for (float& v : x) {
    v = static_cast<float>(gen() >> 8) * 0x1p-24f;  // uniform in [0, 1), 24 random bits
  }

  cudrv::device_buffer<float> dx(dev, n), partials(dev, grid), result(dev, 1), cub_result(dev, 1);
  cudrv::device_buffer<unsigned> counter(dev, 1);
  const std::size_t temp_bytes = example::reference::cub_sum::temp_bytes(n);
  cudrv::device_buffer<unsigned char> temp(dev, std::max<std::size_t>(temp_bytes, 1));
  cudrv::copy(dx, x, stream);
  cudrv::fill(partials, std::numeric_limits<float>::quiet_NaN(), stream);
  cudrv::fill(counter, 0u, stream);  // once: every launch leaves it 0 again

  // launch enqueues the sum of x[first, first + count) into *result; gpu_sum poisons *result first,
  // launches once and reads the sum back.
  auto launch = [&](cudrv::stream_ref s, std::size_t first, std::size_t count) {
    cudrv::launch(s, config, reduce, dx.get() + first, static_cast<unsigned long long>(count), partials.get(),
                  counter.get(), result.get());
  };
  auto gpu_sum = [&](std::size_t first, std::size_t count) {
    cudrv::fill(result, std::numeric_limits<float>::quiet_NaN(), stream);
    launch(stream, first, count);
    float out = 0;
    cudrv::copy(std::span(&out, 1), result, stream);
    stream.synchronize();
    return out;
  };
  auto check = [&](const char* what, float out, const host_sum& ref, double bound) {
    const double err = std::fabs(static_cast<double>(out) - ref.sum);
    const bool ok = err <= bound;  // false for NaN
    std::printf("  %-32s %.9g, exact %.9g, |error| %.3g (%.2g relative), bound %.3g: %s\n", what, out, ref.sum, err,
                ref.sum != 0 ? err / std::fabs(ref.sum) : err, bound, ok ? "correct" : "WRONG");
    return ok;
  };

  std::printf("sum of %zu uniform [0, 1) floats (mt19937 seed %u), %u blocks of %d threads (%d per SM x %d SMs)\n", n,
              seed, grid, block_threads, per_sm, sms);
  const host_sum whole = sum_on_host(x, 0, n);
  const float first_result = gpu_sum(0, n);
  bool ok = check("GPU, whole buffer:", first_result, whole, error_bound(n, grid, whole.sum_abs));
  if (n > 2) {  // a start 4 bytes past a 16-byte boundary, and a different tail
    const host_sum inner = sum_on_host(x, 1, n - 2);
    const float out = gpu_sum(1, n - 2);
    ok = check("GPU, x[1, n - 1), misaligned:", out, inner, error_bound(n - 2, grid, inner.sum_abs)) && ok;
  }

  cudrv::fill(result, std::numeric_limits<float>::quiet_NaN(), stream);
  cudrv::fill(cub_result, std::numeric_limits<float>::quiet_NaN(), stream);
  const double ms = example::time_ms(dev, stream, repetitions, [&](cudrv::stream_ref s) { launch(s, 0, n); });
  const double cub_ms = example::time_ms(dev, stream, repetitions, [&](cudrv::stream_ref s) {
    example::reference::cub_sum::run(temp.get(), temp_bytes, dx.get(), cub_result.get(), n, s.native_handle());
  });

  // The result of the last timed launch: each launch relied on the previous one's reset of the counter,
  // and the sum does not depend on the order in which blocks finish.
  float relaunched = 0, cub_out = 0;
  cudrv::copy(std::span(&relaunched, 1), result, stream);
  cudrv::copy(std::span(&cub_out, 1), cub_result, stream);
  stream.synchronize();
  const bool same = std::memcmp(&relaunched, &first_result, sizeof(float)) == 0;
  std::printf("  after %d relaunches with no memset: %s\n", repetitions + 1,
              same ? "bitwise the same result" : "DIFFERENT result");
  // CUB sums in its own order, so the bound above does not apply to it: its result is only checked
  // loosely (1e-4 of sum|x|), to be sure that the reference timed really summed the buffer.
  ok = check("CUB DeviceReduce::Sum:", cub_out, whole, 1e-4 * whole.sum_abs) && same && ok;

  // An exact check, which no error bound can give: small integers (0 to 3) sum without rounding in
  // every float accumulator and block partial (each stays far below 2^24), the partials are added in
  // double, so the result must equal the exact total rounded once to float. It runs over the whole
  // buffer and from each of the first four starts, which take the scalar head before the float4 loop.
  {
    std::vector<float> small(n);
    std::mt19937 ints(seed + 1);
    for (float& v : small) {
      v = static_cast<float>(ints() % 4);
    }
    cudrv::copy(dx, std::span<const float>(small), stream);
    for (std::size_t first = 0; first < 4 && first < n; ++first) {
      double exact = 0;
      for (std::size_t i = first; i < n; ++i) {
        exact += small[i];
      }
      const float out = gpu_sum(first, n - first);
      const bool equal = out == static_cast<float>(exact);
      std::printf("  small integers from element %zu:   %.9g, exact %.0f (%.9g as a float): %s\n", first, out, exact,
                  static_cast<double>(static_cast<float>(exact)), equal ? "equal" : "DIFFERENT");
      ok = equal && ok;
    }
  }

  const double bytes = 4.0 * static_cast<double>(n);  // each float read once
  char detail[160];
  std::snprintf(detail, sizeof detail, "%zu floats, %.1f us vs %.1f us, result %s", n, ms * 1e3, cub_ms * 1e3,
                ok ? "correct" : "WRONG");
  example::report({.example = "reduce",
                   .metric = "GB/s",
                   .value = bytes / (ms * 1e6),
                   .reference = bytes / (cub_ms * 1e6),
                   .reference_name = "CUB DeviceReduce::Sum",
                   .target = 0.95,
                   .detail = detail,
                   .bytes = bytes,
                   .flops = static_cast<double>(n),  // one addition per element
                   .seconds = ms * 1e-3});
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("reduce",
                      [&] { return run(example::size_arg(argc, argv, 1, std::size_t{256} << 20, "element count")); });
}
