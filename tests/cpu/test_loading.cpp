// Loading and launching without a GPU: object_code files and kinds, the checks cudrv::library makes
// before the driver sees an image (run without a driver: a check after a driver call would surface
// as driver_unavailable_error), launch_config, and the compile-time shape of typed kernels.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <type_traits>

#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("cudrv-loading-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

const cudrv::object_code& nvrtc_cubin() {
  static const cudrv::object_code code = cudrv::program("k.cu", "extern \"C\" __global__ void k(int* p) { *p = 1; }")
                                             .compile(cudrv::code_kind::cubin, {.arch = "sm_90"})
                                             .code;
  return code;
}

template <class E, class F>
E require_error(F&& f) {
  auto e = catch_as<E>(f);
  REQUIRE(e.has_value());
  return *e;
}

}  // namespace

TEST_CASE("object_code: files round-trip and the kind comes from the extension", "[loading]") {
  const std::string bytes("\x7f"
                          "ELF\0binary\0bytes",
                          17);
  for (auto [ext, kind] : {std::pair{".ptx", cudrv::code_kind::ptx}, std::pair{".cubin", cudrv::code_kind::cubin},
                           std::pair{".fatbin", cudrv::code_kind::fatbin}, std::pair{".ltoir", cudrv::code_kind::ltoir},
                           std::pair{".o", cudrv::code_kind::object}, std::pair{".a", cudrv::code_kind::library}}) {
    INFO(ext);
    const std::string path = temp_path(std::string("code") + ext);
    cudrv::object_code(kind, bytes, "in memory").write_to_file(path);
    auto read = cudrv::object_code::from_file(path);
    std::remove(path.c_str());
    CHECK(read.kind() == kind);
    CHECK(read.bytes() == bytes);
    CHECK(read.size() == bytes.size());
    CHECK(read.name() == path);
    CHECK(read.data()[read.size()] == '\0');  // PTX needs the terminating NUL
  }
  auto unknown =
      require_error<cudrv::invalid_argument_error>([] { (void)cudrv::object_code::from_file("/tmp/k.bin"); });
  CHECK(contains(unknown.what(), ".ptx .cubin .fatbin .ltoir .o .a"));
  auto missing = require_error<cudrv::invalid_argument_error>(
      [] { (void)cudrv::object_code::from_file("/nonexistent/dir/k.cubin"); });
  CHECK(contains(missing.what(), "/nonexistent/dir/k.cubin"));
  CHECK(contains(missing.what(), "No such file"));
  CHECK(cudrv::to_string(cudrv::code_kind::ltoir) == "ltoir");
  CHECK(cudrv::object_code().empty());
}

TEST_CASE("library: images refused before the driver, each with what to fix", "[loading][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  const auto& cubin = nvrtc_cubin();
  REQUIRE(cubin.size() > 200);

  auto empty = require_error<cudrv::invalid_argument_error>(
      [] { cudrv::library lib(cudrv::object_code(cudrv::code_kind::cubin, "", "empty.cubin")); });
  CHECK(contains(empty.what(), "'empty.cubin' is empty"));

  for (auto kind : {cudrv::code_kind::ltoir, cudrv::code_kind::object, cudrv::code_kind::library}) {
    auto e = require_error<cudrv::invalid_argument_error>(
        [&] { cudrv::library lib(cudrv::object_code(kind, "bytes", "unit")); });
    CHECK(contains(e.what(), "cudrv::linker"));
  }

  // Truncated cubins: cut inside the section headers, and inside a section's data.
  for (std::size_t keep : {cubin.size() - 1, cubin.size() / 2, std::size_t(80)}) {
    INFO("kept " << keep << " of " << cubin.size() << " bytes");
    auto e = require_error<cudrv::invalid_image_error>([&] {
      cudrv::library lib(cudrv::object_code(cudrv::code_kind::cubin, cubin.bytes().substr(0, keep), "cut.cubin"));
    });
    CHECK(e.source() == cudrv::error_source::cudrv);
    CHECK(e.result() == CUDA_ERROR_INVALID_IMAGE);
    CHECK(contains(e.what(), "'cut.cubin' is malformed"));
    CHECK(contains(e.what(), "truncated?"));
  }
  auto not_elf = require_error<cudrv::load_error>(
      [] { cudrv::library lib(cudrv::object_code(cudrv::code_kind::cubin, std::string(100, 'x'), "text.cubin")); });
  CHECK(contains(not_elf.what(), "not an ELF file"));
  std::string host_elf = cubin.bytes();
  host_elf[18] = 62;  // EM_X86_64
  host_elf[19] = 0;
  auto wrong_machine = require_error<cudrv::load_error>(
      [&] { cudrv::library lib(cudrv::object_code(cudrv::code_kind::cubin, host_elf, "host.o")); });
  CHECK(contains(wrong_machine.what(), "ELF machine 62 is not EM_CUDA (190): not a CUDA cubin"));

  auto bad_fatbin = require_error<cudrv::load_error>(
      [] { cudrv::library lib(cudrv::object_code(cudrv::code_kind::fatbin, std::string(64, '\0'), "x.fatbin")); });
  CHECK(contains(bad_fatbin.what(), "fatbin magic"));
  std::string fat("\x50\xed\x55\xba\x01\x00\x10\x00", 8);
  fat += std::string("\x00\x10\x00\x00\x00\x00\x00\x00", 8);  // announces 4096 bytes of body
  fat += std::string(100, '\0');
  auto short_fatbin = require_error<cudrv::load_error>(
      [&] { cudrv::library lib(cudrv::object_code(cudrv::code_kind::fatbin, fat, "short.fatbin")); });
  CHECK(contains(short_fatbin.what(), "header of 16 bytes + body of 4096 bytes exceeds the image size 116"));

  auto nul_ptx = require_error<cudrv::invalid_image_error>(
      [] { cudrv::library lib(cudrv::object_code(cudrv::code_kind::ptx, std::string("abc\0def", 7), "bin.ptx")); });
  CHECK(contains(nul_ptx.what(), "NUL byte"));

  // Option values are checked before the driver too.
  const cudrv::object_code ptx(cudrv::code_kind::ptx, ".version 8.0\n", "k.ptx");
  CHECK(contains(require_error<cudrv::invalid_argument_error>([&] {
                   cudrv::library l(ptx, {.optimization_level = 5});
                 }).what(),
                 "0 to 4"));
  CHECK(contains(require_error<cudrv::invalid_argument_error>([&] {
                   cudrv::library l(ptx, {.max_registers = -8});
                 }).what(),
                 "max_registers is -8; give a positive limit"));
  CHECK(contains(require_error<cudrv::invalid_argument_error>([&] {
                   cudrv::library l(ptx, {.max_registers = 0});
                 }).what(),
                 "max_registers is 0"));
  CHECK(contains(require_error<cudrv::invalid_argument_error>([&] { cudrv::library l(ptx, {.target = 1000}); }).what(),
                 "major * 10 + minor"));

  // A whole, valid image gets as far as the driver, which is missing.
  CHECK(catch_as<cudrv::driver_unavailable_error>([&] { cudrv::library lib(cubin); }));
}

TEST_CASE("launch_config: defaults, dims and when the extended launch is needed", "[loading]") {
  const cudrv::launch_config plain{};
  CHECK(plain.grid == cudrv::dims(1, 1, 1));
  CHECK(plain.block == cudrv::dims(1));
  CHECK(plain.dynamic_shared_memory == 0);
  CHECK_FALSE(plain.has_cluster());
  CHECK_FALSE(plain.needs_extended_launch());
  CHECK_FALSE(plain.programmatic_stream_serialization);  // off by default

  const cudrv::launch_config tiles{.grid = {8, 4}, .block = 256, .dynamic_shared_memory = 1024};
  CHECK(tiles.grid.count() == 32);
  CHECK(tiles.block.count() == 256);
  CHECK_FALSE(tiles.needs_extended_launch());
  CHECK(cudrv::dims(65535, 65535, 65535).count() == 65535ULL * 65535ULL * 65535ULL);

  CHECK(cudrv::launch_config{.cluster = 2}.has_cluster());
  CHECK(cudrv::launch_config{.cluster = 2}.needs_extended_launch());
  CHECK(cudrv::launch_config{.cooperative = true}.needs_extended_launch());
  CHECK(cudrv::launch_config{.programmatic_stream_serialization = true}.needs_extended_launch());
  CHECK(cudrv::launch_config{.priority = -1}.needs_extended_launch());
}

namespace {
// Whether `dims(args...)` compiles, and whether a launch_config's grid can be written from a T.
template <class... Args>
constexpr bool dims_from = requires(Args... args) {
  cudrv::dims(args...);
};
template <class T>
constexpr bool grid_from = requires(T t) {
  cudrv::launch_config{.grid = t};
};
}  // namespace

TEST_CASE("dims: integers of at most 32 bits convert, wider ones only through dims::checked", "[loading]") {
  // Accepted: what fits in unsigned (a negative int is refused at launch, with the limit named).
  STATIC_REQUIRE(std::is_convertible_v<int, cudrv::dims>);
  STATIC_REQUIRE(std::is_convertible_v<unsigned, cudrv::dims>);
  STATIC_REQUIRE(std::is_convertible_v<short, cudrv::dims>);
  STATIC_REQUIRE(std::is_convertible_v<std::uint8_t, cudrv::dims>);
  STATIC_REQUIRE(dims_from<int, unsigned, short>);
  STATIC_REQUIRE(dims_from<unsigned, unsigned>);
  STATIC_REQUIRE(grid_from<int>);
  STATIC_REQUIRE(grid_from<std::uint32_t>);
  // Refused, by traits and requires-expressions alike (the overload is deleted, so they see it): 64-bit,
  // floating-point and bool extents, in any position.
  STATIC_REQUIRE_FALSE(std::is_convertible_v<std::size_t, cudrv::dims>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<cudrv::dims, std::size_t>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<cudrv::dims, long long>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<cudrv::dims, std::uint64_t, int>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<double, cudrv::dims>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<bool, cudrv::dims>);
  STATIC_REQUIRE_FALSE(dims_from<int, std::size_t>);
  STATIC_REQUIRE_FALSE(dims_from<int, int, long long>);
  STATIC_REQUIRE_FALSE(dims_from<float, int>);
  STATIC_REQUIRE_FALSE(grid_from<std::size_t>);
  STATIC_REQUIRE_FALSE(grid_from<long>);
  // dims::checked takes 64-bit values and refuses, at run time, what does not fit 32 bits.
  STATIC_REQUIRE(std::is_same_v<decltype(cudrv::dims::checked(std::size_t{1})), cudrv::dims>);
  const std::size_t n = (std::size_t{1} << 33) + 255;
  CHECK(cudrv::dims::checked(n / 256, 2) == cudrv::dims(33554432u, 2u, 1u));
  CHECK(cudrv::dims::checked(0xFFFFFFFFull).x == 0xFFFFFFFFu);
  auto e = catch_as<cudrv::invalid_argument_error>([&] { (void)cudrv::dims::checked(1, 1, n); });
  REQUIRE(e);
  CHECK(contains(e->what(), "extent z = " + std::to_string(n)));
}

TEST_CASE("typed kernels: arity and parameter types are part of the type", "[loading]") {
  using saxpy_t = cudrv::typed_kernel_ref<void(float, const float*, float*, std::size_t)>;
  STATIC_REQUIRE(saxpy_t::arity == 4);
  STATIC_REQUIRE(std::is_convertible_v<saxpy_t, cudrv::kernel_ref>);
  STATIC_REQUIRE(std::is_base_of_v<cudrv::kernel_base, saxpy_t>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<saxpy_t>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<cudrv::kernel_ref>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<cudrv::kernel_ref, std::nullptr_t>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<cudrv::library>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<cudrv::library>);
  STATIC_REQUIRE(std::is_convertible_v<cudrv::library&, cudrv::library_ref>);
  auto k = saxpy_t::from_native_handle(reinterpret_cast<CUkernel>(std::uintptr_t{0x1000}));
  CHECK(k.native_handle() == reinterpret_cast<CUkernel>(std::uintptr_t{0x1000}));
  CHECK(k.native_function() == reinterpret_cast<CUfunction>(k.native_handle()));
  CHECK(k.cached_signature() == nullptr);
}

TEST_CASE("launch refuses dynamic shared memory beyond 32 bits before the driver", "[loading][driverless]") {
  CUDRV_REQUIRE_DRIVERLESS();
  cudrv::stream_ref legacy = cudrv::stream_ref::legacy_default();
  auto k = cudrv::typed_kernel_ref<void(int)>::from_native_handle(reinterpret_cast<CUkernel>(std::uintptr_t{0x1000}));
  cudrv::launch_config too_much_shared{.dynamic_shared_memory = std::size_t(1) << 33};
  auto e = require_error<cudrv::launch_error>([&] { cudrv::launch(legacy, too_much_shared, k, 1); });
  CHECK(e.source() == cudrv::error_source::cudrv);
  CHECK(contains(e.what(), "8589934592 bytes of dynamic shared memory"));
}

namespace {
// Whether library::from_file accepts a path followed by arguments of types A.
template <class... A>
concept loads_file = requires(A&&... a) {
  cudrv::library::from_file(std::string(), std::forward<A>(a)...);
};
// Whether the constructor accepts an object_code followed by arguments of types A.
template <class... A>
constexpr bool constructs = std::is_constructible_v<cudrv::library, const cudrv::object_code&, A...>;
}  // namespace

TEST_CASE("library::from_file takes the targets the constructors take", "[loading][driverless]") {
  // Every target of a constructor is a target of from_file, with and without options.
  STATIC_REQUIRE(constructs<> && loads_file<>);
  STATIC_REQUIRE(constructs<cudrv::jit_options> && loads_file<cudrv::jit_options>);
  STATIC_REQUIRE(constructs<cudrv::context_ref> && loads_file<cudrv::context_ref>);
  STATIC_REQUIRE(constructs<cudrv::context&> && loads_file<cudrv::context&>);
  STATIC_REQUIRE(constructs<const cudrv::device&> && loads_file<const cudrv::device&>);
  STATIC_REQUIRE(constructs<cudrv::device, cudrv::jit_options> && loads_file<cudrv::device, cudrv::jit_options>);
  STATIC_REQUIRE(constructs<cudrv::context_ref, cudrv::jit_options> &&
                 loads_file<cudrv::context_ref, cudrv::jit_options>);
  // A temporary context is refused by both: it would be destroyed before the library loaded into it.
  STATIC_REQUIRE_FALSE(constructs<cudrv::context>);
  STATIC_REQUIRE_FALSE(loads_file<cudrv::context>);
  STATIC_REQUIRE_FALSE(loads_file<cudrv::context, cudrv::jit_options>);
  STATIC_REQUIRE_FALSE(std::is_constructible_v<cudrv::library, const cudrv::compile_result&, cudrv::context>);

  CUDRV_REQUIRE_DRIVERLESS();
  // The file is read before any context is touched: a missing file names itself with each target.
  const cudrv::context_ref ctx(reinterpret_cast<CUcontext>(std::uintptr_t{0x1000}));
  auto missing = require_error<cudrv::invalid_argument_error>(
      [&] { (void)cudrv::library::from_file("/nonexistent/dir/k.cubin", ctx); });
  CHECK(contains(missing.what(), "/nonexistent/dir/k.cubin"));
  // A valid file gets as far as the driver, which is missing.
  const std::string path = temp_path("k.cubin");
  nvrtc_cubin().write_to_file(path);
  CHECK(catch_as<cudrv::driver_unavailable_error>([&] { (void)cudrv::library::from_file(path, ctx); }));
  CHECK(catch_as<cudrv::driver_unavailable_error>([&] { (void)cudrv::library::from_file(path); }));
  std::remove(path.c_str());
}
