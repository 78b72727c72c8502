// Device code of example_texture_resize (examples/texture_resize.cpp): bilinear resampling of a float
// image through a texture, compiled at run time by NVRTC.
#pragma once

#include <string>
#include <vector>

namespace example::texture_resize_kernels {

inline constexpr const char* source = R"CUDA(
// Output pixel (x, y) samples the input at the same relative position: its centre, (x + 0.5) / out_w
// across, in normalised coordinates. The texture unit fetches the four neighbours and mixes them
// (linear filtering, weights in 9-bit fixed point), clamping at the edges: one instruction per pixel.
// A block of 32 x 8 threads covers 32 x 8 output pixels, whose samples fall close together in the
// input, which the texture cache serves.
extern "C" __global__ void resize(cudaTextureObject_t in, float* __restrict__ out, int out_w, int out_h) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < out_w && y < out_h) {
    const float u = (x + 0.5f) / out_w;
    const float v = (y + 0.5f) / out_h;
    out[static_cast<unsigned long long>(y) * out_w + x] = tex2D<float>(in, u, v);
  }
}
)CUDA";

inline const std::vector<std::string> name_expressions{};

inline constexpr bool arch_specific = false;

}  // namespace example::texture_resize_kernels
