// __global__ functions compiled by nvcc into the GPU test binary itself, launched through cudrv
// (cudrv::get_kernel / cudrv::launch with a function pointer). The Catch2 test is in
// tests/gpu/test_launch.cpp; this file only exposes host entry points.
#include <cudrv/launch.hpp>

#include "nvcc_kernels.hpp"

namespace {

__global__ void fill_kernel(int* out, int value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = value + i;
  }
}

__global__ void axpy_kernel(double a, const double* x, double* y, unsigned long long n) {
  unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}

}  // namespace

namespace cudrv_test {

cudrv::typed_kernel_ref<void(int*, int, int)> nvcc_fill_kernel() { return cudrv::get_kernel(fill_kernel); }

void launch_axpy_by_pointer(cudrv::stream_ref stream, const cudrv::launch_config& config, double a, const double* x,
                            double* y, unsigned long long n) {
  cudrv::launch(stream, config, axpy_kernel, a, x, y, n);
}

}  // namespace cudrv_test
