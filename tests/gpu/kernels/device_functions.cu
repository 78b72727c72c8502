// A __device__ function next to two kernels, for library::has_kernel (tests/gpu/test_library.cpp). Built by
// nvcc with -G into a cubin (tests/CMakeLists.txt), which keeps helper a function of its own with a
// .nv.info.helper section as the kernels have; the test also compiles this file with NVRTC (-G, and
// -rdc linked by nvJitLink). No includes: NVRTC compiles it as it is. extern "C" keeps the names plain.
extern "C" __device__ __noinline__ float helper(float x) { return x * 2.0f + 1.0f; }

extern "C" __global__ void entry(float* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    out[i] = helper(out[i]);
  }
}

extern "C" __global__ void noparams() {}
