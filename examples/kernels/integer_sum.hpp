// Device code of example_mpi_sum and example_multi_gpu: a slice of a global vector generated on the
// device from the global index, and its exact sum (64-bit integers, so no rounding: the sum of the
// slices is the sum of the whole, whatever the split).
#pragma once
#include <string>
#include <vector>

namespace example::integer_sum_kernels {

inline constexpr const char* source = R"CUDA(
// Element g of the global vector is g mod 1021 (the host has the same rule, and the closed form of
// the sum of any range of it). 1021 is prime, so no slice boundary lines up with the period.
constexpr unsigned long long period = 1021;

// x[i] = element first + i of the global vector, for i < count. Any grid: a grid-stride loop.
extern "C" __global__ void generate(unsigned* __restrict__ x, unsigned long long first, unsigned long long count) {
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
    x[i] = (unsigned)((first + i) % period);
  }
}

// *sum += x[0] + ... + x[n - 1], exactly (64-bit). Threads read 16 bytes per load in a grid-stride
// loop, four loads in flight before the first add; the block adds up its threads with warp shuffles
// and one word of shared memory per warp, and adds its total to *sum with one atomic. Integer
// addition is associative, so the result does not depend on the grid or on the order of the atomics.
// x must be 16-byte aligned (every cudrv allocation is); blocks of 256 threads.
extern "C" __global__ void __launch_bounds__(256)
sum_u32(const unsigned* __restrict__ x, unsigned long long n, unsigned long long* sum) {
  const unsigned long long threads = (unsigned long long)gridDim.x * blockDim.x;
  const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  const uint4* body = reinterpret_cast<const uint4*>(x);
  const unsigned long long n4 = n / 4;
  unsigned long long acc = 0;
  unsigned long long i = tid;
  for (; i + 3 * threads < n4; i += 4 * threads) {
    const uint4 a = __ldg(body + i);
    const uint4 b = __ldg(body + i + threads);
    const uint4 c = __ldg(body + i + 2 * threads);
    const uint4 d = __ldg(body + i + 3 * threads);
    acc += ((unsigned long long)a.x + a.y + a.z + a.w) + ((unsigned long long)b.x + b.y + b.z + b.w) +
           ((unsigned long long)c.x + c.y + c.z + c.w) + ((unsigned long long)d.x + d.y + d.z + d.w);
  }
  for (; i < n4; i += threads) {
    const uint4 a = __ldg(body + i);
    acc += (unsigned long long)a.x + a.y + a.z + a.w;
  }
  if (tid < n - 4 * n4) {  // the last n mod 4 elements
    acc += x[4 * n4 + tid];
  }
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  __shared__ unsigned long long warp_sums[8];
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x < 32) {
    acc = threadIdx.x < 8 ? warp_sums[threadIdx.x] : 0ull;
    for (int offset = 4; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
    if (threadIdx.x == 0) atomicAdd(sum, acc);
  }
}
)CUDA";

inline const std::vector<std::string> name_expressions{};

inline constexpr bool arch_specific = false;

}  // namespace example::integer_sum_kernels
