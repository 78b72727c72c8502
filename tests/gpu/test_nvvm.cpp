// GPU tier: NVVM IR compiled at run time by libNVVM (issue 34 part 9), loaded and launched, checked on
// seeded random data against a host reference: PTX straight from libNVVM, PTX from the compile cache,
// LTO-IR linked by nvJitLink, and a libdevice call.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "support/memory_support.hpp"
#include "support/nvvm_ir.hpp"
#include "support/scratch.hpp"
#include "support/test_support.hpp"

using cudrv::test::temp_dir;

namespace {

// Values in [-range, range) from seeded random bits (no NaN or infinity).
std::vector<float> random_floats(std::size_t n, std::uint64_t seed, float range) {
  const std::vector<std::uint32_t> raw = cudrv::test::random_vector<std::uint32_t>(n, seed);
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = (static_cast<float>(raw[i] >> 8) / 16777216.0f * 2.0f - 1.0f) * range;
  }
  return out;
}

// Runs saxpy (y = a * x + y) from lib on n random elements and compares with the host: libNVVM
// contracts a * x + y into one fused multiply-add (fma.rn.f32, as the CPU tier checks), so the
// reference is std::fma, bit for bit.
void check_saxpy(const cudrv::library& lib, const cudrv::device& dev) {
  auto saxpy = lib.get_kernel<void(float, const float*, float*, int)>("saxpy");
  const int n = 100003;  // not a multiple of the block: the bound check matters
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const std::vector<float> x = random_floats(n, seed, 1000.0f);
  const std::vector<float> y = random_floats(n, seed + 1, 1000.0f);
  const float a = 1.75f;
  cudrv::stream s(dev);
  cudrv::device_buffer<float> dx(dev, n + 1);
  cudrv::device_buffer<float> dy(dev, n + 1);
  std::vector<float> x_padded = x;
  std::vector<float> y_padded = y;
  x_padded.push_back(cudrv::test::poison_value<float>());
  y_padded.push_back(cudrv::test::poison_value<float>());  // one past the end: must stay untouched
  cudrv::copy(dx, x_padded);
  cudrv::copy(dy, y_padded);
  cudrv::launch(s, {.grid = static_cast<unsigned>((n + 255) / 256), .block = 256}, saxpy, a, dx.get(), dy.get(), n);
  s.synchronize();
  std::vector<float> out(n + 1);
  cudrv::copy(out, dy);
  std::vector<float> expected(n + 1);
  for (int i = 0; i < n; ++i) {
    expected[i] = std::fma(a, x[i], y[i]);
  }
  expected[n] = cudrv::test::poison_value<float>();
  CHECK(cudrv::test::mismatch(out.data(), expected.data(), expected.size()).empty());
}

}  // namespace

TEST_CASE("NVVM IR: saxpy compiled by libNVVM for this device, loaded and launched", "[gpu][nvvm]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  const cudrv::nvvm_program prog("saxpy.ll", cudrv::test::nvvm_saxpy_ir);
  // An empty arch: this device's.
  const cudrv::compile_result built = prog.compile(cudrv::code_kind::ptx, {});
  REQUIRE(built.code.kind() == cudrv::code_kind::ptx);
  cudrv::library lib(built, dev);
  check_saxpy(lib, dev);
}

TEST_CASE("NVVM IR: a cached compilation and an LTO-IR link load and compute the same", "[gpu][nvvm]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  const cudrv::nvvm_program prog("saxpy.ll", cudrv::test::nvvm_saxpy_ir);
  temp_dir dir("cudrv-gpu-nvvm-cache");
  cudrv::compile_cache cache((dir.path / "cache").string());
  (void)cache.compile(prog);
  const cudrv::compile_result hit = cache.compile(prog);
  REQUIRE(cache.stats().hits == 1);
  check_saxpy(cudrv::library(hit, dev), dev);

  // LTO-IR from libNVVM, linked to a cubin for this device by nvJitLink.
  const cudrv::compile_result lto = prog.compile(cudrv::code_kind::ltoir, {});
  cudrv::linker lk({.link_time_optimization = true});
  const cudrv::object_code cubin = lk.add(lto.code).link();
  REQUIRE(cubin.kind() == cudrv::code_kind::cubin);
  check_saxpy(cudrv::library(cubin, dev), dev);
}

TEST_CASE("NVVM IR: a libdevice call (__nv_sinf) computes sin", "[gpu][nvvm]") {
  CUDRV_REQUIRE_GPU();
  cudrv::device dev(0);
  const cudrv::nvvm_program prog("sines.ll", cudrv::test::nvvm_sines_ir);
  cudrv::library lib(prog.compile(cudrv::code_kind::ptx, {.libdevice = true}), dev);
  auto sines = lib.get_kernel<void(float*, int)>("sines");
  const int n = 65537;
  const auto seed = cudrv::test::test_seed();
  INFO("seed " << seed);
  const std::vector<float> x = random_floats(n, seed, 100.0f);
  cudrv::stream s(dev);
  cudrv::device_buffer<float> dx(dev, n);
  cudrv::copy(dx, x);
  cudrv::launch(s, {.grid = static_cast<unsigned>((n + 127) / 128), .block = 128}, sines, dx.get(), n);
  s.synchronize();
  std::vector<float> out(n);
  cudrv::copy(out, dx);
  // libdevice's sinf is within 2 ulp (CUDA's math documentation); allow 4 ulp of the result's scale.
  int bad = 0;
  for (int i = 0; i < n; ++i) {
    const double ref = std::sin(static_cast<double>(x[i]));
    const double tolerance = 4.0 * std::ldexp(1.0, -23) * std::fmax(std::fabs(ref), 0x1p-20);
    if (!(std::fabs(out[i] - ref) <= tolerance)) {
      if (++bad <= 3) {
        UNSCOPED_INFO("x[" << i << "] = " << x[i] << ": device " << out[i] << ", host " << ref);
      }
    }
  }
  CHECK(bad == 0);
}
