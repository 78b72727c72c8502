// jit_lto: JIT link-time optimisation. Two translation units are compiled separately with NVRTC to
// LTO-IR (relocatable device code): one defines a __device__ function, the other a kernel that calls
// it. nvJitLink links them with -lto into one cubin, optimising across the units (the call is
// inlined), which is then loaded and launched.
//
//   example_jit_lto
#include <cmath>
#include <cstdio>
#include <vector>

#include "example_main.hpp"

namespace {

constexpr const char* math_unit = R"(
__device__ float smooth_step(float x) {
  x = x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);
  return x * x * (3.0f - 2.0f * x);
}
)";

constexpr const char* kernel_unit = R"(
__device__ float smooth_step(float x);  // defined in the other unit

extern "C" __global__ void apply(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = smooth_step(in[i]);
  }
}
)";

float smooth_step(float x) {
  x = x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x);
  return x * x * (3.0f - 2.0f * x);
}

bool run() {
  cudrv::device dev(0);
  cudrv::compile_options options;
  options.arch = dev.arch();
  options.relocatable_device_code = true;
  options.link_time_optimization = true;
  auto math = cudrv::program("math.cu", math_unit).compile(cudrv::code_kind::ltoir, options);
  auto kernel = cudrv::program("apply.cu", kernel_unit).compile(cudrv::code_kind::ltoir, options);
  std::printf("LTO-IR: math.cu %zu bytes, apply.cu %zu bytes\n", math.code.size(), kernel.code.size());

  cudrv::linker linker({.arch = dev.arch(), .link_time_optimization = true, .optimization_level = 3});
  linker.add(math.code).add(kernel.code);
  cudrv::object_code cubin = linker.link();
  std::printf("linked with nvJitLink into a %zu-byte cubin for %s\n", cubin.size(), dev.arch().c_str());

  cudrv::library lib(cubin);
  auto apply = lib.get_kernel<void(const float*, float*, int)>("apply");
  std::printf("apply: %d registers (the cross-unit call is inlined: no call overhead)\n",
              apply.attributes(dev).num_regs);

  const int n = 100000;
  std::vector<float> in(n), out(n);
  for (int i = 0; i < n; ++i) {
    in[i] = -0.5f + 2.0f * static_cast<float>(i) / n;
  }
  cudrv::stream stream(dev);
  cudrv::device_buffer<float> din(dev, n), dout(dev, n);
  cudrv::copy(din, in, stream);
  cudrv::launch(stream, {.grid = (n + 255) / 256, .block = 256}, apply, din.get(), dout.get(), n);
  cudrv::copy(out, dout, stream);
  stream.synchronize();
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    wrong += std::fabs(out[i] - smooth_step(in[i])) > 1e-6f;
  }
  std::printf("smooth_step of %d values: %s\n", n, wrong == 0 ? "correct" : "WRONG");
  return wrong == 0;
}

}  // namespace

int main() { return example::run("jit_lto", run); }
