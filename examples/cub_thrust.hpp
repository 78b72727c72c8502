// The CUB and Thrust calls of example_cub_thrust, compiled by nvcc in examples/cub_thrust.cu behind this
// plain C++ interface, so that the rest of the example (examples/cub_thrust.cpp: data, checks, timing)
// is an ordinary C++ program on <cudrv/cudrv.hpp>. Every call enqueues on the given cudrv stream (a
// CUstream is a cudaStream_t) and takes its temporary storage from the given memory resource: a
// cuda::mr::async_resource_ref, what CCCL code takes, here over a cudrv pool (cudrv::cccl_device_resource),
// allocated and freed stream-ordered on that stream. Errors of the CUDA runtime throw std::runtime_error.
#pragma once

#include <cudrv/cccl.hpp>

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define EXAMPLE_HOST_DEVICE __host__ __device__
#else
#define EXAMPLE_HOST_DEVICE
#endif

namespace example::cccl {

/// The memory resource the calls take their temporary storage from.
using device_resource_ref = ::cuda::mr::async_resource_ref<::cuda::mr::device_accessible>;

/// What Thrust applies to the sorted keys, on the device and, for the reference, on the host: an
/// invertible scramble (an odd multiplier, then an xor-shift).
inline EXAMPLE_HOST_DEVICE std::uint32_t scramble(std::uint32_t k) {
  const std::uint32_t m = k * 2654435761u;
  return m ^ (m >> 15);
}

/// cub::DeviceRadixSort::SortPairs of n (key, value) pairs by the whole 32-bit key (stable).
void sort_pairs(device_resource_ref mr, cudrv::cccl_stream_ref stream, const std::uint32_t* keys_in,
                std::uint32_t* keys_out, const std::uint32_t* values_in, std::uint32_t* values_out, int n);
/// cub::DeviceReduce::Sum of n keys into one 64-bit integer (exact).
void sum(device_resource_ref mr, cudrv::cccl_stream_ref stream, const std::uint32_t* in, std::uint64_t* out, int n);
/// cub::DeviceReduce::Max of n keys.
void max(device_resource_ref mr, cudrv::cccl_stream_ref stream, const std::uint32_t* in, std::uint32_t* out, int n);
/// Thrust on the same stream: out = scramble(in) (thrust::transform), then out sorted in descending order
/// (thrust::sort with thrust::greater), with thrust::cuda::par_nosync(allocator).on(stream), the allocator
/// serving Thrust's temporary storage from mr. Returns how many allocations Thrust made through it.
std::size_t scramble_sort_descending(device_resource_ref mr, cudrv::cccl_stream_ref stream, const std::uint32_t* in,
                                     std::uint32_t* out, std::size_t n);

/// The reference: the same SortPairs as runtime code writes it, with one temporary buffer from cudaMalloc
/// (made by the constructor for n pairs, freed by the destructor) reused by every call.
class plain_sort_pairs {
 public:
  explicit plain_sort_pairs(int n);
  plain_sort_pairs(const plain_sort_pairs&) = delete;
  plain_sort_pairs& operator=(const plain_sort_pairs&) = delete;
  ~plain_sort_pairs();
  /// Enqueues the sort on stream.
  void run(cudrv::stream_ref stream, const std::uint32_t* keys_in, std::uint32_t* keys_out,
           const std::uint32_t* values_in, std::uint32_t* values_out) const;
  /// The bytes of temporary storage CUB asked for.
  [[nodiscard]] std::size_t temp_bytes() const noexcept { return bytes_; }

 private:
  void* temp_ = nullptr;
  std::size_t bytes_ = 0;
  int n_;
};

}  // namespace example::cccl
