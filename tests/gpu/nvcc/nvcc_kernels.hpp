// Host entry points of nvcc_kernels.cu (compiled by nvcc into the GPU test binary).
#pragma once

#include <cudrv/kernel.hpp>
#include <cudrv/launch_config.hpp>
#include <cudrv/stream.hpp>

namespace cudrv_test {

// cudrv::get_kernel of a __global__ void(int* out, int value, int n) writing out[i] = value + i.
cudrv::typed_kernel_ref<void(int*, int, int)> nvcc_fill_kernel();

// cudrv::launch with a function pointer to __global__ void(double a, const double* x, double* y, n): y = a x + y.
void launch_axpy_by_pointer(cudrv::stream_ref stream, const cudrv::launch_config& config, double a, const double* x,
                            double* y, unsigned long long n);

}  // namespace cudrv_test
