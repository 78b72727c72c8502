// Device code of example_histogram (examples/histogram.cpp): a 256-bin histogram of bytes, in two
// versions compiled at run time by NVRTC. Both count into a histogram private to the block, in shared
// memory; they differ in how the blocks' histograms reach the global one.
#pragma once

#include <string>
#include <vector>

namespace example::histogram_kernels {

inline constexpr const char* source = R"CUDA(
constexpr int BINS = 256;
constexpr int COPIES = 32;  // one copy of the block's histogram per lane of a warp

// Shared memory has 32 banks of 4 bytes; word w lies in bank w % 32. The block's histogram is kept
// in 32 interleaved copies, count of bin b for lane l at word b * 32 + l, so lane l only ever touches
// bank l: the 32 atomics of a warp never meet in a bank, whatever bytes they count (all equal bytes
// included, which would serialise 32 lanes on one word with a single copy). Warps of the block
// still share the copies, hence the (shared-memory) atomics.
__device__ __forceinline__ void count_word(unsigned* lane_copy, unsigned w) {
  atomicAdd(lane_copy + ((w & 0xffu) << 5), 1u);
  atomicAdd(lane_copy + (((w >> 8) & 0xffu) << 5), 1u);
  atomicAdd(lane_copy + (((w >> 16) & 0xffu) << 5), 1u);
  atomicAdd(lane_copy + ((w >> 24) << 5), 1u);
}

__device__ __forceinline__ void count_16_bytes(unsigned* lane_copy, uint4 v) {
  count_word(lane_copy, v.x);
  count_word(lane_copy, v.y);
  count_word(lane_copy, v.z);
  count_word(lane_copy, v.w);
}

// Zeroes hist (BINS * COPIES words), then counts this thread's share of in[0, n) into it: 16-byte
// loads over a grid-stride loop, two loads in flight per thread, then the last n % 16 bytes one by
// one. in must be 16-byte aligned. Ends with the block's barrier: hist is then complete.
__device__ void count_bytes(unsigned* hist, const unsigned char* __restrict__ in, unsigned long long n) {
  for (int i = threadIdx.x; i < BINS * COPIES; i += blockDim.x) {
    hist[i] = 0;
  }
  __syncthreads();

  unsigned* lane_copy = hist + threadIdx.x % COPIES;
  const uint4* in16 = reinterpret_cast<const uint4*>(in);
  const unsigned long long n16 = n / 16;
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long first = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned long long i = first;
  for (; i + stride < n16; i += 2 * stride) {
    const uint4 a = in16[i];
    const uint4 b = in16[i + stride];
    count_16_bytes(lane_copy, a);
    count_16_bytes(lane_copy, b);
  }
  if (i < n16) {
    count_16_bytes(lane_copy, in16[i]);
  }
  for (unsigned long long j = n16 * 16 + first; j < n; j += stride) {
    atomicAdd(lane_copy + (static_cast<unsigned>(in[j]) << 5), 1u);
  }
  __syncthreads();
}

// The block's total of one bin: the sum of its 32 copies. The thread reads copy (c + bin) % 32 at step
// c, so the lanes of a warp, each summing its own bin, read 32 different banks at every step.
__device__ __forceinline__ unsigned bin_total(const unsigned* hist, int bin) {
  unsigned sum = 0;
#pragma unroll 8
  for (int c = 0; c < COPIES; ++c) {
    sum += hist[bin * COPIES + (c + bin) % COPIES];
  }
  return sum;
}

// Version A: every block merges its histogram into the global one with 256 global atomics.
extern "C" __global__ void __launch_bounds__(512) histogram_privatised(const unsigned char* __restrict__ in,
                                                                       unsigned long long n,
                                                                       unsigned long long* __restrict__ counts) {
  __shared__ unsigned hist[BINS * COPIES];
  count_bytes(hist, in, n);
  for (int bin = threadIdx.x; bin < BINS; bin += blockDim.x) {
    const unsigned sum = bin_total(hist, bin);
    if (sum != 0) {
      atomicAdd(counts + bin, static_cast<unsigned long long>(sum));
    }
  }
}

// Version B, for a launch with thread-block clusters (sm_90): the blocks of a cluster run at once on
// the SMs of one GPC, and each can read the others' shared memory (distributed shared memory). Each
// block sums its copies into block_total; after the cluster's barrier, block r of C adds up bins
// r, r + C, r + 2C, ... from the block_total of every block of the cluster, its own included, and
// writes each of them to the global histogram once: one global atomic per bin per cluster instead of
// per block. The cluster built-ins used here are what cooperative_groups::this_cluster() wraps
// (cluster.sync(), cluster.map_shared_rank(), cluster.block_rank(), cluster.num_blocks()); they need
// no header, so NVRTC compiles this source without the toolkit's include directory.
__device__ __forceinline__ void cluster_sync() {
  __cluster_barrier_arrive();  // release: this block's shared-memory writes become visible ...
  __cluster_barrier_wait();    // acquire: ... to every block of the cluster that passes the barrier
}

extern "C" __global__ void __launch_bounds__(512) histogram_cluster(const unsigned char* __restrict__ in,
                                                                    unsigned long long n,
                                                                    unsigned long long* __restrict__ counts) {
  __shared__ unsigned hist[BINS * COPIES];
  __shared__ unsigned block_total[BINS];
  count_bytes(hist, in, n);
  for (int bin = threadIdx.x; bin < BINS; bin += blockDim.x) {
    block_total[bin] = bin_total(hist, bin);
  }
  cluster_sync();  // every block's block_total is complete, and visible to the whole cluster

  const unsigned blocks = __clusterSizeInBlocks();
  const unsigned rank = __clusterRelativeBlockRank();
  for (unsigned bin = rank + threadIdx.x * blocks; bin < BINS; bin += blockDim.x * blocks) {
    unsigned long long sum = 0;
    for (unsigned q = 0; q < blocks; ++q) {
      // block_total as it lies in the shared memory of block q of this cluster
      const unsigned* remote = static_cast<const unsigned*>(__cluster_map_shared_rank(block_total, q));
      sum += remote[bin];
    }
    if (sum != 0) {
      atomicAdd(counts + bin, sum);
    }
  }
  cluster_sync();  // no block may exit while the others still read its shared memory
}
)CUDA";

inline const std::vector<std::string> name_expressions{};

inline constexpr bool arch_specific = false;

}  // namespace example::histogram_kernels
