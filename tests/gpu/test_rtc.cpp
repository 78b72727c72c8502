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
#include "support/scratch.hpp"
#include "support/test_support.hpp"

using cudrv::test::temp_dir;

using cudrv::test::catch_as;
using cudrv::test::contains;

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

template <class T>
void check_transform(const cudrv::library& lib, const cudrv::compile_result& compiled, const std::string& expression,
                     bool multiply, T k, T offset, const cudrv::device& dev) {
  INFO(expression);
  auto kernel = lib.get_kernel<void(const T*, T*, unsigned long long, T)>(compiled.lowered_name(expression));
  const std::size_t n = 54321;
  auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  auto raw = cudrv::test::random_vector<std::uint16_t>(n, seed);
  std::vector<T> in(raw.begin(), raw.end());
  cudrv::stream s(dev);
  cudrv::device_buffer<T> din(dev, n), dout(dev, n);
  cudrv::copy(din, in);
  cudrv::copy(dout, std::vector<T>(n, T(-1)));
  cudrv::launch(s, {.grid = static_cast<unsigned>((n + 127) / 128), .block = 128}, kernel, din.get(), dout.get(), n, k);
  s.synchronize();
  std::vector<T> out(n);
  cudrv::copy(out, dout);
  for (std::size_t i = 0; i < n; ++i) {
    T expected = (multiply ? in[i] * k : in[i] + k) + offset;
    REQUIRE(out[i] == expected);
  }
}

}  // namespace

TEST_CASE("NVRTC: templates, headers and defines compiled for this device, launched", "[gpu][rtc]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::program prog("transform.cu", template_source, {{"ops.cuh", ops_header}});
  const std::vector<std::string> names = {"transform<float, times>", "transform<int, plus>", "transform<double, plus>"};
  for (auto target : {cudrv::code_kind::cubin, cudrv::code_kind::ptx}) {
    INFO(cudrv::to_string(target));
    cudrv::compile_options options;  // empty arch: this device's
    options.defines = {"OFFSET=3"};
    options.cpp_standard = "c++17";
    auto compiled = prog.compile(target, options, names);
    REQUIRE(compiled.code.kind() == target);
    cudrv::library lib(compiled.code);
    check_transform<float>(lib, compiled, names[0], true, 0.5f, 3.0f, dev);
    check_transform<int>(lib, compiled, names[1], false, 7, 3, dev);
    check_transform<double>(lib, compiled, names[2], false, -2.25, 3.0, dev);
  }
}

TEST_CASE("NVRTC: arch-specific code (sm_90a) and the device's own arch", "[gpu][rtc]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  if (dev.compute_capability().as_int() != 90) {
    WARN("SKIPPED: sm_90a needs a compute capability 9.0 device");
    return;
  }
  cudrv::program prog("arch.cu", R"(extern "C" __global__ void set(int* out) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *out = 901;
#else
  *out = 900;
#endif
})");
  cudrv::stream s(dev);
  cudrv::device_buffer<int> out(dev, 1);
  for (auto [arch, expected] : {std::pair{"sm_90a", 901}, std::pair{"sm_90", 900}}) {
    INFO(arch);
    cudrv::compile_options options;
    options.arch = arch;
    cudrv::library lib(prog.compile(cudrv::code_kind::cubin, options).code);
    cudrv::fill(out, 0);
    cudrv::launch(s, {}, lib.get_kernel<void(int*)>("set"), out.get());
    s.synchronize();
    std::vector<int> v(1);
    cudrv::copy(v, out);
    CHECK(v[0] == expected);
  }
}

TEST_CASE("compile cache: a hit loads and launches like a fresh compile", "[gpu][rtc][cache]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  temp_dir dir;
  cudrv::compile_cache cache(dir.path.string());
  cudrv::program prog("transform.cu", template_source, {{"ops.cuh", ops_header}});
  cudrv::compile_options options;
  options.defines = {"OFFSET=1"};
  const std::vector<std::string> names = {"transform<float, times>"};
  auto first = cache.compile(prog, cudrv::code_kind::cubin, options, names);
  auto second = cache.compile(prog, cudrv::code_kind::cubin, options, names);
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().hits == 1);
  CHECK(first.code.bytes() == second.code.bytes());
  cudrv::library lib(second.code);
  check_transform<float>(lib, second, names[0], true, 2.0f, 1.0f, dev);
}

TEST_CASE("nvJitLink: LTO across units, then loaded and launched", "[gpu][rtc][link]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  cudrv::compile_options options;
  options.relocatable_device_code = true;
  options.link_time_optimization = true;
  auto lib_unit = cudrv::program("poly.cu", "__device__ double poly(double x) { return 3.0 * x * x - 2.0 * x + 1.0; }")
                      .compile(cudrv::code_kind::ltoir, options);
  auto main_unit = cudrv::program("main.cu", R"(
__device__ double poly(double x);
extern "C" __global__ void eval(const double* x, double* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = poly(x[i]);
})")
                       .compile(cudrv::code_kind::ltoir, options);
  for (auto output : {cudrv::code_kind::cubin, cudrv::code_kind::ptx}) {
    INFO(cudrv::to_string(output));
    cudrv::link_options link;
    link.link_time_optimization = true;
    link.output = output;
    cudrv::linker linker(link);
    linker.add(lib_unit.code).add(main_unit.code);
    cudrv::library lib(linker.link());
    auto eval = lib.get_kernel<void(const double*, double*, int)>("eval");
    const int n = 4096;
    auto seed = cudrv::test::test_seed();
    INFO("seed " << seed);
    auto raw = cudrv::test::random_vector<std::int16_t>(n, seed);
    std::vector<double> x(n);
    for (int i = 0; i < n; ++i) {
      x[i] = raw[i] / 1024.0;
    }
    cudrv::stream s(dev);
    cudrv::device_buffer<double> dx(dev, n), dy(dev, n);
    cudrv::copy(dx, x);
    cudrv::copy(dy, std::vector<double>(n, -1.0));
    cudrv::launch(s, {.grid = n / 256, .block = 256}, eval, dx.get(), dy.get(), n);
    s.synchronize();
    std::vector<double> y(n);
    cudrv::copy(y, dy);
    for (int i = 0; i < n; ++i) {
      const double expected = 3.0 * x[i] * x[i] - 2.0 * x[i] + 1.0;
      REQUIRE(std::fabs(y[i] - expected) <= 1e-12 * (1.0 + std::fabs(expected)));
    }
  }
}

TEST_CASE("a compile error stops at NVRTC with the log and nothing reaches the driver", "[gpu][rtc][bad-input]") {
  CUDRV_REQUIRE_GPU();
  cudrv::test::destruction_error_counter errors;
  auto e = catch_as<cudrv::compile_error>([] {
    cudrv::program prog("broken.cu", "extern \"C\" __global__ void k(int* p) { p[0] = undefined_name; }");
    cudrv::library lib(prog.compile(cudrv::code_kind::cubin).code);
  });
  REQUIRE(e);
  CHECK(contains(e->log(), "broken.cu"));
  CHECK(contains(e->log(), "undefined_name"));
  CHECK(errors.count() == 0);
}
