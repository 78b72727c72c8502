// cub::DeviceReduce::Sum behind the plain C++ interface of cub_reduce.hpp (see there). Built by nvcc for
// sm_90 with the static CUDA runtime, which shares the device's primary context with cudrv.
#include "cub_reduce.hpp"

#include <cub/device/device_reduce.cuh>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace example::reference {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("CUB reference: ") + what + ": " + cudaGetErrorString(status));
  }
}

// CUB picks its offset type from the type of the count: 32 bits (its fastest path) whenever n fits.
template <class Count>
void sum(void* temp, std::size_t& temp_bytes, const float* in, float* out, Count n, cudaStream_t stream) {
  check(cub::DeviceReduce::Sum(temp, temp_bytes, in, out, n, stream), "cub::DeviceReduce::Sum");
}

void dispatch(void* temp, std::size_t& temp_bytes, const float* in, float* out, std::size_t n, cudaStream_t stream) {
  if (n <= UINT32_MAX) {
    sum(temp, temp_bytes, in, out, static_cast<std::uint32_t>(n), stream);
  } else {
    sum(temp, temp_bytes, in, out, static_cast<std::uint64_t>(n), stream);
  }
}

}  // namespace

std::size_t cub_sum::temp_bytes(std::size_t n) {
  std::size_t bytes = 0;
  dispatch(nullptr, bytes, nullptr, nullptr, n, nullptr);
  return bytes;
}

void cub_sum::run(void* temp, std::size_t temp_bytes, const float* in, float* out, std::size_t n, CUstream stream) {
  dispatch(temp, temp_bytes, in, out, n, stream);
}

}  // namespace example::reference
