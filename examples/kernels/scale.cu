// Built by nvcc at build time into scale.ptx and scale.cubin (examples/CMakeLists.txt) for
// example_load_ptx_cubin, which loads them at run time.
extern "C" __global__ void scale(float* data, float factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    data[i] *= factor;
  }
}
