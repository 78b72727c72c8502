// libFuzzer target (issue 36: inspect): device code as cudrv::inspect and cudrv-query --inspect read it.
//
// Input: one kind byte (0 PTX, 1 cubin, 2 fatbin, 3 host ELF object; taken modulo 4) and the bytes. Each
// input goes through cudrv::inspect, which must either return or throw invalid_image_error (never
// another exception, never a read outside the bytes: the sanitizers check), and whose results must be
// consistent: every kernel named, a compressed image's stored size within the bytes given.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>

#include <cudrv/code_inspection.hpp>
#include <cudrv/error.hpp>

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_inspect: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  static constexpr cudrv::code_kind kinds[] = {cudrv::code_kind::ptx, cudrv::code_kind::cubin, cudrv::code_kind::fatbin,
                                               cudrv::code_kind::object};
  const cudrv::code_kind kind = kinds[data[0] % 4];
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  (void)cudrv::detect_code_kind(bytes);
  try {
    const cudrv::code_inspection r = cudrv::inspect(cudrv::object_code(kind, bytes, "fuzz"));
    for (const cudrv::code_image& image : r.images) {
      if (image.stored_bytes > bytes.size()) {
        fail("an image is larger than the input");
      }
      for (const cudrv::kernel_resources& k : image.kernels) {
        if (k.name.empty() || k.demangled_name.empty()) {
          fail("a kernel without a name");
        }
      }
    }
  } catch (const cudrv::invalid_image_error&) {
    // refused, with a message: what hostile bytes should get
  } catch (const std::bad_alloc&) {
    fail("out of memory: a size in the input was trusted");
  }
  return 0;
}
