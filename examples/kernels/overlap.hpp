// Device code of example_overlap (examples/overlap.cpp), compiled at run time by NVRTC.
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace example::overlap_kernels {

// out[i] = x + in[i], where x is in[i] after `iterations` steps of the map x -> x * x - 2. On [-2, 2]
// the map is chaotic (the Chebyshev map 1 - 2x^2 in other coordinates) and never leaves the interval:
// x * x lies in [0, 4], and a correctly rounded fmaf of a value in [-2, 2] stays in [-2, 2]. In floats
// the orbits end on a few hundred cycles (and the fixed point 2); adding the input back keeps the
// outputs of different inputs apart. Each step is one fmaf, rounded once, so the host's std::fma and
// float addition give the same bits; being chaotic, any other rounding would give a completely
// different result. The host tunes `iterations` so that a chunk's kernel takes as long as its copy.
inline constexpr const char* source = R"CUDA(
extern "C" __global__ void chebyshev(const float* __restrict__ in, float* __restrict__ out, unsigned n,
                                     int iterations) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) {
    return;
  }
  const float x0 = in[i];
  float x = x0;
#pragma unroll 8
  for (int k = 0; k < iterations; ++k) {
    x = fmaf(x, x, -2.0f);
  }
  out[i] = x + x0;
}
)CUDA";

inline const std::vector<std::string> name_expressions{};

inline constexpr bool arch_specific = false;

// count random starting points in [-2, 2], where the map stays (the inputs are drawn from them).
inline std::vector<float> random_starts(std::size_t count, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<float> values(count);
  for (float& v : values) {
    v = uniform(rng);
  }
  return values;
}

// What chebyshev computes for one element whose input is x0, with the same rounding (std::fma rounds
// once, as fmaf does): the host's reference, shared by example_overlap and example_green_contexts.
inline float host_chebyshev(float x0, int iterations) {
  float x = x0;
  for (int k = 0; k < iterations; ++k) {
    x = std::fma(x, x, -2.0f);
  }
  return x + x0;
}

}  // namespace example::overlap_kernels
