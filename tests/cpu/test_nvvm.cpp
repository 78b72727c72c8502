// NVVM IR compiled by libNVVM (issue 34 part 9): text and bitcode modules, several modules, libdevice,
// LTO-IR for nvJitLink, the option list and its checks, errors with libNVVM's log, the compile cache's
// key, and the refusal when libNVVM is missing. libNVVM is part of the toolkit, so these compile for
// real; none needs a GPU.
#include <catch2/catch.hpp>

#include <cudrv/compile_cache.hpp>
#include <cudrv/linker.hpp>
#include <cudrv/nvvm_program.hpp>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cpu/nvvm_bitcode.inc"
#include "support/nvvm_ir.hpp"
#include "support/scratch.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;
using cudrv::test::env_guard;
using cudrv::test::temp_dir;
namespace fs = std::filesystem;

namespace {

template <std::size_t N>
std::string bytes_of(const unsigned char (&data)[N]) {
  return std::string(reinterpret_cast<const char*>(data), N);
}

std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("nvvm_program: a hand-written saxpy in text IR compiles to PTX with its .entry", "[nvvm][driverless]") {
  // ctest also runs this without any CUDA driver: libNVVM needs none when the arch is given.
  const cudrv::nvvm_program prog("saxpy.ll", cudrv::test::nvvm_saxpy_ir);
  REQUIRE(prog.modules().size() == 1);
  CHECK(prog.modules()[0].name == "saxpy.ll");
  const cudrv::compile_result r = prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"});
  const std::string& ptx = r.code.bytes();
  INFO(ptx);
  CHECK(r.code.kind() == cudrv::code_kind::ptx);
  CHECK(r.code.name() == "saxpy.ll");
  CHECK(contains(ptx, ".visible .entry saxpy("));
  CHECK(contains(ptx, ".target sm_90"));
  CHECK(contains(ptx, "fma.rn.f32"));  // a * x + y contracted (-fma's default)
  CHECK(ptx.find('\0') == std::string::npos);
  CHECK(r.code.data()[r.code.size()] == '\0');
  CHECK(r.lowered_names.empty());

  // compute_NN and a bare number mean the same architecture.
  CHECK(prog.compile(cudrv::code_kind::ptx, {.arch = "compute_90"}).code.bytes() == ptx);
  CHECK(prog.compile(cudrv::code_kind::ptx, {.arch = "90"}).code.bytes() == ptx);
  CHECK(contains(prog.compile(cudrv::code_kind::ptx, {.arch = "sm_80"}).code.bytes(), ".target sm_80"));
  // Options reach libNVVM: without FMA contraction the multiply and the add stay apart.
  const std::string no_fma = prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90", .fma = false}).code.bytes();
  CHECK_FALSE(contains(no_fma, "fma.rn.f32"));
  CHECK(contains(no_fma, "mul.rn.f32"));
}

TEST_CASE("nvvm_program: bitcode compiles to the PTX of the same IR as text", "[nvvm]") {
  const std::string bitcode = bytes_of(cudrv::test::nvvm_saxpy_bc);
  REQUIRE(bitcode.starts_with("BC\xC0\xDE"));
  const cudrv::nvvm_program from_text("saxpy", cudrv::test::nvvm_saxpy_ir);
  const cudrv::nvvm_program from_bitcode("saxpy", bitcode);
  const std::string ptx = from_bitcode.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}).code.bytes();
  INFO(ptx);
  CHECK(contains(ptx, ".visible .entry saxpy("));
  CHECK(ptx == from_text.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}).code.bytes());
}

TEST_CASE("nvvm_program: bad bitcode and invalid IR throw compile_error with libNVVM's log", "[nvvm]") {
  SECTION("truncated bitcode") {
    const std::string bitcode = bytes_of(cudrv::test::nvvm_saxpy_bc);
    const cudrv::nvvm_program prog("cut.bc", bitcode.substr(0, bitcode.size() / 2));
    auto e = catch_as<cudrv::compile_error>([&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->source() == cudrv::error_source::nvvm);
    CHECK(e->name().starts_with("NVVM_ERROR_"));
    CHECK_FALSE(e->log().empty());
    CHECK(contains(e->what(), e->log()));
    CHECK(contains(e->what(), "cut.bc"));
  }
  SECTION("a type error in text IR") {
    std::string ir = cudrv::test::nvvm_saxpy_ir;
    const std::string good = "%r = fadd float %ax, %vy";
    REQUIRE(contains(ir, good));
    ir.replace(ir.find(good), good.size(), "%r = fadd float %ax, i32 %n");
    const cudrv::nvvm_program prog("broken.ll", ir);
    auto e = catch_as<cudrv::compile_error>([&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}); });
    REQUIRE(e.has_value());
    INFO("log: " << e->log());
    CHECK(e->source() == cudrv::error_source::nvvm);
    CHECK(contains(e->log(), "broken.ll"));  // libNVVM names the module and the place
    CHECK(contains(e->what(), e->log()));
    CHECK(contains(e->what(), "-arch=compute_90"));  // the options are in the context
    CHECK_THROWS_AS(prog.verify({.arch = "sm_90"}), cudrv::compile_error);
  }
  SECTION("an option libNVVM does not know") {
    const cudrv::nvvm_program prog("saxpy.ll", cudrv::test::nvvm_saxpy_ir);
    auto e = catch_as<cudrv::compile_error>(
        [&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90", .extra_options = {"-no-such-option"}}); });
    REQUIRE(e.has_value());
    CHECK(e->code() == 7);  // NVVM_ERROR_INVALID_OPTION
    CHECK(e->name() == "NVVM_ERROR_INVALID_OPTION");
    CHECK(contains(e->log(), "-no-such-option"));
  }
}

TEST_CASE("nvvm_program: verify checks the NVVM IR rules that compiling alone lets through", "[nvvm]") {
  // A data layout without i128 breaks the NVVM IR rules; libNVVM's compilation accepts it anyway.
  std::string ir = cudrv::test::nvvm_saxpy_ir;
  const std::string i128 = "-i128:128:128";
  REQUIRE(contains(ir, i128));
  ir.erase(ir.find(i128), i128.size());
  const cudrv::nvvm_program prog("layout.ll", ir);
  auto e = catch_as<cudrv::compile_error>([&] { (void)prog.verify({.arch = "sm_90"}); });
  REQUIRE(e.has_value());
  INFO("log: " << e->log());
  CHECK(e->api() == "nvvmVerifyProgram");
  CHECK(e->name() == "NVVM_ERROR_INVALID_IR");
  CHECK(contains(e->log(), "DataLayout"));
  CHECK_THROWS_AS(prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}), cudrv::compile_error);
  // Without the verification the same IR compiles.
  const auto r = prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90", .verify = false});
  CHECK(contains(r.code.bytes(), ".entry saxpy("));
  // Valid IR verifies with an empty log.
  CHECK(cudrv::nvvm_program("saxpy.ll", cudrv::test::nvvm_saxpy_ir).verify({.arch = "sm_90"}).empty());
}

TEST_CASE("nvvm_program: modules are linked together, and a ptx_kernel function is a kernel", "[nvvm]") {
  cudrv::nvvm_program alone("caller.ll", cudrv::test::nvvm_caller_ir);
  const std::string unresolved = alone.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}).code.bytes();
  INFO(unresolved);
  CHECK(contains(unresolved, ".visible .entry caller("));
  CHECK(contains(unresolved, ".extern .func"));  // twice() is only declared
  CHECK(contains(unresolved, "twice"));

  cudrv::nvvm_program both = alone;
  both.add_module("twice.ll", cudrv::test::nvvm_twice_ir);
  REQUIRE(both.modules().size() == 2);
  CHECK(both.modules()[1].name == "twice.ll");
  const std::string linked = both.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}).code.bytes();
  INFO(linked);
  CHECK(contains(linked, ".visible .entry caller("));
  CHECK_FALSE(contains(linked, ".extern"));
  CHECK(contains(linked, "shl.b32"));  // twice() inlined into the kernel

  // The same through the constructor that takes the modules.
  const cudrv::nvvm_program listed("pair", std::vector<cudrv::nvvm_module>{{"caller.ll", cudrv::test::nvvm_caller_ir},
                                                                           {"twice.ll", cudrv::test::nvvm_twice_ir}});
  CHECK(listed.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}).code.bytes() == linked);
}

TEST_CASE("nvvm_program: libdevice linked on request resolves a __nv_ call", "[nvvm]") {
  const std::string& path = cudrv::find_libdevice();
  INFO(path);
  CHECK(path.ends_with("libdevice.10.bc"));
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK(st.st_size > 100000);

  const cudrv::nvvm_program prog("sines.ll", cudrv::test::nvvm_sines_ir);
  const std::string without = prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}).code.bytes();
  CHECK(contains(without, ".extern .func"));  // left for a linker that never comes: loading would fail
  CHECK(contains(without, "__nv_sinf"));

  const std::string with = prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90", .libdevice = true}).code.bytes();
  INFO(with);
  CHECK(contains(with, ".visible .entry sines("));
  CHECK_FALSE(contains(with, "__nv_sinf"));
  CHECK_FALSE(contains(with, ".extern"));
  CHECK(with.size() > without.size());  // sinf's body, range reduction included
  // Only what the program calls is kept of libdevice's hundreds of functions.
  CHECK_FALSE(contains(with, "__nv_cosf"));
  CHECK(count_of(with, ".func") <= 2);
  CHECK(prog.verify({.arch = "sm_90", .libdevice = true}).empty());
}

TEST_CASE("nvvm_program: LTO-IR (-gen-lto) that nvJitLink links into a cubin", "[nvvm]") {
  const cudrv::nvvm_program prog("saxpy.ll", cudrv::test::nvvm_saxpy_ir);
  const cudrv::compile_result lto = prog.compile(cudrv::code_kind::ltoir, {.arch = "sm_90"});
  const std::string& ir = lto.code.bytes();
  CHECK(lto.code.kind() == cudrv::code_kind::ltoir);
  REQUIRE(ir.size() > 16);
  CHECK(ir.starts_with("\xed\x43\x4e\x7f"));  // LTO-IR's magic
  CHECK_FALSE(contains(ir, ".entry"));

  cudrv::linker lk({.arch = "sm_90", .link_time_optimization = true, .output = cudrv::code_kind::ptx});
  const cudrv::object_code ptx = lk.add(lto.code).link();
  INFO(ptx.bytes());
  CHECK(contains(ptx.bytes(), ".entry saxpy("));
  CHECK(contains(ptx.bytes(), ".target sm_90"));
}

TEST_CASE("nvvm_options: the libNVVM option list", "[nvvm][driverless]") {
  using V = std::vector<std::string>;
  CHECK(cudrv::nvvm_options{.arch = "sm_90"}.to_nvvm_options(cudrv::code_kind::ptx) == V{"-arch=compute_90"});
  CHECK(cudrv::nvvm_options{.arch = "sm_90a"}.to_nvvm_options(cudrv::code_kind::ptx) == V{"-arch=compute_90a"});
  CHECK(cudrv::nvvm_options{.arch = "100f"}.to_nvvm_options(cudrv::code_kind::ltoir) ==
        V{"-arch=compute_100f", "-gen-lto"});
  const cudrv::nvvm_options all{.arch = "compute_80",
                                .opt_level = 0,
                                .debug = true,
                                .line_info = true,
                                .ftz = true,
                                .prec_div = false,
                                .prec_sqrt = true,
                                .fma = false,
                                .extra_options = {"-jump-table-density=0"}};
  CHECK(all.to_nvvm_options(cudrv::code_kind::ptx) == V{"-arch=compute_80", "-opt=0", "-g", "-generate-line-info",
                                                        "-ftz=1", "-prec-div=0", "-prec-sqrt=1", "-fma=0",
                                                        "-jump-table-density=0"});
  // fast_math fills in only what is unset.
  CHECK(cudrv::nvvm_options{.arch = "90", .fast_math = true}.to_nvvm_options(cudrv::code_kind::ptx) ==
        V{"-arch=compute_90", "-ftz=1", "-prec-div=0", "-prec-sqrt=0", "-fma=1"});
  CHECK(cudrv::nvvm_options{.arch = "90", .fast_math = true, .prec_sqrt = true}.to_nvvm_options(
            cudrv::code_kind::ptx) == V{"-arch=compute_90", "-ftz=1", "-prec-div=0", "-prec-sqrt=1", "-fma=1"});
  // libdevice and verify change the program, not the list.
  CHECK(cudrv::nvvm_options{.arch = "90", .libdevice = true, .verify = false}.to_nvvm_options(cudrv::code_kind::ptx) ==
        V{"-arch=compute_90"});
}

TEST_CASE("nvvm_options and nvvm_program: invalid inputs are refused before libNVVM is called", "[nvvm][driverless]") {
  auto refused = [](auto&& f, const std::string& words) {
    auto e = catch_as<cudrv::invalid_argument_error>(f);
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(contains(e->what(), words));
  };
  const cudrv::nvvm_program prog("saxpy.ll", cudrv::test::nvvm_saxpy_ir);
  refused([&] { (void)prog.compile(cudrv::code_kind::cubin, {.arch = "sm_90"}); }, "cannot produce cubin");
  refused([&] { (void)prog.compile(cudrv::code_kind::fatbin, {.arch = "sm_90"}); }, "cannot produce fatbin");
  refused([&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90", .opt_level = 4}); }, "opt_level");
  refused([&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90", .opt_level = -1}); }, "opt_level");
  refused([&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "volta"}); }, "nvvm_options::arch");
  refused([&] { (void)prog.verify({.arch = "sm9"}); }, "nvvm_options::arch");
  refused([] { cudrv::nvvm_program("", "x"); }, "name is empty");
  refused([] { cudrv::nvvm_program("a.ll", ""); }, "has no IR");
  refused([] { cudrv::nvvm_program("a", std::vector<cudrv::nvvm_module>{}); }, "no module");
  refused([] { cudrv::nvvm_program("a", std::vector<cudrv::nvvm_module>{{"", "x"}}); }, "empty name");
  cudrv::nvvm_program p("a.ll", "x");
  refused([&] { p.add_module("b.ll", ""); }, "module 'b.ll'");
  CHECK(p.modules().size() == 1);
}

TEST_CASE("nvvm_version describes the loaded libNVVM", "[nvvm][driverless]") {
  const cudrv::nvvm_version_info v = cudrv::nvvm_version();
  CHECK(v.major >= 2);  // 2 since CUDA 12
  CHECK(v.ir_major >= 2);
  CHECK(v.debug_major >= 3);
}

TEST_CASE("compile_cache: NVVM compilations hit for the same inputs and miss when any changes",
          "[nvvm][compile_cache]") {
  temp_dir dir("cudrv-nvvm-cache");
  cudrv::compile_cache cache((dir.path / "cache").string());
  const cudrv::nvvm_program prog("saxpy.ll", cudrv::test::nvvm_saxpy_ir);
  const cudrv::nvvm_options options{.arch = "sm_90"};

  const cudrv::compile_result first = cache.compile(prog, cudrv::code_kind::ptx, options);
  CHECK(cache.stats().misses == 1);
  CHECK(cache.stats().hits == 0);
  const cudrv::compile_result again = cache.compile(prog, cudrv::code_kind::ptx, options);
  CHECK(cache.stats().hits == 1);
  CHECK(again.code.bytes() == first.code.bytes());
  CHECK(again.code.kind() == cudrv::code_kind::ptx);
  CHECK(again.code.name() == "saxpy.ll");
  CHECK(again.log == first.log);
  CHECK(first.code.bytes() == prog.compile(cudrv::code_kind::ptx, options).code.bytes());
  // Another cache object on the same directory (as another process would) hits as well.
  cudrv::compile_cache other((dir.path / "cache").string());
  CHECK(other.compile(prog, cudrv::code_kind::ptx, options).code.bytes() == first.code.bytes());
  CHECK(other.stats().hits == 1);

  // Each change is a miss, and the result is that of the changed inputs.
  std::uint64_t misses = cache.stats().misses;
  auto miss = [&](const cudrv::nvvm_program& p, cudrv::code_kind target, const cudrv::nvvm_options& o) {
    const cudrv::compile_result r = cache.compile(p, target, o);
    CHECK(cache.stats().misses == ++misses);
    CHECK(r.code.bytes() == p.compile(target, o).code.bytes());
    return r;
  };
  CHECK(miss(prog, cudrv::code_kind::ptx, {.arch = "sm_80"}).code.bytes() != first.code.bytes());
  CHECK(miss(prog, cudrv::code_kind::ptx, {.arch = "sm_90", .fma = false}).code.bytes() != first.code.bytes());
  miss(prog, cudrv::code_kind::ptx, {.arch = "sm_90", .verify = false});
  miss(prog, cudrv::code_kind::ptx, {.arch = "sm_90", .libdevice = true});
  CHECK(miss(prog, cudrv::code_kind::ltoir, options).code.kind() == cudrv::code_kind::ltoir);
  std::string edited = cudrv::test::nvvm_saxpy_ir;
  edited.replace(edited.find("fadd float %ax"), 14, "fsub float %ax");
  CHECK(miss(cudrv::nvvm_program("saxpy.ll", edited), cudrv::code_kind::ptx, options).code.bytes() !=
        first.code.bytes());
  miss(cudrv::nvvm_program("other.ll", cudrv::test::nvvm_saxpy_ir), cudrv::code_kind::ptx, options);
  miss(cudrv::nvvm_program("saxpy.ll", bytes_of(cudrv::test::nvvm_saxpy_bc)), cudrv::code_kind::ptx, options);
  cudrv::nvvm_program two = cudrv::nvvm_program("saxpy.ll", cudrv::test::nvvm_saxpy_ir);
  two.add_module("twice.ll", cudrv::test::nvvm_twice_ir);
  miss(two, cudrv::code_kind::ptx, options);
  // The first entry is still served.
  CHECK(cache.stats().hits == 1);
  CHECK(cache.compile(prog, cudrv::code_kind::ptx, options).code.bytes() == first.code.bytes());
  CHECK(cache.stats().hits == 2);

  // Compile errors are not cached.
  const cudrv::nvvm_program broken("broken.ll", "this is not IR");
  CHECK_THROWS_AS(cache.compile(broken, cudrv::code_kind::ptx, options), cudrv::compile_error);
  CHECK_THROWS_AS(cache.compile(broken, cudrv::code_kind::ptx, options), cudrv::compile_error);
  // A disabled cache compiles every time.
  cudrv::compile_cache off = cudrv::compile_cache::disabled();
  CHECK(off.compile(prog, cudrv::code_kind::ptx, options).code.bytes() == first.code.bytes());
  CHECK(off.stats().misses == 1);
}

TEST_CASE("compile_cache: libdevice's contents are part of an NVVM compilation's key", "[nvvm][compile_cache]") {
  // find_libdevice looks once per process: this case needs CUDRV_LIBDEVICE seen first (ctest runs each
  // case in its own process).
  temp_dir dir("cudrv-nvvm-libdevice");
  const fs::path copy = dir.path / "libdevice.10.bc";
  env_guard env("CUDRV_LIBDEVICE", copy.string());
  // The toolkit's libdevice, copied, is found through the variable.
  const fs::path toolkit_libdevice = "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc";
  if (!fs::exists(toolkit_libdevice)) {
    std::cout << "SKIPPED: needs the toolkit's libdevice in /usr/local/cuda/nvvm/libdevice" << std::endl;
    return;
  }
  fs::copy_file(toolkit_libdevice, copy);
  if (cudrv::find_libdevice() != copy.string()) {
    std::cout << "SKIPPED: needs its own process (find_libdevice ran before CUDRV_LIBDEVICE was set)" << std::endl;
    return;
  }
  cudrv::compile_cache cache((dir.path / "cache").string());
  const cudrv::nvvm_program prog("sines.ll", cudrv::test::nvvm_sines_ir);
  const cudrv::nvvm_options options{.arch = "sm_90", .libdevice = true};
  const std::string real = cache.compile(prog, cudrv::code_kind::ptx, options).code.bytes();
  CHECK(cache.compile(prog, cudrv::code_kind::ptx, options).code.bytes() == real);
  CHECK(cache.stats().hits == 1);

  // The same path, other contents: a miss, and the result of the new contents.
  {
    std::ofstream out(copy, std::ios::binary | std::ios::trunc);
    const std::string fake = bytes_of(cudrv::test::nvvm_fake_libdevice_bc);
    out.write(fake.data(), static_cast<std::streamsize>(fake.size()));
  }
  const std::string fake = cache.compile(prog, cudrv::code_kind::ptx, options).code.bytes();
  INFO(fake);
  CHECK(cache.stats().misses == 2);
  CHECK(fake != real);
  CHECK(contains(fake, "add.f32"));  // the stand-in's x + 1.0
  CHECK(fake.size() < real.size());
}

TEST_CASE("find_libdevice: CUDRV_LIBDEVICE naming a missing file is refused with the path", "[nvvm]") {
  env_guard env("CUDRV_LIBDEVICE", "/nonexistent/libdevice.10.bc");
  try {
    const std::string& found = cudrv::find_libdevice();
    std::cout << "SKIPPED: needs its own process (find_libdevice already found " << found << ")" << std::endl;
    return;
  } catch (const cudrv::library_unavailable_error& e) {
    INFO("what(): " << e.what());
    CHECK(e.source() == cudrv::error_source::nvvm);
    CHECK(contains(e.what(), "/nonexistent/libdevice.10.bc"));
    CHECK(contains(e.what(), "CUDRV_LIBDEVICE"));
  }
  const cudrv::nvvm_program prog("sines.ll", cudrv::test::nvvm_sines_ir);
  CHECK_THROWS_AS(prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90", .libdevice = true}),
                  cudrv::library_unavailable_error);
  CHECK_NOTHROW(prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}));  // without libdevice it is not looked for
}

TEST_CASE("without libNVVM, compiling throws library_unavailable_error naming the path and the variable",
          "[.][no-nvvm]") {
  // ctest runs this with CUDRV_LIBNVVM=/nonexistent/libnvvm.so (hidden: only that run selects it).
  const char* env = std::getenv("CUDRV_LIBNVVM");
  if (env == nullptr || std::string(env) != "/nonexistent/libnvvm.so") {
    std::cout << "SKIPPED: needs CUDRV_LIBNVVM=/nonexistent/libnvvm.so (ctest sets it)" << std::endl;
    return;
  }
  const cudrv::nvvm_program prog("saxpy.ll", cudrv::test::nvvm_saxpy_ir);
  for (int attempt = 0; attempt < 2; ++attempt) {  // the failure is kept, and the same
    auto e = catch_as<cudrv::library_unavailable_error>(
        [&] { (void)prog.compile(cudrv::code_kind::ptx, {.arch = "sm_90"}); });
    REQUIRE(e.has_value());
    INFO("what(): " << e->what());
    CHECK(e->source() == cudrv::error_source::nvvm);
    CHECK(contains(e->what(), "/nonexistent/libnvvm.so"));
    CHECK(contains(e->what(), "CUDRV_LIBNVVM"));
    CHECK(contains(e->what(), "libNVVM"));
  }
  CHECK_THROWS_AS(cudrv::nvvm_version(), cudrv::library_unavailable_error);
  CHECK_THROWS_AS(prog.verify({.arch = "sm_90"}), cudrv::library_unavailable_error);
  cudrv::compile_cache cache = cudrv::compile_cache::disabled();
  CHECK_THROWS_AS(cache.compile(prog, cudrv::code_kind::ptx, {.arch = "sm_90"}), cudrv::library_unavailable_error);
  // Options are still checked first.
  CHECK_THROWS_AS(prog.compile(cudrv::code_kind::ptx, {.arch = "bad"}), cudrv::invalid_argument_error);
  CHECK_THROWS_AS(prog.compile(cudrv::code_kind::cubin, {.arch = "sm_90"}), cudrv::invalid_argument_error);
}
