// Kernel parameter layouts read from the images themselves (src/code/code_metadata.cpp), which spare
// launches and typed kernels a question to the driver. Internal entry points: tested where cudrv is a
// static library (CUDRV_TEST_INTERNALS). No GPU needed: the images come from NVRTC.
#include <catch2/catch.hpp>

#include <cudrv/program.hpp>

#if defined(CUDRV_TEST_INTERNALS)
#include "code/code_metadata.hpp"

namespace {

// Two kernels with static shared memory (the cubin then has NOBITS .nv.shared.<kernel> sections, whose
// sizes no file bytes back) and one without, with parameters of several sizes and alignments.
constexpr const char* source = R"(
struct triple { double a, b, c; };
extern "C" __global__ void tiled(const float* in, float* out, int n) {
  __shared__ float tile[32][33];
  tile[threadIdx.y][threadIdx.x] = in[threadIdx.x];
  __syncthreads();
  if (n > 0) out[threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}
extern "C" __global__ void counted(unsigned long long* counts, char c, triple t) {
  __shared__ unsigned int bins[256];
  bins[threadIdx.x] = c;
  __syncthreads();
  counts[threadIdx.x] = bins[255 - threadIdx.x] + static_cast<unsigned long long>(t.b);
}
extern "C" __global__ void plain(short s, double d) { if (s == 7 && d < 0) asm volatile("trap;"); }
)";

cudrv::detail::kernel_layouts layouts_of(cudrv::code_kind kind) {
  const cudrv::program prog("layouts.cu", source);
  const auto result = prog.compile(kind, {.arch = "sm_90"});
  cudrv::detail::kernel_layouts layouts;
  REQUIRE(cudrv::detail::read_kernel_layouts(kind, result.code.bytes(), layouts));
  return layouts;
}

void check_layouts(const cudrv::detail::kernel_layouts& layouts) {
  REQUIRE(layouts.size() == 3);
  const auto& tiled = layouts.at("tiled");
  REQUIRE(tiled.size() == 3);
  CHECK((tiled[0].offset == 0 && tiled[0].size == 8));
  CHECK((tiled[1].offset == 8 && tiled[1].size == 8));
  CHECK((tiled[2].offset == 16 && tiled[2].size == 4));
  const auto& counted = layouts.at("counted");
  REQUIRE(counted.size() == 3);
  CHECK((counted[0].offset == 0 && counted[0].size == 8));
  CHECK((counted[1].offset == 8 && counted[1].size == 1));
  CHECK((counted[2].offset == 16 && counted[2].size == 24));
  const auto& plain = layouts.at("plain");
  REQUIRE(plain.size() == 2);
  CHECK((plain[0].offset == 0 && plain[0].size == 2));
  CHECK((plain[1].offset == 8 && plain[1].size == 8));
}

}  // namespace

TEST_CASE("code metadata: layouts from a cubin whose kernels use static shared memory", "[metadata]") {
  check_layouts(layouts_of(cudrv::code_kind::cubin));
}

TEST_CASE("code metadata: layouts from the PTX of the same kernels agree", "[metadata]") {
  check_layouts(layouts_of(cudrv::code_kind::ptx));
}

TEST_CASE("code metadata: a cubin cut short is refused, never half read", "[metadata]") {
  const cudrv::program prog("layouts.cu", source);
  const std::string cubin(prog.compile(cudrv::code_kind::cubin, {.arch = "sm_90"}).code.bytes());
  cudrv::detail::kernel_layouts layouts;
  CHECK_FALSE(cudrv::detail::read_kernel_layouts(cudrv::code_kind::cubin, cubin.substr(0, cubin.size() / 2), layouts));
  CHECK(layouts.empty());
}
#endif
