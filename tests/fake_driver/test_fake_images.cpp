// Images cudrv refuses never reach the driver: against the fake driver, which counts every
// cuLibraryLoadData call, a truncated or corrupted PTX, cubin or fatbin throws invalid_image_error
// and leaves the count unchanged, while a whole image is handed over once.
#include <catch2/catch.hpp>

#include <cudrv/cudrv.hpp>
#include <cudrv/rtc.hpp>

#include <string>

#include "fake_driver/fake_hooks.hpp"
#include "support/test_support.hpp"

using cudrv::test::catch_as;
using cudrv::test::contains;

namespace {

const std::string& scale_ptx() {
  static const std::string bytes =
      cudrv::program("img.cu", "extern \"C\" __global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }")
          .compile(cudrv::code_kind::ptx, {.arch = "sm_90"})
          .code.bytes();
  return bytes;
}

const std::string& scale_cubin() {
  static const std::string bytes =
      cudrv::program("img.cu", "extern \"C\" __global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }")
          .compile(cudrv::code_kind::cubin, {.arch = "sm_90"})
          .code.bytes();
  return bytes;
}

}  // namespace

TEST_CASE("fake driver: a refused image never reaches cuLibraryLoadData", "[fake-driver][image_check]") {
  cudrv::test::fake_probe fake;
  const long long before = fake.counter("library_load_calls");
  const std::string& cubin = scale_cubin();
  std::string wrong_machine = cubin;
  wrong_machine[18] = 62;
  std::string fatbin("\x50\xed\x55\xba\x01\x00\x10\x00", 8);
  fatbin += std::string("\x00\x01\x00\x00\x00\x00\x00\x00", 8);  // announces 256 bytes of body, has 32
  fatbin += std::string(32, '\0');
  const struct {
    cudrv::code_kind kind;
    std::string bytes;
    const char* says;
  } bad[] = {
      {cudrv::code_kind::cubin, cubin.substr(0, cubin.size() - 1), "exceeds the image size"},
      {cudrv::code_kind::cubin, cubin.substr(0, 63), "fewer than the 64"},
      {cudrv::code_kind::cubin, wrong_machine, "ELF machine 62"},
      {cudrv::code_kind::cubin, scale_ptx(), "not an ELF file"},
      {cudrv::code_kind::fatbin, fatbin, "body of 256 bytes exceeds the image size 48"},
      {cudrv::code_kind::fatbin, cubin, "fatbin magic"},
      {cudrv::code_kind::ptx, cubin, "is it a binary image?"},
      {cudrv::code_kind::ptx, "\x01\x02 .version 8.0", "byte 0x01 at offset 0 is not text"},
      {cudrv::code_kind::ptx, scale_ptx() + std::string("\0garbage", 8), "NUL byte"},
  };
  for (const auto& b : bad) {
    INFO(cudrv::to_string(b.kind) << ": " << b.says);
    auto e = catch_as<cudrv::invalid_image_error>(
        [&] { cudrv::library lib(cudrv::object_code(b.kind, b.bytes, "bad.img")); });
    REQUIRE(e.has_value());
    CHECK(contains(e->what(), b.says));
    CHECK(contains(e->what(), "'bad.img' is malformed"));
    // As a load_error too: code that catches the driver's refusals catches these.
    CHECK(catch_as<cudrv::load_error>([&] { cudrv::library lib(cudrv::object_code(b.kind, b.bytes)); }));
  }
  CHECK(fake.counter("library_load_calls") == before);

  // A whole image reaches the driver, once.
  cudrv::library lib(cudrv::object_code(cudrv::code_kind::ptx, scale_ptx(), "scale.ptx"));
  CHECK(fake.counter("library_load_calls") == before + 1);
  CHECK(lib.get_kernel("scale").parameter_count() == 2);
}
