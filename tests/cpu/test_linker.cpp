// Run-time linking with nvJitLink: LTO and non-LTO links, errors with their logs, the linker's
// lifecycle, the option list and its validation. nvJitLink needs no GPU and no driver.
#include <catch2/catch.hpp>

#include <cudrv/linker.hpp>
#include <cudrv/program.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/catch_support.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
using cudrv::test::is_cuda_elf;
using cudrv::test::require_invalid_argument;

namespace {

// caller.cu calls a __device__ function defined in callee.cu.
constexpr const char* caller_source = R"(
extern "C" __device__ float twice(float v);
extern "C" __global__ void caller(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }
)";
constexpr const char* callee_source = R"(
extern "C" __device__ float twice(float v) { return 2.0f * v; }
)";
constexpr const char* unresolved_source = R"(
extern "C" __device__ float missing_function(float v);
extern "C" __global__ void needs_missing(float* x) { x[0] = missing_function(x[0]); }
)";

const cudrv::compile_options rdc{.arch = "sm_90", .relocatable_device_code = true};

cudrv::object_code compile(const char* name, const char* source, cudrv::code_kind kind) {
  return cudrv::program(name, source).compile(kind, rdc).code;
}

}  // namespace

TEST_CASE("linker: is move-only and owns its handle", "[linker]") {
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<cudrv::linker>);
  STATIC_REQUIRE_FALSE(std::is_copy_assignable_v<cudrv::linker>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<cudrv::linker>);
  STATIC_REQUIRE(std::is_nothrow_move_assignable_v<cudrv::linker>);

  cudrv::test::destruction_error_counter errors;
  {
    cudrv::linker a({.arch = "sm_90"});
    CHECK(static_cast<bool>(a));
    cudrv::linker b(std::move(a));
    CHECK_FALSE(static_cast<bool>(a));  // NOLINT(bugprone-use-after-move): moved-from state is specified
    CHECK(static_cast<bool>(b));
    require_invalid_argument("add on a moved-from linker",
                             [&] { a.add(compile("callee.cu", callee_source, cudrv::code_kind::ptx)); });
    require_invalid_argument("link on a moved-from linker", [&] { (void)a.link(); });
    require_invalid_argument("info_log on a moved-from linker", [&] { (void)a.info_log(); });
    cudrv::linker c({.arch = "sm_90"});
    c = std::move(b);  // destroys c's own handle
    CHECK(static_cast<bool>(c));
    CHECK_FALSE(static_cast<bool>(b));  // NOLINT(bugprone-use-after-move)
  }
  CHECK(errors.count() == 0);
}

TEST_CASE("linker: LTO-links two LTO-IR units into a cubin and into PTX", "[linker]") {
  const auto caller = compile("caller.cu", caller_source, cudrv::code_kind::ltoir);
  const auto callee = compile("callee.cu", callee_source, cudrv::code_kind::ltoir);

  cudrv::linker to_cubin({.arch = "sm_90", .link_time_optimization = true});
  const cudrv::object_code cubin = to_cubin.add(caller).add(callee).link();
  CHECK(cubin.kind() == cudrv::code_kind::cubin);
  CHECK(is_cuda_elf(cubin.bytes()));
  CHECK(contains(cubin.bytes(), "caller"));

  cudrv::linker to_ptx({.arch = "sm_90", .link_time_optimization = true, .output = cudrv::code_kind::ptx});
  const cudrv::object_code ptx = to_ptx.add(caller).add(callee).link();
  INFO(ptx.bytes());
  CHECK(ptx.kind() == cudrv::code_kind::ptx);
  CHECK(contains(ptx.bytes(), ".entry caller("));
  CHECK(contains(ptx.bytes(), ".target sm_90"));
  CHECK_FALSE(contains(ptx.bytes(), "call.uni"));  // twice() was inlined across the units
  CHECK(ptx.data()[ptx.size()] == '\0');
}

TEST_CASE("linker: links PTX and cubin inputs with relocatable device code", "[linker]") {
  const auto caller = compile("caller.cu", caller_source, cudrv::code_kind::ptx);
  const auto callee = compile("callee.cu", callee_source, cudrv::code_kind::cubin);
  cudrv::linker lk({.arch = "sm_90", .verbose = true});
  const cudrv::object_code cubin = lk.add(caller).add(callee).link();
  CHECK(is_cuda_elf(cubin.bytes()));
  CHECK(lk.error_log().empty());
  INFO("info log: " << lk.info_log());
  CHECK(contains(lk.info_log(), "caller"));  // -verbose reports each kernel's resources
}

TEST_CASE("linker: add_file reads inputs from files", "[linker]") {
  std::string dir_pattern = (std::filesystem::temp_directory_path() / "cudrv-linker-XXXXXX").string();
  REQUIRE(::mkdtemp(dir_pattern.data()) != nullptr);
  const std::filesystem::path dir = dir_pattern;
  compile("caller.cu", caller_source, cudrv::code_kind::ltoir).write_to_file((dir / "caller.ltoir").string());
  compile("callee.cu", callee_source, cudrv::code_kind::ltoir).write_to_file((dir / "callee.bin").string());

  cudrv::linker lk({.arch = "sm_90", .link_time_optimization = true});
  lk.add_file((dir / "caller.ltoir").string()).add_file((dir / "callee.bin").string(), cudrv::code_kind::ltoir);
  CHECK(is_cuda_elf(lk.link().bytes()));

  cudrv::linker other({.arch = "sm_90", .link_time_optimization = true});
  require_invalid_argument("missing file", [&] { other.add_file((dir / "missing.ltoir").string()); });
  require_invalid_argument("unknown extension", [&] { other.add_file((dir / "callee.bin").string()); });
  std::filesystem::remove_all(dir);
}

TEST_CASE("linker: an unresolved symbol throws link_error whose log names it", "[linker]") {
  SECTION("LTO") {
    cudrv::linker lk({.arch = "sm_90", .link_time_optimization = true});
    lk.add(compile("needs_missing.cu", unresolved_source, cudrv::code_kind::ltoir));
    auto e = catch_as<cudrv::link_error>([&] { (void)lk.link(); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->source() == cudrv::error_source::nvjitlink);
    CHECK(e->api() == "nvJitLinkComplete");
    CHECK(contains(e->log(), "missing_function"));
    CHECK(contains(e->what(), "needs_missing.cu"));  // the context names the inputs
    CHECK(e->name().rfind("NVJITLINK_ERROR_", 0) == 0);
  }
  SECTION("PTX") {
    cudrv::linker lk({.arch = "sm_90"});
    lk.add(compile("needs_missing.cu", unresolved_source, cudrv::code_kind::ptx));
    auto e = catch_as<cudrv::link_error>([&] { (void)lk.link(); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(contains(e->log(), "missing_function"));
    CHECK(contains(lk.error_log(), "missing_function"));
  }
}

TEST_CASE("linker: a garbage input is refused naming the input", "[linker]") {
  cudrv::linker lk({.arch = "sm_90", .link_time_optimization = true});
  // PTX and cubin garbage fails cudrv's image checks, before nvJitLink sees it.
  for (auto kind : {cudrv::code_kind::cubin, cudrv::code_kind::ptx}) {
    const cudrv::object_code garbage(kind, std::string(64, '\x5a'), "garbage.bin");
    auto e = catch_as<cudrv::invalid_image_error>([&] { lk.add(garbage); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->api() == "cudrv::linker::add");
    CHECK(contains(e->what(), "garbage.bin"));
    CHECK(contains(e->what(), std::string(cudrv::to_string(kind)) + ": "));
  }
  // LTO-IR is nvJitLink's to read: its refusal carries its log.
  const cudrv::object_code garbage(cudrv::code_kind::ltoir, std::string(64, '\x5a'), "garbage.bin");
  auto e = catch_as<cudrv::link_error>([&] { lk.add(garbage); });
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->api() == "nvJitLinkAddData");
  CHECK(contains(e->what(), "garbage.bin"));
  CHECK(contains(e->what(), "ltoir"));
  CHECK_FALSE(e->log().empty());
}

TEST_CASE("linker: input and lifecycle errors are refused before nvJitLink is called", "[linker]") {
  cudrv::linker lk({.arch = "sm_90"});
  auto empty = require_invalid_argument("empty input",
                                        [&] { lk.add(cudrv::object_code(cudrv::code_kind::ptx, "", "empty.ptx")); });
  CHECK(contains(empty.what(), "empty.ptx"));
  CHECK(contains(empty.what(), "empty"));
  auto lto = require_invalid_argument("LTO-IR without -lto",
                                      [&] { lk.add(compile("callee.cu", callee_source, cudrv::code_kind::ltoir)); });
  CHECK(contains(lto.what(), "link_time_optimization"));
  require_invalid_argument("link with no input", [&] { (void)lk.link(); });

  lk.add(compile("scale.cu", "extern \"C\" __global__ void k(int* x) { *x = 1; }", cudrv::code_kind::ptx));
  CHECK(is_cuda_elf(lk.link().bytes()));
  auto twice = require_invalid_argument("second link", [&] { (void)lk.link(); });
  CHECK(contains(twice.what(), "already"));
  require_invalid_argument("add after link",
                           [&] { lk.add(compile("callee.cu", callee_source, cudrv::code_kind::ptx)); });
}

TEST_CASE("linker: an option nvJitLink does not know throws link_error at construction", "[linker]") {
  auto e =
      catch_as<cudrv::link_error>([] { cudrv::linker lk({.arch = "sm_90", .extra_options = {"-no-such-option"}}); });
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->api() == "nvJitLinkCreate");
  CHECK(e->name() == "NVJITLINK_ERROR_UNRECOGNIZED_OPTION");
  CHECK(contains(e->log(), "-no-such-option"));
}

TEST_CASE("link_options: the nvJitLink option list", "[linker][driverless]") {
  cudrv::link_options options{.arch = "compute_90a",
                              .link_time_optimization = true,
                              .optimization_level = 3,
                              .debug = true,
                              .line_info = true,
                              .ftz = false,
                              .prec_div = true,
                              .prec_sqrt = false,
                              .fmad = true,
                              .max_registers = 32,
                              .verbose = true,
                              .output = cudrv::code_kind::ptx,
                              .extra_options = {"-split-compile=0"}};
  using list = std::vector<std::string>;
  CHECK(options.to_nvjitlink_options() == list{"-arch=sm_90a", "-lto", "-ptx", "-O3", "-g", "-lineinfo", "-ftz=false",
                                               "-prec-div=true", "-prec-sqrt=false", "-fma=true", "-maxrregcount=32",
                                               "-verbose", "-split-compile=0"});
  CHECK(cudrv::link_options{.arch = "90"}.to_nvjitlink_options() == list{"-arch=sm_90"});
}

TEST_CASE("link_options: invalid fields are refused", "[linker][driverless]") {
  auto refuse = [](const char* what, const cudrv::link_options& o) {
    auto e = require_invalid_argument(what, [&] { cudrv::linker lk(o); });
    CHECK(e.api() == "cudrv::link_options::to_nvjitlink_options");
    return std::string(e.what());
  };
  CHECK(contains(refuse("O4", {.arch = "sm_90", .optimization_level = 4}), "optimization_level"));
  CHECK(contains(refuse("O-1", {.arch = "sm_90", .optimization_level = -1}), "optimization_level"));
  CHECK(contains(refuse("O2", {.arch = "sm_90", .optimization_level = 2}), "0 or 3"));
  CHECK(contains(refuse("max_registers 0", {.arch = "sm_90", .max_registers = 0}), "max_registers"));
  CHECK(contains(refuse("fatbin output", {.arch = "sm_90", .output = cudrv::code_kind::fatbin}), "cubin"));
  CHECK(contains(refuse("ptx without lto", {.arch = "sm_90", .output = cudrv::code_kind::ptx}),
                 "link_time_optimization"));
  CHECK(contains(refuse("bad arch", {.arch = "sm90"}), "link_options::arch"));
}

TEST_CASE("link_options: an empty arch without a driver asks for an explicit one", "[linker][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  auto e = require_invalid_argument("empty arch", [] { cudrv::linker lk; });
  CHECK(contains(e.what(), "link_options::arch"));
  CHECK(contains(e.what(), "driver"));
}

TEST_CASE("nvjitlink_version describes the loaded nvJitLink", "[linker][driverless]") {
  const int version = cudrv::nvjitlink_version();
  CHECK(version / 1000 == CUDA_VERSION / 1000);
  CHECK(version % 10 == 0);
}

TEST_CASE("without nvJitLink, linking throws library_unavailable_error naming the path and the variable",
          "[no-nvjitlink]") {
  // ctest runs this with CUDRV_LIBNVJITLINK=/nonexistent/libnvJitLink.so.
  const char* env = std::getenv("CUDRV_LIBNVJITLINK");
  if (env == nullptr || std::string(env) != "/nonexistent/libnvJitLink.so") {
    std::cout << "SKIPPED: run with CUDRV_LIBNVJITLINK=/nonexistent/libnvJitLink.so (ctest does)" << std::endl;
    return;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto e = catch_as<cudrv::library_unavailable_error>([] { cudrv::linker lk({.arch = "sm_90"}); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->source() == cudrv::error_source::nvjitlink);
    CHECK(contains(e->what(), "/nonexistent/libnvJitLink.so"));
    CHECK(contains(e->what(), "CUDRV_LIBNVJITLINK"));
  }
  CHECK_THROWS_AS(cudrv::nvjitlink_version(), cudrv::library_unavailable_error);
  // NVRTC is independent of it.
  CHECK_NOTHROW(cudrv::program("k.cu", "__global__ void k() {}").compile(cudrv::code_kind::ptx, {.arch = "sm_90"}));
}
