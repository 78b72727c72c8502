// Host entry points of nvcc_kernels.cu (compiled by nvcc into the GPU test binary).
#pragma once

#include <cudax/kernel.hpp>
#include <cudax/launch_config.hpp>
#include <cudax/stream.hpp>

namespace cudax_test {

// cudax::get_kernel of a __global__ void(int* out, int value, int n) writing out[i] = value + i.
cudax::typed_kernel_ref<void(int*, int, int)> nvcc_fill_kernel();

// cudax::launch with a function pointer to __global__ void(double a, const double* x, double* y, n): y = a x + y.
void launch_axpy_by_pointer(cudax::stream_ref stream, const cudax::launch_config& config, double a, const double* x,
                            double* y, unsigned long long n);

}  // namespace cudax_test
