// The kernel of the PyTorch example, written once for both of its builds: out = alpha * x + beta * y
// over n floats, grid-stride. The includer defines CUDRV_TORCH_KERNEL(...) first:
//   - cudrv_torch_glue.hpp stringifies it (#__VA_ARGS__): the source cudrv::program hands to NVRTC;
//   - plain_op.cu expands it as it is: the same kernel compiled by nvcc and launched with <<<>>>.
// No preprocessor directive may appear inside the macro's argument. out may alias x or y (each thread
// reads its element before writing it), so the pointers are not __restrict__.
#ifndef CUDRV_TORCH_KERNEL
#error "define CUDRV_TORCH_KERNEL(...) before including axpby_kernel.cuh"
#endif
CUDRV_TORCH_KERNEL(extern "C" __global__ void cudrv_axpby(const float* x, const float* y, float* out, float alpha,
                                                          float beta, unsigned long long n) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = alpha * x[i] + beta * y[i];
  }
})
