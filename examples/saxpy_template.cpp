// saxpy_template: a template kernel compiled with NVRTC for two element types. Name expressions
// ("saxpy<float>", "saxpy<double>") make NVRTC instantiate the templates and report their lowered
// (mangled) names, by which the kernels are looked up in the loaded code.
//
//   example_saxpy_template
#include <cmath>
#include <cstdio>
#include <vector>

#include "example_main.hpp"

namespace {

constexpr const char* source = R"(
template <class T>
__global__ void saxpy(T a, const T* x, T* y, unsigned long long n) {
  unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
  }
}
)";

template <class T>
bool run_saxpy(const cudrv::library& lib, const cudrv::compile_result& compiled, const char* expression,
               const cudrv::device& dev, cudrv::stream_ref stream) {
  const std::string& lowered = compiled.lowered_name(expression);
  auto saxpy = lib.get_kernel<void(T, const T*, T*, unsigned long long)>(lowered);
  const unsigned long long n = 1 << 20;
  const T a = T(2.5);
  std::vector<T> x(n), y(n), out(n);
  for (unsigned long long i = 0; i < n; ++i) {
    x[i] = T(i % 100) / T(8);
    y[i] = T(1) - T(i % 13);
  }
  cudrv::device_buffer<T> dx(dev, n), dy(dev, n);
  cudrv::copy(dx, x, stream);
  cudrv::copy(dy, y, stream);
  cudrv::launch(stream, {.grid = static_cast<unsigned>((n + 255) / 256), .block = 256}, saxpy, a, dx.get(), dy.get(), n);
  cudrv::copy(out, dy, stream);
  stream.synchronize();
  unsigned long long wrong = 0;
  for (unsigned long long i = 0; i < n; ++i) {
    wrong += std::fabs(out[i] - (a * x[i] + y[i])) > T(1e-5) * std::fabs(a * x[i] + y[i]) + T(1e-6);
  }
  std::printf("%-15s -> %-40s %s\n", expression, lowered.c_str(), wrong == 0 ? "correct" : "WRONG");
  return wrong == 0;
}

bool run() {
  cudrv::device dev(0);
  cudrv::program prog("saxpy.cu", source);
  cudrv::compile_options options;
  options.arch = dev.arch();
  options.cpp_standard = "c++17";
  auto compiled = prog.compile(cudrv::code_kind::cubin, options, {"saxpy<float>", "saxpy<double>"});
  cudrv::library lib(compiled.code);
  cudrv::stream stream(dev);
  bool ok = run_saxpy<float>(lib, compiled, "saxpy<float>", dev, stream);
  ok = run_saxpy<double>(lib, compiled, "saxpy<double>", dev, stream) && ok;
  return ok;
}

}  // namespace

int main() { return example::run("saxpy_template", run); }
