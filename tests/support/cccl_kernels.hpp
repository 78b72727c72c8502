// Kernels that include the CUDA toolkit's CCCL headers, compiled at run time by the CPU tests (NVRTC)
// and launched by the GPU tests; docs/interop.md quotes them.
#pragma once

namespace cudrv::test {

// One sum per block of Block threads with CUB's BlockReduce; threads past n contribute 0.
inline constexpr const char* cub_block_sum_source = R"(
#include <cub/block/block_reduce.cuh>

template <class T, int Block>
__global__ void block_sum(const T* in, T* out, unsigned n) {
  using reduce = cub::BlockReduce<T, Block>;
  __shared__ typename reduce::TempStorage storage;
  const unsigned i = blockIdx.x * Block + threadIdx.x;
  const T sum = reduce(storage).Sum(i < n ? in[i] : T(0));
  if (threadIdx.x == 0) {
    out[blockIdx.x] = sum;
  }
}
)";

// cuda::std: an array, numeric_limits and <bit> in device code; CCCL_VERSION from <cuda/version>.
inline constexpr const char* cuda_std_source = R"(
#include <cuda/std/array>
#include <cuda/std/limits>
#include <cuda/std/bit>
#include <cuda/version>

extern "C" __global__ void limits(long long* out) {
  const cuda::std::array<long long, 3> values{cuda::std::numeric_limits<short>::max(), CCCL_VERSION,
                                               cuda::std::popcount(0xF0F1u)};
  for (int i = 0; i < 3; ++i) {
    out[i] = values[i];
  }
}
)";

// cuda::barrier in shared memory: every thread writes, arrives and waits, then reads a neighbour.
inline constexpr const char* cuda_barrier_source = R"(
#include <cuda/barrier>
#include <cuda/std/utility>

#pragma nv_diag_suppress static_var_with_dynamic_init
extern "C" __global__ void rotate(const int* in, int* out) {
  __shared__ int values[128];
  __shared__ cuda::barrier<cuda::thread_scope_block> bar;
  if (threadIdx.x == 0) {
    init(&bar, blockDim.x);
  }
  __syncthreads();
  values[threadIdx.x] = in[blockIdx.x * blockDim.x + threadIdx.x];
  bar.arrive_and_wait();
  out[blockIdx.x * blockDim.x + threadIdx.x] = values[(threadIdx.x + 1) % blockDim.x];
}
)";

}  // namespace cudrv::test
