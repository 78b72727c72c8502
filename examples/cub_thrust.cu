// The CUB and Thrust calls of example_cub_thrust (interface and what each does: cub_thrust.hpp), built by
// nvcc for sm_90 and its PTX with the static CUDA runtime. Only <cudrv/cccl.hpp> and what it includes
// (streams, memory resources) are compiled here: the example's host side is cub_thrust.cpp.
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "cub_thrust.hpp"

namespace example::cccl {
namespace {

constexpr std::size_t temp_alignment = 256;  // what CUB and Thrust assume of their temporary storage

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
}

// Runs a CUB device algorithm in its two phases: the size query (algorithm(nullptr, bytes)), then the
// run with temporary storage allocated from mr on the stream and freed there right after it. Both are
// stream-ordered: the memory goes back to the pool when the algorithm is done, with no synchronisation.
template <class Algorithm>
void run_cub(device_resource_ref mr, cudrv::cccl_stream_ref stream, const char* name, Algorithm&& algorithm) {
  std::size_t bytes = 0;
  check(algorithm(nullptr, bytes), name);
  bytes = std::max<std::size_t>(bytes, 1);
  void* temp = mr.allocate_async(bytes, temp_alignment, stream);
  const cudaError_t status = algorithm(temp, bytes);
  mr.deallocate_async(temp, bytes, temp_alignment, stream);
  check(status, name);
}

// Thrust's temporary storage from the same resource, stream-ordered on the stream of the policy.
struct thrust_allocator {
  using value_type = char;
  device_resource_ref mr;
  cudrv::cccl_stream_ref stream;
  std::size_t* allocations;  // counts the allocations Thrust made through it

  char* allocate(std::ptrdiff_t bytes) {
    ++*allocations;
    return static_cast<char*>(mr.allocate_async(static_cast<std::size_t>(bytes), temp_alignment, stream));
  }
  void deallocate(char* p, std::size_t bytes) { mr.deallocate_async(p, bytes, temp_alignment, stream); }
};

struct scramble_op {
  __host__ __device__ std::uint32_t operator()(std::uint32_t k) const { return scramble(k); }
};

cudaError_t cub_sort_pairs(void* temp, std::size_t& bytes, const std::uint32_t* keys_in, std::uint32_t* keys_out,
                           const std::uint32_t* values_in, std::uint32_t* values_out, int n, cudaStream_t stream) {
  return cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, values_in, values_out, n, 0, 32, stream);
}

}  // namespace

void sort_pairs(device_resource_ref mr, cudrv::cccl_stream_ref stream, const std::uint32_t* keys_in,
                std::uint32_t* keys_out, const std::uint32_t* values_in, std::uint32_t* values_out, int n) {
  run_cub(mr, stream, "cub::DeviceRadixSort::SortPairs", [&](void* temp, std::size_t& bytes) {
    return cub_sort_pairs(temp, bytes, keys_in, keys_out, values_in, values_out, n, stream.get());
  });
}

void sum(device_resource_ref mr, cudrv::cccl_stream_ref stream, const std::uint32_t* in, std::uint64_t* out, int n) {
  run_cub(mr, stream, "cub::DeviceReduce::Sum", [&](void* temp, std::size_t& bytes) {
    return cub::DeviceReduce::Sum(temp, bytes, in, out, n, stream.get());
  });
}

void max(device_resource_ref mr, cudrv::cccl_stream_ref stream, const std::uint32_t* in, std::uint32_t* out, int n) {
  run_cub(mr, stream, "cub::DeviceReduce::Max", [&](void* temp, std::size_t& bytes) {
    return cub::DeviceReduce::Max(temp, bytes, in, out, n, stream.get());
  });
}

std::size_t scramble_sort_descending(device_resource_ref mr, cudrv::cccl_stream_ref stream, const std::uint32_t* in,
                                     std::uint32_t* out, std::size_t n) {
  std::size_t allocations = 0;
  const thrust_allocator alloc{mr, stream, &allocations};
  const auto policy = thrust::cuda::par_nosync(alloc).on(stream.get());
  thrust::transform(policy, in, in + n, out, scramble_op{});
  thrust::sort(policy, out, out + n, thrust::greater<std::uint32_t>());
  return allocations;
}

plain_sort_pairs::plain_sort_pairs(int n) : n_(n) {
  check(cub_sort_pairs(nullptr, bytes_, nullptr, nullptr, nullptr, nullptr, n, nullptr),
        "cub::DeviceRadixSort::SortPairs (size query)");
  check(cudaMalloc(&temp_, std::max<std::size_t>(bytes_, 1)), "cudaMalloc");
}

plain_sort_pairs::~plain_sort_pairs() { cudaFree(temp_); }

void plain_sort_pairs::run(cudrv::stream_ref stream, const std::uint32_t* keys_in, std::uint32_t* keys_out,
                           const std::uint32_t* values_in, std::uint32_t* values_out) const {
  std::size_t bytes = bytes_;
  check(cub_sort_pairs(temp_, bytes, keys_in, keys_out, values_in, values_out, n_, stream.native_handle()),
        "cub::DeviceRadixSort::SortPairs (cudaMalloc temporary storage)");
}

}  // namespace example::cccl
