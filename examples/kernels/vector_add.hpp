// Device code of example_vector_add_nvrtc (compiled at run time by NVRTC): c = a + b, first one
// element per thread, then with 16-byte loads and stores over a grid sized to fill the GPU.
#pragma once

#include <string>
#include <vector>

namespace example::vector_add_kernels {

inline constexpr const char* source = R"CUDA(
// One element per thread: the grid covers all n elements.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, unsigned long long n) {
  const unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    c[i] = a[i] + b[i];
  }
}

// Four elements per thread and step (LDG.E.128 / STG.E.128), striding over the whole grid, so that any
// grid size works and one full wave of blocks suffices. a, b and c must be 16-byte aligned (cuMemAlloc
// gives 256); the n % 4 last elements are added one by one.
extern "C" __global__ void vector_add4(const float* __restrict__ a, const float* __restrict__ b,
                                       float* __restrict__ c, unsigned long long n) {
  const unsigned long long threads = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long tid = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned long long n4 = n / 4;
  const float4* a4 = reinterpret_cast<const float4*>(a);
  const float4* b4 = reinterpret_cast<const float4*>(b);
  float4* c4 = reinterpret_cast<float4*>(c);
  for (unsigned long long i = tid; i < n4; i += threads) {
    const float4 x = __ldg(a4 + i);
    const float4 y = __ldg(b4 + i);
    c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
  if (tid < n - 4 * n4) {
    c[4 * n4 + tid] = a[4 * n4 + tid] + b[4 * n4 + tid];
  }
}
)CUDA";

inline const std::vector<std::string> name_expressions{};

inline constexpr bool arch_specific = false;

}  // namespace example::vector_add_kernels
