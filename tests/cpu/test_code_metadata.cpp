// Kernel parameter layouts read from the images themselves (src/code/code_metadata.cpp), which spare
// launches and typed kernels a question to the driver. Internal entry points: tested where cudrv is a
// static library (CUDRV_TEST_INTERNALS). No GPU needed: the images come from NVRTC.
#include <catch2/catch.hpp>

#include <cudrv/linker.hpp>
#include <cudrv/program.hpp>

#include <cstdint>
#include <cstring>
#include <string>

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

namespace {

// A kernel calling a __device__ function that is not inlined, and a kernel without parameters. -G keeps
// helper a function of its own, with a .nv.info.helper section of its attributes; so does -rdc (the
// function is external); neither makes helper a kernel.
constexpr const char* with_device_function = R"(
extern "C" __device__ __noinline__ float helper(float x) { return x * 2.0f + 1.0f; }
extern "C" __global__ void entry(float* out, int n) { if (static_cast<int>(threadIdx.x) < n) out[threadIdx.x] = helper(out[threadIdx.x]); }
extern "C" __global__ void noparams() {}
)";

// In units of their own: the kernel calls an external __device__ function another unit defines.
constexpr const char* caller_unit = R"(
extern "C" __device__ float scale_by_two(float x);
extern "C" __global__ void caller(float* out) { out[threadIdx.x] = scale_by_two(out[threadIdx.x]); }
)";
constexpr const char* callee_unit = R"(
extern "C" __device__ float scale_by_two(float x) { return 2.0f * x; }
)";

std::string cubin_of(const char* name, const char* text, const cudrv::compile_options& options) {
  return std::string(cudrv::program(name, text).compile(cudrv::code_kind::cubin, options).code.bytes());
}

// Only the two kernels, with their layouts; helper is a __device__ function.
void check_only_kernels(const std::string& cubin) {
  cudrv::detail::kernel_layouts layouts;
  REQUIRE(cudrv::detail::read_kernel_layouts(cudrv::code_kind::cubin, cubin, layouts));
  std::string names;
  for (const auto& [name, params] : layouts) {
    names += name + " ";
  }
  INFO("kernels read: " << names);
  CHECK(layouts.count("helper") == 0);
  REQUIRE(layouts.size() == 2);
  const auto& entry = layouts.at("entry");
  REQUIRE(entry.size() == 2);
  CHECK((entry[0].offset == 0 && entry[0].size == 8));
  CHECK((entry[1].offset == 8 && entry[1].size == 4));
  CHECK(layouts.at("noparams").empty());
}

// The section header index whose name is @p wanted, or 0.
std::size_t section_named(const std::string& elf, const std::string& wanted, std::size_t& name_offset) {
  auto u16 = [&](std::size_t o) {
    std::uint16_t v;
    std::memcpy(&v, elf.data() + o, 2);
    return v;
  };
  auto u32 = [&](std::size_t o) {
    std::uint32_t v;
    std::memcpy(&v, elf.data() + o, 4);
    return v;
  };
  auto u64 = [&](std::size_t o) {
    std::uint64_t v;
    std::memcpy(&v, elf.data() + o, 8);
    return v;
  };
  const std::size_t shoff = u64(40);
  const std::size_t shentsize = u16(58);
  const std::size_t shnum = u16(60);
  const std::size_t strtab = static_cast<std::size_t>(u64(shoff + u16(62) * shentsize + 24));
  for (std::size_t i = 0; i < shnum; ++i) {
    const std::size_t name = strtab + u32(shoff + i * shentsize);
    if (std::strcmp(elf.c_str() + name, wanted.c_str()) == 0) {
      name_offset = name;
      return i;
    }
  }
  return 0;
}

}  // namespace

TEST_CASE("code metadata: a -G cubin's __device__ function is no kernel", "[metadata]") {
  const std::string cubin = cubin_of("debug.cu", with_device_function, {.arch = "sm_90", .debug = true});
  std::size_t at = 0;
  REQUIRE(section_named(cubin, ".nv.info.helper", at) != 0);  // what misled the reader
  check_only_kernels(cubin);
}

TEST_CASE("code metadata: a relocatable (-rdc) cubin's __device__ function is no kernel", "[metadata]") {
  const std::string cubin =
      cubin_of("rdc.cu", with_device_function, {.arch = "sm_90", .relocatable_device_code = true});
  std::size_t at = 0;
  REQUIRE(section_named(cubin, ".nv.info.helper", at) != 0);
  check_only_kernels(cubin);
}

TEST_CASE("code metadata: nvJitLink's link of -rdc units lists their kernels only", "[metadata][linker]") {
  SECTION("one unit with its own __device__ function") {
    const std::string unit =
        cubin_of("rdc.cu", with_device_function, {.arch = "sm_90", .relocatable_device_code = true});
    cudrv::linker lk({.arch = "sm_90"});
    const cudrv::object_code linked = lk.add(cudrv::object_code(cudrv::code_kind::cubin, unit, "rdc.cubin")).link();
    const std::string cubin(linked.bytes());
    std::size_t at = 0;
    REQUIRE(section_named(cubin, ".nv.info.helper", at) != 0);
    check_only_kernels(cubin);
  }
  SECTION("a kernel calling an external __device__ function of another unit") {
    const cudrv::compile_options rdc{.arch = "sm_90", .relocatable_device_code = true};
    cudrv::linker lk({.arch = "sm_90"});
    lk.add(cudrv::object_code(cudrv::code_kind::cubin, cubin_of("caller.cu", caller_unit, rdc), "caller.cubin"));
    lk.add(cudrv::object_code(cudrv::code_kind::cubin, cubin_of("callee.cu", callee_unit, rdc), "callee.cubin"));
    const std::string cubin(lk.link().bytes());
    cudrv::detail::kernel_layouts layouts;
    REQUIRE(cudrv::detail::read_kernel_layouts(cudrv::code_kind::cubin, cubin, layouts));
    CHECK(layouts.size() == 1);
    CHECK(layouts.count("caller") == 1);
    CHECK(layouts.count("scale_by_two") == 0);
  }
}

TEST_CASE("code metadata: a kernel whose .nv.info section is missing leaves the layouts to the driver", "[metadata]") {
  std::string cubin = cubin_of("layouts.cu", source, {.arch = "sm_90"});
  std::size_t name = 0;
  REQUIRE(section_named(cubin, ".nv.info.plain", name) != 0);
  cubin[name + std::strlen(".nv.info.")] = 'X';  // ".nv.info.Xlain": the entry plain has no section now
  cudrv::detail::kernel_layouts layouts;
  CHECK_FALSE(cudrv::detail::read_kernel_layouts(cudrv::code_kind::cubin, cubin, layouts));
  CHECK(layouts.empty());
}

TEST_CASE("code metadata: a cubin cut short is refused, never half read", "[metadata]") {
  const cudrv::program prog("layouts.cu", source);
  const std::string cubin(prog.compile(cudrv::code_kind::cubin, {.arch = "sm_90"}).code.bytes());
  cudrv::detail::kernel_layouts layouts;
  CHECK_FALSE(cudrv::detail::read_kernel_layouts(cudrv::code_kind::cubin, cubin.substr(0, cubin.size() / 2), layouts));
  CHECK(layouts.empty());
}
#endif
