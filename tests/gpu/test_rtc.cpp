// GPU tier: code compiled at run time (NVRTC, the compile cache, nvJitLink) loaded and launched,
// checked on random data against a host reference.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "support/memory_support.hpp"
#include "support/test_support.hpp"

using cudax::test::catch_as;
using cudax::test::contains;

namespace {

constexpr const char* template_source = R"(
#include "ops.cuh"
template <class T, class Op>
__global__ void transform(const T* in, T* out, unsigned long long n, T k) {
  unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = Op::apply(in[i], k) + T(OFFSET);
  }
}
)";

constexpr const char* ops_header = R"(
struct times { template <class T> __device__ static T apply(T x, T k) { return x * k; } };
struct plus { template <class T> __device__ static T apply(T x, T k) { return x + k; } };
)";

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    path = std::filesystem::temp_directory_path() /
           ("cudax-gpu-rtc-" + std::to_string(::getpid()) + "-" + std::to_string(cudax::test::test_seed()));
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

template <class T>
void check_transform(const cudax::library& lib, const cudax::compile_result& compiled, const std::string& expression,
                     bool multiply, T k, T offset, const cudax::device& dev) {
  INFO(expression);
  auto kernel = lib.get_kernel<void(const T*, T*, unsigned long long, T)>(compiled.lowered_name(expression));
  const std::size_t n = 54321;
  auto seed = cudax::test::test_seed();
  INFO("seed " << seed);
  auto raw = cudax::test::random_vector<std::uint16_t>(n, seed);
  std::vector<T> in(raw.begin(), raw.end());
  cudax::stream s(dev);
  cudax::device_buffer<T> din(dev, n), dout(dev, n);
  cudax::copy(din, in);
  cudax::copy(dout, std::vector<T>(n, T(-1)));
  cudax::launch(s, {.grid = static_cast<unsigned>((n + 127) / 128), .block = 128}, kernel, din.get(), dout.get(), n, k);
  s.synchronize();
  std::vector<T> out(n);
  cudax::copy(out, dout);
  for (std::size_t i = 0; i < n; ++i) {
    T expected = (multiply ? in[i] * k : in[i] + k) + offset;
    REQUIRE(out[i] == expected);
  }
}

}  // namespace

TEST_CASE("NVRTC: templates, headers and defines compiled for this device, launched", "[gpu][rtc]") {
  CUDAX_REQUIRE_GPU();
  cudax::device dev(0);
  cudax::program prog("transform.cu", template_source, {{"ops.cuh", ops_header}});
  const std::vector<std::string> names = {"transform<float, times>", "transform<int, plus>", "transform<double, plus>"};
  for (auto target : {cudax::code_kind::cubin, cudax::code_kind::ptx}) {
    INFO(cudax::to_string(target));
    cudax::compile_options options;  // empty arch: this device's
    options.defines = {"OFFSET=3"};
    options.cpp_standard = "c++17";
    auto compiled = prog.compile(target, options, names);
    REQUIRE(compiled.code.kind() == target);
    cudax::library lib(compiled.code);
    check_transform<float>(lib, compiled, names[0], true, 0.5f, 3.0f, dev);
    check_transform<int>(lib, compiled, names[1], false, 7, 3, dev);
    check_transform<double>(lib, compiled, names[2], false, -2.25, 3.0, dev);
  }
}

TEST_CASE("NVRTC: arch-specific code (sm_90a) and the device's own arch", "[gpu][rtc]") {
  CUDAX_REQUIRE_GPU();
  cudax::device dev(0);
  if (dev.compute_capability().as_int() != 90) {
    WARN("SKIPPED: sm_90a needs a compute capability 9.0 device");
    return;
  }
  cudax::program prog("arch.cu", R"(extern "C" __global__ void set(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *out = 901;
#else
  *out = 900;
#endif
})");
  cudax::stream s(dev);
  cudax::device_buffer<int> out(dev, 1);
  for (auto [arch, expected] : {std::pair{"sm_90a", 901}, std::pair{"sm_90", 900}}) {
    INFO(arch);
    cudax::compile_options options;
    options.arch = arch;
    cudax::library lib(prog.compile(cudax::code_kind::cubin, options).code);
    cudax::fill(out, 0);
    cudax::launch(s, {}, lib.get_kernel<void(int*)>("set"), out.get());
    s.synchronize();
    std::vector<int> v(1);
    cudax::copy(v, out);
    CHECK(v[0] == expected);
  }
}

TEST_CASE("compile cache: a hit loads and launches like a fresh compile", "[gpu][rtc][cache]") {
  CUDAX_REQUIRE_GPU();
  cudax::device dev(0);
  temp_dir dir;
  cudax::compile_cache cache(dir.path.string());
  cudax::program prog("transform.cu", template_source, {{"ops.cuh", ops_header}});
  cudax::compile_options options;
  options.defines = {"OFFSET=1"};
  const std::vector<std::string> names = {"transform<float, times>"};
  auto first = cache.compile(prog, cudax::code_kind::cubin, options, names);
  auto second = cache.compile(prog, cudax::code_kind::cubin, options, names);
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().hits == 1);
  CHECK(first.code.bytes() == second.code.bytes());
  cudax::library lib(second.code);
  check_transform<float>(lib, second, names[0], true, 2.0f, 1.0f, dev);
}

TEST_CASE("nvJitLink: LTO across units, then loaded and launched", "[gpu][rtc][link]") {
  CUDAX_REQUIRE_GPU();
  cudax::device dev(0);
  cudax::compile_options options;
  options.relocatable_device_code = true;
  options.link_time_optimization = true;
  auto lib_unit = cudax::program("poly.cu", "__device__ double poly(double x) { return 3.0 * x * x - 2.0 * x + 1.0; }")
                      .compile(cudax::code_kind::ltoir, options);
  auto main_unit = cudax::program("main.cu", R"(
__device__ double poly(double x);
extern "C" __global__ void eval(const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = poly(x[i]);
})")
                       .compile(cudax::code_kind::ltoir, options);
  for (auto output : {cudax::code_kind::cubin, cudax::code_kind::ptx}) {
    INFO(cudax::to_string(output));
    cudax::link_options link;
    link.link_time_optimization = true;
    link.output = output;
    cudax::linker linker(link);
    linker.add(lib_unit.code).add(main_unit.code);
    cudax::library lib(linker.link());
    auto eval = lib.get_kernel<void(const double*, double*, int)>("eval");
    const int n = 4096;
    auto seed = cudax::test::test_seed();
    INFO("seed " << seed);
    auto raw = cudax::test::random_vector<std::int16_t>(n, seed);
    std::vector<double> x(n);
    for (int i = 0; i < n; ++i) {
      x[i] = raw[i] / 1024.0;
    }
    cudax::stream s(dev);
    cudax::device_buffer<double> dx(dev, n), dy(dev, n);
    cudax::copy(dx, x);
    cudax::copy(dy, std::vector<double>(n, -1.0));
    cudax::launch(s, {.grid = n / 256, .block = 256}, eval, dx.get(), dy.get(), n);
    s.synchronize();
    std::vector<double> y(n);
    cudax::copy(y, dy);
    for (int i = 0; i < n; ++i) {
      const double expected = 3.0 * x[i] * x[i] - 2.0 * x[i] + 1.0;
      REQUIRE(std::fabs(y[i] - expected) <= 1e-12 * (1.0 + std::fabs(expected)));
    }
  }
}

TEST_CASE("a compile error stops at NVRTC with the log and nothing reaches the driver", "[gpu][rtc][bad-input]") {
  CUDAX_REQUIRE_GPU();
  cudax::test::destruction_error_counter errors;
  auto e = catch_as<cudax::compile_error>([] {
    cudax::program prog("broken.cu", "extern \"C\" __global__ void k(int* p) { p[0] = undefined_name; }");
    cudax::library lib(prog.compile(cudax::code_kind::cubin).code);
  });
  REQUIRE(e);
  CHECK(contains(e->log(), "broken.cu"));
  CHECK(contains(e->log(), "undefined_name"));
  CHECK(errors.count() == 0);
}
