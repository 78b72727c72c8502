// Device code of example_heat_halo: the 1-D heat equation u_t = u_xx stepped explicitly on a slab of
// a global grid, with one ghost cell on each side that holds the neighbour's edge cell (after a halo
// exchange) or the fixed temperature outside the domain.
#pragma once
#include <string>
#include <vector>

namespace example::heat_halo_kernels {

inline constexpr const char* source = R"CUDA(
// The initial temperature of global cell g: a hash of g scaled into [0, 1), so that neighbouring
// cells differ everywhere and a wrong ghost value changes the result.
__device__ float initial_value(unsigned long long g) {
  unsigned long long h = (g + 1) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 31;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 29;
  return (float)(unsigned)(h >> 40) * 0x1p-24f;
}

// A slab of count cells, global cells first .. first + count - 1, in u[1 .. count] and v[1 .. count];
// u[0], v[0] = left and u[count + 1], v[count + 1] = right: the ghost cells (the fixed temperature
// outside the domain at its ends, NaN where a neighbour's cell will be exchanged in, so that a missed
// exchange cannot go unnoticed). Any grid: a grid-stride loop.
extern "C" __global__ void init(float* __restrict__ u, float* __restrict__ v, unsigned long long first,
                                unsigned long long count, float left, float right) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < count + 2; i += stride) {
    const float value = i == 0 ? left : i == count + 1 ? right : initial_value(first + i - 1);
    u[i] = value;
    v[i] = value;
  }
}

// One explicit Euler step with r = dt / dx^2: v[i] = u[i] + r * ((u[i - 1] + u[i + 1]) - 2 u[i]) for
// i = 1 .. count, reading the ghosts u[0] and u[count + 1]. Each cell's value depends only on its own
// three inputs, in the same operations wherever the slab boundaries fall, so a split grid gives the
// whole grid's result bit for bit. Any grid: a grid-stride loop.
extern "C" __global__ void step(const float* __restrict__ u, float* __restrict__ v, unsigned long long count, float r) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x + 1; i <= count; i += stride) {
    const float c = u[i];
    v[i] = c + r * ((u[i - 1] + u[i + 1]) - 2.0f * c);
  }
}
)CUDA";

inline const std::vector<std::string> name_expressions{};

inline constexpr bool arch_specific = false;

}  // namespace example::heat_halo_kernels
