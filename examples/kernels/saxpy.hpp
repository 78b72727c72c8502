// Device code of example_saxpy_template (compiled at run time by NVRTC): y = a * x + y as templates,
// instantiated for float and double through NVRTC name expressions.
#pragma once

#include <string>
#include <vector>

namespace example::saxpy_kernels {

inline constexpr const char* source = R"CUDA(
// One element per thread: the grid covers all n elements.
template <class T>
__global__ void saxpy(T a, const T* x, T* y, unsigned long long n) {
  const unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}

// The 16-byte vector of each element type, and a * x + y on it.
template <class T>
struct vec16;
template <>
struct vec16<float> {
  using type = float4;
};
template <>
struct vec16<double> {
  using type = double2;
};
__device__ float4 axpy(float a, float4 x, float4 y) {
  return make_float4(a * x.x + y.x, a * x.y + y.y, a * x.z + y.z, a * x.w + y.w);
}
__device__ double2 axpy(double a, double2 x, double2 y) { return make_double2(a * x.x + y.x, a * x.y + y.y); }

// One 16-byte vector per thread and step (LDG.E.128 / STG.E.128), striding over the whole grid, so that
// one full wave of blocks suffices. x and y must be 16-byte aligned (cuMemAlloc gives 256); the last
// n % (16 / sizeof(T)) elements are done one by one.
template <class T>
__global__ void saxpy_vec(T a, const T* __restrict__ x, T* __restrict__ y, unsigned long long n) {
  using V = typename vec16<T>::type;
  constexpr unsigned long long width = sizeof(V) / sizeof(T);
  const unsigned long long threads = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  const unsigned long long tid = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const unsigned long long nv = n / width;
  const V* xv = reinterpret_cast<const V*>(x);
  V* yv = reinterpret_cast<V*>(y);
  for (unsigned long long i = tid; i < nv; i += threads) {
    yv[i] = axpy(a, __ldg(xv + i), yv[i]);
  }
  if (tid < n - width * nv) {
    y[width * nv + tid] = a * x[width * nv + tid] + y[width * nv + tid];
  }
}
)CUDA";

inline const std::vector<std::string> name_expressions{"saxpy<float>", "saxpy<double>", "saxpy_vec<float>",
                                                       "saxpy_vec<double>"};

inline constexpr bool arch_specific = false;

}  // namespace example::saxpy_kernels
