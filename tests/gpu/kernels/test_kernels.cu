// Kernels for the GPU tier, compiled by nvcc at build time to PTX, a cubin and a fatbin
// (tests/CMakeLists.txt) and loaded at run time by the tests. extern "C" keeps the names plain.
#include <cooperative_groups.h>

#include <cstddef>

namespace cg = cooperative_groups;

struct triple {
  double a;
  float b;
  int c;
  long long d;
};

__device__ int device_counter;
__device__ int device_table[64];
__constant__ float constant_scale;
__managed__ int managed_value;

extern "C" __global__ void empty_kernel() {}

extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    c[i] = a[i] + b[i];
  }
}

extern "C" __global__ void saxpy_sized(float alpha, const float* x, float* y, std::size_t n) {
  std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = alpha * x[i] + y[i];
  }
}

// 3D grid and block: every thread writes its linear index.
extern "C" __global__ void write_index_3d(unsigned* out) {
  unsigned bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  unsigned tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  out[bx * threads + tx] = bx * threads + tx;
}

extern "C" __global__ void struct_argument(triple t, double* out) {
  out[0] = t.a;
  out[1] = t.b;
  out[2] = t.c;
  out[3] = static_cast<double>(t.d);
}

extern "C" __global__ void scale_by_constant(float* data, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    data[i] *= constant_scale;
  }
}

extern "C" __global__ void table_to_counter() {
  int sum = 0;
  for (int i = 0; i < 64; ++i) {
    sum += device_table[i];
  }
  device_counter = sum;
  managed_value = managed_value * 2 + 1;
}

// At most 256 threads per block.
extern "C" __global__ void __launch_bounds__(256) bounded_kernel(int* out) { out[threadIdx.x] = threadIdx.x; }

// Reverses each block's chunk through dynamic shared memory.
extern "C" __global__ void reverse_in_shared(const int* in, int* out) {
  extern __shared__ int buffer[];
  int base = blockIdx.x * blockDim.x;
  buffer[threadIdx.x] = in[base + threadIdx.x];
  __syncthreads();
  out[base + threadIdx.x] = buffer[blockDim.x - 1 - threadIdx.x];
}

// Grid-wide reduction with a grid sync: needs a cooperative launch.
extern "C" __global__ void cooperative_sum(const int* in, int n, int* partial, long long* total) {
  cg::grid_group grid = cg::this_grid();
  __shared__ int block_sum;
  if (threadIdx.x == 0) {
    block_sum = 0;
  }
  __syncthreads();
  int local = 0;
  for (int i = grid.thread_rank(); i < n; i += grid.size()) {
    local += in[i];
  }
  atomicAdd(&block_sum, local);
  __syncthreads();
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = block_sum;
  }
  grid.sync();
  if (grid.thread_rank() == 0) {
    long long sum = 0;
    for (unsigned b = 0; b < gridDim.x; ++b) {
      sum += partial[b];
    }
    *total = sum;
  }
}

// Each block of a cluster reads its neighbour's shared memory (distributed shared memory).
extern "C" __global__ void cluster_neighbours(int* out) {
#if __CUDA_ARCH__ >= 900
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ int value;
  if (threadIdx.x == 0) {
    value = blockIdx.x * 10;
  }
  cluster.sync();
  unsigned rank = cluster.block_rank();
  unsigned neighbour = (rank + 1) % cluster.num_blocks();
  int* remote = cluster.map_shared_rank(&value, neighbour);
  if (threadIdx.x == 0) {
    out[blockIdx.x * 3 + 0] = static_cast<int>(rank);
    out[blockIdx.x * 3 + 1] = static_cast<int>(cluster.num_blocks());
    out[blockIdx.x * 3 + 2] = *remote;
  }
  cluster.sync();
#endif
}

// Compiled with a fixed cluster shape of 2 x 1 x 1.
extern "C" __global__ void __cluster_dims__(2, 1, 1) fixed_cluster(int* out) {
  if (threadIdx.x == 0) {
    out[blockIdx.x] = 1;
  }
}

// Graph conditionals: each run counts itself and keeps the while loop going until the counter is 0.
extern "C" __global__ void countdown(cudaGraphConditionalHandle handle, int* counter, int* iterations) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    *iterations += 1;
    const int left = --*counter;
    cudaGraphSetConditional(handle, left > 0 ? 1u : 0u);
  }
}

extern "C" __global__ void set_condition(cudaGraphConditionalHandle handle, unsigned value) {
  cudaGraphSetConditional(handle, value);
}

extern "C" __global__ void add_value(int* out, int value) { atomicAdd(out, value); }
