// The reference example_reduce is measured against: CUB's cub::DeviceReduce::Sum over floats, built by
// nvcc into the small static library example_cub_reference (examples/reference/cub_reduce.cu), so that
// the example itself stays a plain C++ program on cudrv. The runtime's cudaStream_t and the driver's
// CUstream are the same type, so the sum is enqueued on a cudrv stream and timed like any other work.
#pragma once

#include <cuda.h>

#include <cstddef>

namespace example::reference {

/// cub::DeviceReduce::Sum over n floats. Errors from the CUDA runtime throw std::runtime_error.
struct cub_sum {
  /// The bytes of temporary device storage a sum over n floats needs.
  static std::size_t temp_bytes(std::size_t n);
  /// Enqueues *out = in[0] + ... + in[n - 1] on stream; temp holds temp_bytes(n) bytes of device memory.
  static void run(void* temp, std::size_t temp_bytes, const float* in, float* out, std::size_t n, CUstream stream);
};

}  // namespace example::reference
