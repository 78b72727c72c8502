// Device code of example_monte_carlo_pi: points of the unit square drawn by a counter-based generator
// (Philox4x32-10), counted when they fall inside the quarter circle, summed per block and added to a
// 64-bit counter with one atomic per block.
#pragma once
#include <string>
#include <vector>

namespace example::monte_carlo_pi_kernels {

inline constexpr const char* source = R"CUDA(
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3", SC 2011):
// a counter-based generator. Its output is a pure function of (counter, key): no state is stored or
// carried from call to call, so any thread can draw any number of the sequence directly, and the
// numbers do not depend on how the work is split over threads, blocks or streams.
// Each round multiplies two words of the counter (32 x 32 -> 64 bits), mixes the halves with the
// other words and the key, and bumps the key by the Weyl constants. (The host has the same function.)
__device__ __forceinline__ uint4 philox4x32_10(uint4 c, unsigned k0, unsigned k1) {
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const unsigned long long p0 = (unsigned long long)0xD2511F53u * c.x;
    const unsigned long long p1 = (unsigned long long)0xCD9E8D57u * c.z;
    c = make_uint4((unsigned)(p1 >> 32) ^ c.y ^ k0, (unsigned)p1, (unsigned)(p0 >> 32) ^ c.w ^ k1, (unsigned)p0);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// Whether the point (x, y) / 2^31 lies inside the quarter circle of radius 1: x^2 + y^2 < 2^62,
// exact in 64-bit integers (no rounding decides a point near the circle).
__device__ __forceinline__ unsigned inside(unsigned rx, unsigned ry) {
  const unsigned long long x = rx >> 1, y = ry >> 1;
  return x * x + y * y < (1ull << 62) ? 1u : 0u;
}

// Counts the points first .. first + count - 1 of the sequence of seed (first is even) that fall
// inside the circle and adds the count to *hits. Point p is half of Philox's output for counter
// (p / 2 as two 32-bit words, 0, 0) and key seed: one call gives two points. Threads take pairs of
// points in a grid-stride loop; blocks of 256 threads.
extern "C" __global__ void __launch_bounds__(256)
count_hits(unsigned long long first, unsigned long long count, unsigned long long seed, unsigned long long* hits) {
  const unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
  const unsigned long long end = first + count;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long mine = 0;
  for (unsigned long long pair = first / 2 + blockIdx.x * blockDim.x + threadIdx.x; 2 * pair < end; pair += stride) {
    const uint4 r = philox4x32_10(make_uint4((unsigned)pair, (unsigned)(pair >> 32), 0u, 0u), k0, k1);
    mine += inside(r.x, r.y);
    if (2 * pair + 1 < end) mine += inside(r.z, r.w);
  }
  // The block's sum: shuffles within each warp, the 8 warp sums through shared memory, then one
  // atomic per block on the stream's counter.
  for (int offset = 16; offset > 0; offset /= 2) mine += __shfl_down_sync(0xffffffffu, mine, offset);
  __shared__ unsigned long long warp_sums[8];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = mine;
  __syncthreads();
  if (threadIdx.x < 32) {
    mine = threadIdx.x < 8 ? warp_sums[threadIdx.x] : 0ull;
    for (int offset = 4; offset > 0; offset /= 2) mine += __shfl_down_sync(0xffffffffu, mine, offset);
    if (threadIdx.x == 0) atomicAdd(hits, mine);
  }
}
)CUDA";

inline const std::vector<std::string> name_expressions{};

inline constexpr bool arch_specific = false;

}  // namespace example::monte_carlo_pi_kernels
