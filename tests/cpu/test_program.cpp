// Run-time compilation with NVRTC: targets, errors with their logs, name expressions, headers,
// defines, the option list and its validation. NVRTC needs no GPU and no driver; every compilation
// names its architecture, except the one proving that an empty arch without a driver is refused.
#include <catch2/catch.hpp>

#include <cudrv/program.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "support/catch_support.hpp"
#include "support/scratch.hpp"
#include "support/test_support.hpp"

using cudrv::test::temp_dir;

using cudrv::test::catch_as;
using cudrv::test::contains;
using cudrv::test::is_cuda_elf;
using cudrv::test::require_invalid_argument;

namespace {

constexpr const char* scale_source = R"(
extern "C" __global__ void scale(float a, float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)";

constexpr const char* saxpy_template_source = R"(
template <class T>
__global__ void saxpy(T a, const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
)";

}  // namespace

TEST_CASE("program: compiles a kernel to PTX for the requested virtual architecture", "[program]") {
  const cudrv::program prog("scale.cu", scale_source);
  CHECK(prog.name() == "scale.cu");
  CHECK(prog.source() == scale_source);
  CHECK(prog.headers().empty());

  const cudrv::compile_result r = prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"});
  const std::string& ptx = r.code.bytes();
  INFO(ptx);
  CHECK(r.code.kind() == cudrv::code_kind::ptx);
  CHECK(r.code.name() == "scale.cu");
  CHECK(contains(ptx, ".entry scale("));
  CHECK(contains(ptx, ".target sm_90"));
  CHECK(ptx.find('\0') == std::string::npos);  // text only; object_code adds the NUL after it
  CHECK(r.code.data()[r.code.size()] == '\0');
  CHECK(r.lowered_names.empty());

  // Every spelling of the architecture gives the same PTX target.
  for (const char* arch : {"90", "compute_90", "sm_90"}) {
    INFO("arch " << arch);
    CHECK(prog.compile(cudrv::code_kind::ptx, {.arch = arch}).code.bytes() == ptx);
  }
  CHECK(contains(prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90a"}).code.bytes(), ".target sm_90a"));
}

TEST_CASE("program: compiles a kernel to a cubin (a CUDA ELF image)", "[program]") {
  const cudrv::compile_result r =
      cudrv::program("scale.cu", scale_source).compile(cudrv::code_kind::cubin, {.arch = "sm_90"});
  CHECK(r.code.kind() == cudrv::code_kind::cubin);
  CHECK(is_cuda_elf(r.code.bytes()));
  CHECK(contains(r.code.bytes(), "scale"));  // the symbol table names the kernel
}

TEST_CASE("program: compiles a kernel to LTO-IR that nvJitLink accepts", "[program]") {
  const cudrv::program prog("scale.cu", scale_source);
  const cudrv::compile_result lto = prog.compile(cudrv::code_kind::ltoir, {.arch = "sm_90"});
  const std::string& ir = lto.code.bytes();
  CHECK(lto.code.kind() == cudrv::code_kind::ltoir);
  REQUIRE_FALSE(ir.empty());
  CHECK(ir != prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}).code.bytes());
  CHECK(ir != prog.compile(cudrv::code_kind::cubin, {.arch = "sm_90"}).code.bytes());
  CHECK_FALSE(is_cuda_elf(ir));
  CHECK_FALSE(contains(ir, ".entry"));

  // link_time_optimization says the same as the target; the output does not change.
  CHECK(prog.compile(cudrv::code_kind::ltoir, {.arch = "sm_90", .link_time_optimization = true}).code.bytes() == ir);
}

TEST_CASE("program: compiles without any CUDA driver", "[program][driverless]") {
  // ctest runs this with CUDRV_LIBCUDA pointing at a missing file: NVRTC needs no driver.
  const auto r = cudrv::program("scale.cu", scale_source).compile(cudrv::code_kind::cubin, {.arch = "sm_90"});
  CHECK(is_cuda_elf(r.code.bytes()));
}

TEST_CASE("program: a syntax error throws compile_error with NVRTC's log", "[program]") {
  const cudrv::program prog("broken.cu", "__global__ void k() { int x = ; }\n");
  auto e = catch_as<cudrv::compile_error>([&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}); });
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->source() == cudrv::error_source::nvrtc);
  CHECK(e->name() == "NVRTC_ERROR_COMPILATION");
  CHECK(e->api() == "nvrtcCompileProgram");
  CHECK(contains(e->log(), "broken.cu"));
  CHECK(contains(e->log(), "error"));
  CHECK(contains(e->what(), e->log()));               // printing the exception shows the reason
  CHECK(contains(e->context(), "-arch=compute_90"));  // and the options it was compiled with
  // Catchable as its bases.
  const cudrv::jit_error& jit = *e;
  CHECK(jit.log() == e->log());
}

TEST_CASE("program: an unknown option throws compile_error naming it", "[program]") {
  const cudrv::program prog("scale.cu", scale_source);
  auto e = catch_as<cudrv::compile_error>(
      [&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90", .extra_options = {"--no-such-option"}}); });
  REQUIRE(e.has_value());
  INFO("what(): " << e->what());
  CHECK(e->name() == "NVRTC_ERROR_INVALID_OPTION");
  CHECK(contains(e->log(), "--no-such-option"));

  // An architecture NVRTC does not support is NVRTC's to refuse (the spelling is valid).
  auto old = catch_as<cudrv::compile_error>([&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "sm_50"}); });
  REQUIRE(old.has_value());
  CHECK(contains(old->log(), "arch"));
}

TEST_CASE("program: name expressions give the lowered names of template instances", "[program]") {
  const cudrv::program prog("saxpy.cu", saxpy_template_source);
  const cudrv::compile_result r =
      prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}, {"saxpy<float>", "saxpy<double>"});
  REQUIRE(r.lowered_names.size() == 2);
  CHECK(r.lowered_names[0].first == "saxpy<float>");
  CHECK(r.lowered_names[1].first == "saxpy<double>");
  const std::string& f = r.lowered_name("saxpy<float>");
  const std::string& d = r.lowered_name("saxpy<double>");
  CHECK(f != d);
  CHECK(f.rfind("_Z", 0) == 0);
  CHECK(d.rfind("_Z", 0) == 0);
  CHECK(contains(r.code.bytes(), ".entry " + f + "("));
  CHECK(contains(r.code.bytes(), ".entry " + d + "("));

  auto unknown = require_invalid_argument("unknown expression", [&] { (void)r.lowered_name("saxpy<int>"); });
  CHECK(unknown.api() == "cudrv::compile_result::lowered_name");
  CHECK(contains(unknown.what(), "saxpy<int>"));
  CHECK(contains(unknown.what(), "saxpy<float>"));  // lists the known ones
  CHECK(contains(unknown.what(), "saxpy<double>"));

  // An expression that names nothing fails the compilation.
  auto bad = catch_as<cudrv::compile_error>(
      [&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}, {"no_such_kernel<int>"}); });
  REQUIRE(bad.has_value());
  INFO("what(): " << bad->what());
  CHECK(contains(bad->what(), "no_such_kernel"));
}

TEST_CASE("program: headers given by name are found by #include", "[program]") {
  const cudrv::program prog("main.cu", R"(
#include "my_header.cuh"
#include "nested/other.cuh"
extern "C" __global__ void KERNEL_FROM_HEADER(float* x) { x[0] = twice(OTHER_VALUE); }
)",
                            {{"my_header.cuh", "#define KERNEL_FROM_HEADER kernel_named_by_header\n"
                                               "__device__ inline float twice(float v) { return 2 * v; }\n"},
                             {"nested/other.cuh", "#define OTHER_VALUE 21.0f\n"}});
  REQUIRE(prog.headers().size() == 2);
  const auto r = prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"});
  CHECK(contains(r.code.bytes(), ".entry kernel_named_by_header("));

  // Without the header the include fails, naming the file.
  const cudrv::program missing("main.cu", "#include \"my_header.cuh\"\n");
  auto e = catch_as<cudrv::compile_error>([&] { (void)missing.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}); });
  REQUIRE(e.has_value());
  CHECK(contains(e->log(), "my_header.cuh"));

  require_invalid_argument("header without a name", [] { cudrv::program p("x.cu", "", {{"", "int x;"}}); });
}

TEST_CASE("program: defines and include paths reach the preprocessor", "[program]") {
  const cudrv::program prog("defined.cu", R"(
#ifndef REQUIRED_FLAG
#error REQUIRED_FLAG is not defined
#endif
#include "from_disk.cuh"
extern "C" __global__ void KERNEL_NAME(int* x) { x[0] = DISK_VALUE; }
)");
  temp_dir dir;
  std::ofstream(dir.path / "from_disk.cuh") << "#define DISK_VALUE 42\n";
  cudrv::compile_options options{.arch = "sm_90",
                                 .defines = {"KERNEL_NAME=kernel_named_by_define", "REQUIRED_FLAG"},
                                 .include_paths = {dir.path.string()}};
  const auto r = prog.compile(cudrv::code_kind::ptx, options);
  CHECK(contains(r.code.bytes(), ".entry kernel_named_by_define("));
  CHECK(contains(r.code.bytes(), "42"));

  options.defines = {"KERNEL_NAME=k"};  // REQUIRED_FLAG missing: #error
  auto e = catch_as<cudrv::compile_error>([&] { (void)prog.compile(cudrv::code_kind::ptx, options); });
  REQUIRE(e.has_value());
  CHECK(contains(e->log(), "REQUIRED_FLAG is not defined"));
}

TEST_CASE("program: the log is kept on success (warnings)", "[program]") {
  const cudrv::program prog("warn.cu", "extern \"C\" __global__ void k() { int unused_variable; }\n");
  const auto r = prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"});
  INFO("log: " << r.log);
  CHECK(contains(r.log, "unused_variable"));
  CHECK(contains(r.log, "warning"));
  CHECK(r.log.find('\0') == std::string::npos);
  // A clean program has an empty log.
  CHECK(cudrv::program("scale.cu", scale_source).compile(cudrv::code_kind::ptx, {.arch = "sm_90"}).log.empty());
}

TEST_CASE("program: one program compiles from several threads at once", "[program]") {
  const cudrv::program prog("saxpy.cu", saxpy_template_source);
  const std::string expected = prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}, {"saxpy<float>"}).code.bytes();
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      try {
        results[t] = prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}, {"saxpy<float>"}).code.bytes();
      } catch (const std::exception& e) {
        results[t] = std::string("exception: ") + e.what();
      }
    });
  }
  for (auto& th : threads) {
    th.join();
  }
  for (const auto& r : results) {
    CHECK(r == expected);
  }
}

TEST_CASE("compile_options: the NVRTC option list", "[program][driverless]") {
  cudrv::compile_options options{
      .arch = "sm_90a",
      .cpp_standard = "c++20",
      .defines = {"N=256", "DEBUG_CHECKS"},
      .include_paths = {"/opt/include"},
      .relocatable_device_code = true,
      .line_info = true,
      .debug = true,
      .fast_math = true,
      .ftz = true,
      .prec_div = false,
      .prec_sqrt = true,
      .fmad = false,
      .max_registers = 64,
      .extra_options = {"-default-device", "--extensible-whole-program"},
  };
  const std::vector<std::string> expected_tail = {"-std=c++20",
                                                  "-rdc=true",
                                                  "-lineinfo",
                                                  "-G",
                                                  "--use_fast_math",
                                                  "-ftz=true",
                                                  "-prec-div=false",
                                                  "-prec-sqrt=true",
                                                  "-fmad=false",
                                                  "-maxrregcount=64",
                                                  "-DN=256",
                                                  "-DDEBUG_CHECKS",
                                                  "-I/opt/include",
                                                  "-default-device",
                                                  "--extensible-whole-program"};
  auto with_arch = [&](std::string arch, bool dlto) {
    std::vector<std::string> v{std::move(arch)};
    for (std::size_t i = 0; i < expected_tail.size(); ++i) {
      v.push_back(expected_tail[i]);
      if (dlto && expected_tail[i] == "-rdc=true") {
        v.emplace_back("-dlto");
      }
    }
    return v;
  };
  CHECK(options.to_nvrtc_options(cudrv::code_kind::ptx) == with_arch("-arch=compute_90a", false));
  CHECK(options.to_nvrtc_options(cudrv::code_kind::cubin) == with_arch("-arch=sm_90a", false));
  CHECK(options.to_nvrtc_options(cudrv::code_kind::ltoir) == with_arch("-arch=compute_90a", true));

  // Defaults add nothing but the architecture, in any spelling.
  using list = std::vector<std::string>;
  CHECK(cudrv::compile_options{.arch = "90"}.to_nvrtc_options(cudrv::code_kind::cubin) == list{"-arch=sm_90"});
  CHECK(cudrv::compile_options{.arch = "compute_80"}.to_nvrtc_options(cudrv::code_kind::cubin) == list{"-arch=sm_80"});
  CHECK(cudrv::compile_options{.arch = "sm_100f"}.to_nvrtc_options(cudrv::code_kind::ptx) ==
        list{"-arch=compute_100f"});
  CHECK(cudrv::compile_options{.arch = "120a"}.to_nvrtc_options(cudrv::code_kind::ltoir) ==
        list{"-arch=compute_120a", "-dlto"});
}

TEST_CASE("compile_options: invalid fields are refused before NVRTC is called", "[program][driverless]") {
  const cudrv::program prog("scale.cu", scale_source);
  auto refuse = [&](const char* what, const cudrv::compile_options& o,
                    cudrv::code_kind target = cudrv::code_kind::ptx) {
    auto e = require_invalid_argument(what, [&] { (void)prog.compile(target, o); });
    CHECK(e.api() == "cudrv::compile_options::to_nvrtc_options");
    return std::string(e.what());
  };
  for (const char* std : {"gnu++17", "17", "c++2a", "C++17", "c++170"}) {
    CHECK(contains(refuse(std, {.arch = "sm_90", .cpp_standard = std}), "cpp_standard"));
  }
  CHECK(contains(refuse("max_registers 0", {.arch = "sm_90", .max_registers = 0}), "max_registers"));
  CHECK(contains(refuse("max_registers -1", {.arch = "sm_90", .max_registers = -1}), "max_registers"));
  for (const char* define : {"", "=1", "1ABC=2", "A B", "A-B=1"}) {
    CHECK(contains(refuse(define, {.arch = "sm_90", .defines = {define}}), "define"));
  }
  CHECK(contains(refuse("empty include path", {.arch = "sm_90", .include_paths = {""}}), "include_paths"));
  for (const char* arch : {"sm90", "sm_", "gfx90", "sm_90x", "sm_9", "sm_090", "compute_1000", "sm_90ab"}) {
    const std::string message = refuse(arch, {.arch = arch});
    CHECK(contains(message, "compile_options::arch"));
    CHECK(contains(message, arch));
  }
  for (auto target : {cudrv::code_kind::fatbin, cudrv::code_kind::object, cudrv::code_kind::library}) {
    CHECK(contains(refuse("target", {.arch = "sm_90"}, target), "cannot produce"));
  }
  CHECK(contains(refuse("lto to cubin", {.arch = "sm_90", .link_time_optimization = true}, cudrv::code_kind::cubin),
                 "link_time_optimization"));
  // Valid spellings pass.
  for (const char* std : {"c++03", "c++11", "c++14", "c++17", "c++20"}) {
    CHECK_NOTHROW(cudrv::compile_options{.arch = "sm_90", .cpp_standard = std}.to_nvrtc_options(cudrv::code_kind::ptx));
  }
  CHECK_NOTHROW(cudrv::compile_options{.arch = "sm_90", .defines = {"F(x)=x", "_A1=", "B"}}.to_nvrtc_options(
      cudrv::code_kind::ptx));
}

TEST_CASE("compile_options: an empty arch without a driver asks for an explicit one", "[program][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  const cudrv::program prog("scale.cu", scale_source);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto e = require_invalid_argument("empty arch", [&] { (void)prog.compile(cudrv::code_kind::ptx); });
    INFO("what(): " << e.what());
    CHECK(contains(e.what(), "arch"));
    CHECK(contains(e.what(), "driver"));
    CHECK(contains(e.what(), "sm_90"));  // shows how to set it
  }
  require_invalid_argument("to_nvrtc_options",
                           [] { (void)cudrv::compile_options{}.to_nvrtc_options(cudrv::code_kind::cubin); });
}

TEST_CASE("nvrtc_version and nvrtc_supported_archs describe the loaded NVRTC", "[program][driverless]") {
  const int version = cudrv::nvrtc_version();
  CHECK(version / 1000 == CUDA_VERSION / 1000);  // the soname of the headers' major version
  CHECK(version % 10 == 0);
  const std::vector<int> archs = cudrv::nvrtc_supported_archs();
  REQUIRE_FALSE(archs.empty());
  CHECK(std::is_sorted(archs.begin(), archs.end()));
  CHECK(std::find(archs.begin(), archs.end(), 90) != archs.end());
}

TEST_CASE("without NVRTC, compiling throws library_unavailable_error naming the path and the variable", "[no-nvrtc]") {
  // ctest runs this with CUDRV_LIBNVRTC=/nonexistent/libnvrtc.so.
  const char* env = std::getenv("CUDRV_LIBNVRTC");
  if (env == nullptr || std::string(env) != "/nonexistent/libnvrtc.so") {
    std::cout << "SKIPPED: run with CUDRV_LIBNVRTC=/nonexistent/libnvrtc.so (ctest does)" << std::endl;
    return;
  }
  const cudrv::program prog("scale.cu", scale_source);
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failure is cached, and the same
    auto e = catch_as<cudrv::library_unavailable_error>(
        [&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->source() == cudrv::error_source::nvrtc);
    CHECK(contains(e->what(), "/nonexistent/libnvrtc.so"));
    CHECK(contains(e->what(), "CUDRV_LIBNVRTC"));
    CHECK(contains(e->what(), "NVRTC"));
  }
  CHECK_THROWS_AS(cudrv::nvrtc_version(), cudrv::library_unavailable_error);
  CHECK_THROWS_AS(cudrv::nvrtc_supported_archs(), cudrv::library_unavailable_error);
  // Options are still validated first.
  CHECK_THROWS_AS(prog.compile(cudrv::code_kind::ptx, {.arch = "bad"}), cudrv::invalid_argument_error);
}
