// Device code of example_reduce: a single-pass sum of floats (compiled at run time by NVRTC).
#pragma once

#include <string>
#include <vector>

namespace example::reduce_kernels {

inline constexpr const char* source = R"CUDA(
// Independent loads each thread issues before it adds any of them up (16 bytes each in the main loop).
constexpr int loads_in_flight = 4;

// The sum of v over the warp, valid in lane 0.
template <class T>
__device__ T warp_sum(T v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

// The sum of v over the block, valid in thread 0. blockDim.x must be a multiple of 32.
template <class T>
__device__ T block_sum(T v) {
  __shared__ T warp_sums[32];
  const unsigned lane = threadIdx.x % 32;
  const unsigned warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) {
    warp_sums[warp] = v;
  }
  __syncthreads();
  if (warp == 0) {
    v = warp_sum(lane < blockDim.x / 32 ? warp_sums[lane] : T(0));
  }
  return v;
}

// *result = x[0] + ... + x[n - 1] in one launch. Each block sums a grid-strided share of x into
// partials[blockIdx.x]; the last block to finish adds the partials up (in double, in block order, so
// the result does not depend on which block finished last) and resets *counter to 0 for the next launch.
// x needs only 4-byte alignment; blockDim.x must be a multiple of 32 (at most 1024); *counter must be 0
// before the first launch, and launches that share a counter and partials must not overlap in time.
extern "C" __global__ void reduce_sum(const float* __restrict__ x, unsigned long long n, float* __restrict__ partials,
                                      unsigned int* counter, float* result) {
  const unsigned long long threads = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long tid = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;

  // x = a head of 0-3 floats up to the first 16-byte boundary, a body of float4s, a tail of 0-3 floats.
  unsigned long long head = ((16 - (reinterpret_cast<unsigned long long>(x) & 15)) & 15) / 4;
  head = head < n ? head : n;
  const float4* body = reinterpret_cast<const float4*>(x + head);
  const unsigned long long n4 = (n - head) / 4;
  const unsigned long long tail = head + 4 * n4;

  // One accumulator per load in flight, so that no add waits for another.
  float acc[loads_in_flight] = {};
  unsigned long long i = tid;
  for (; i + (loads_in_flight - 1) * threads < n4; i += loads_in_flight * threads) {
    float4 v[loads_in_flight];
#pragma unroll
    for (int u = 0; u < loads_in_flight; ++u) {
      v[u] = __ldg(body + i + u * threads);  // LDG.E.128: all loads issued before the first add
    }
#pragma unroll
    for (int u = 0; u < loads_in_flight; ++u) {
      acc[u] += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
  }
  for (; i < n4; i += threads) {
    const float4 v = __ldg(body + i);
    acc[0] += (v.x + v.y) + (v.z + v.w);
  }
  if (tid < head) {
    acc[1] += x[tid];
  }
  if (tid < n - tail) {
    acc[2] += x[tail + tid];
  }
  const float sum = block_sum((acc[0] + acc[1]) + (acc[2] + acc[3]));

  // Publish the partial, then take a ticket: the block that draws the last one sees every partial.
  __shared__ bool last;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = sum;
    __threadfence();
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
    __threadfence();  // acquire side for the thread that read the ticket, before the others are told
  }
  __syncthreads();
  if (!last) {
    return;
  }
  __threadfence();
  double total = 0;
  for (unsigned b = threadIdx.x; b < gridDim.x; b += loads_in_flight * blockDim.x) {
    float p[loads_in_flight];
#pragma unroll
    for (int u = 0; u < loads_in_flight; ++u) {
      const unsigned k = b + u * blockDim.x;
      p[u] = k < gridDim.x ? __ldcg(partials + k) : 0.0f;  // from L2, never a stale line of this SM's L1
    }
#pragma unroll
    for (int u = 0; u < loads_in_flight; ++u) {
      total += p[u];
    }
  }
  total = block_sum(total);
  if (threadIdx.x == 0) {
    *result = static_cast<float>(total);
    *counter = 0;
  }
}
)CUDA";

inline const std::vector<std::string> name_expressions{};

inline constexpr bool arch_specific = false;

}  // namespace example::reduce_kernels
