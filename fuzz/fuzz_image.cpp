// libFuzzer target: device-code images, as a user hands them to cudrv::library or cudrv::linker::add.
//
// Input: one kind byte (0 PTX, 1 cubin, 2 fatbin; taken modulo 3) and the image. Each input goes
// through the checks made before the driver sees an image (detail::image_problem, and
// object_code::validate, which must throw exactly when a problem is found, and only
// invalid_image_error) and through the kernel-layout readers that run on every load
// (detail::read_kernel_layouts), which must never read outside the image.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <cudrv/error.hpp>
#include <cudrv/object_code.hpp>

#include "code/code_metadata.hpp"
#include "code/image_check.hpp"

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_image: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  static constexpr cudrv::code_kind kinds[] = {cudrv::code_kind::ptx, cudrv::code_kind::cubin,
                                               cudrv::code_kind::fatbin};
  const cudrv::code_kind kind = kinds[data[0] % 3];
  const std::string_view image(reinterpret_cast<const char*>(data) + 1, size - 1);

  const std::string problem = cudrv::detail::image_problem(kind, image);
  if (!problem.empty() && problem.rfind(std::string(cudrv::to_string(kind)) + ": ", 0) != 0) {
    fail("a problem message does not start with the kind");
  }
  const cudrv::object_code code(kind, std::string(image), "fuzz");
  try {
    code.validate();
    if (!problem.empty()) {
      fail("validate() accepted an image with a problem");
    }
  } catch (const cudrv::invalid_image_error& e) {
    if (problem.empty() || std::string_view(e.what()).find(problem) == std::string_view::npos) {
      fail("validate() threw without the problem in its message");
    }
  }
  cudrv::detail::kernel_layouts layouts;
  (void)cudrv::detail::read_kernel_layouts(kind, image, layouts);
  return 0;
}
