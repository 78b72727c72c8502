// transpose: out = in^T for a square float matrix, twice. The naive kernel reads rows (coalesced) and
// writes columns (each warp's 32 stores land in 32 different lines); the tiled kernel stages a 64 x 64
// tile in shared memory padded to 65 words a row, so that it can read and write device memory in rows,
// with 16-byte accesses, and touch shared memory without bank conflicts in either direction
// (examples/kernels/transpose.hpp). Both are timed against a device-to-device copy of the same bytes in
// the same run, and every element of both results is checked on the host.
//
//   example_transpose [side]        side of the matrix, default 16384 (1 GiB of floats); K suffix allowed
//
// The figure is bytes read plus bytes written (2 * side^2 * 4) over the tiled kernel's time; the
// target is 0.90 of the copy bandwidth.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "example_main.hpp"
#include "kernels/transpose.hpp"

namespace {

namespace kernels = example::transpose_kernels;
using transpose_fn = void(const float*, float*, int);

constexpr int tile = 64;  // the tiled kernel's tile side (TILE in the kernel source)

// Counts the elements of out that are not in's transpose (a NaN left by the poison counts too).
std::size_t count_wrong(const std::vector<float>& in, const std::vector<float>& out, std::size_t n) {
  std::size_t wrong = 0;
  constexpr std::size_t block = 64;  // blocks of 64 x 64 keep both matrices' rows in the host's cache
  for (std::size_t r0 = 0; r0 < n; r0 += block) {
    for (std::size_t c0 = 0; c0 < n; c0 += block) {
      for (std::size_t r = r0; r < std::min(r0 + block, n); ++r) {
        for (std::size_t c = c0; c < std::min(c0 + block, n); ++c) {
          wrong += !(out[c * n + r] == in[r * n + c]);
        }
      }
    }
  }
  return wrong;
}

bool run(std::size_t side) {
  if (side > 100000) {
    throw example::usage_error{"side " + std::to_string(side) + " is too large (at most 100000)"};
  }
  const int n = static_cast<int>(side);
  const std::size_t count = side * side;
  const double bytes = 2.0 * static_cast<double>(count) * sizeof(float);  // each element read once, written once

  cudrv::device dev(0);
  cudrv::stream stream(dev);
  cudrv::library lib = example::compile(dev, "transpose.cu", kernels::source, kernels::name_expressions);
  auto naive = lib.get_kernel<transpose_fn>("transpose_naive");
  auto tiled = lib.get_kernel<transpose_fn>("transpose_tiled");
  // 8 blocks of 256 threads fill an SM; their tiles take 8 x 16.6 KB of shared memory, so ask for the
  // largest shared-memory share of the SM's 256 KB of L1 and shared memory (the rest stays L1).
  tiled.set_preferred_shared_memory_carveout(dev, 100);

  std::vector<float> in(count), out(count);
  std::mt19937 rng(20240607);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : in) {
    x = dist(rng);
  }
  cudrv::device_buffer<float> din(dev, count), dout(dev, count);
  cudrv::copy(din, in, stream);

  // Poisons the output, times the kernel (its first, warm-up run writes every element once), then
  // copies the result back and checks every element. Returns the time in ms, or a negative value
  // when the result is wrong.
  auto time_and_check = [&](const cudrv::typed_kernel<transpose_fn>& kernel, const cudrv::launch_config& config,
                            const char* name) {
    cudrv::fill(dout, std::numeric_limits<float>::quiet_NaN(), stream);
    const double ms = example::time_ms(dev, stream, 20, [&](cudrv::stream_ref s) {
      cudrv::launch(s, config, kernel, din.get(), dout.get(), n);
    });
    cudrv::copy(out, dout, stream);
    stream.synchronize();
    const std::size_t wrong = count_wrong(in, out, side);
    if (wrong != 0) {
      std::fprintf(stderr, "transpose: the %s kernel got %zu of %zu elements wrong\n", name, wrong, count);
      return -1.0;
    }
    return ms;
  };

  const unsigned tiles = static_cast<unsigned>((side + tile - 1) / tile);
  const cudrv::dims naive_grid(static_cast<unsigned>((side + 31) / 32), static_cast<unsigned>((side + 7) / 8));
  const double naive_ms = time_and_check(naive, {.grid = naive_grid, .block = {32, 8}}, "naive");
  const double tiled_ms = time_and_check(tiled, {.grid = {tiles, tiles}, .block = {8, 32}}, "tiled");
  if (naive_ms < 0 || tiled_ms < 0) {
    return false;
  }

  const double copy_gbs = example::copy_bandwidth_gbs(dev, stream, count * sizeof(float));
  const double naive_gbs = bytes / (naive_ms * 1e6);
  const double tiled_gbs = bytes / (tiled_ms * 1e6);
  char detail[256];
  std::snprintf(detail, sizeof detail,
                "%d x %d floats, 64 x 64 tiles in 64 x 65 shared memory, %.3f ms; "
                "naive %.4g GB/s = %.3f x copy, %.3f ms",
                n, n, tiled_ms, naive_gbs, naive_gbs / copy_gbs, naive_ms);
  example::report({.example = "transpose",
                   .metric = "GB/s",
                   .value = tiled_gbs,
                   .reference = copy_gbs,
                   .reference_name = "D2D copy",
                   .target = 0.90,
                   .detail = detail,
                   .bytes = bytes,
                   .seconds = tiled_ms * 1e-3});
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  return example::run("transpose", [&] { return run(example::size_arg(argc, argv, 1, 16384, "side")); });
}
