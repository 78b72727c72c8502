// The argument checks and default stream-ordered behaviour of cudrv::memory_resource.
#include "cudrv/memory_resource.hpp"

#include <string>

#include "cudrv/error.hpp"

namespace cudrv {

namespace {
void check_alignment(std::size_t alignment, const char* api) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) [[unlikely]] {
    throw invalid_argument_error(api, "the alignment " + std::to_string(alignment) + " is not a power of two");
  }
}
}  // namespace

void* memory_resource::allocate(std::size_t bytes, std::size_t alignment) {
  check_alignment(alignment, "cudrv::memory_resource::allocate");
  return bytes == 0 ? nullptr : do_allocate(bytes, alignment);
}

void memory_resource::deallocate(void* ptr, std::size_t bytes, std::size_t alignment) noexcept {
  if (ptr != nullptr) {
    do_deallocate(ptr, bytes, alignment);
  }
}

void* memory_resource::allocate_async(std::size_t bytes, std::size_t alignment, stream_ref s) {
  check_alignment(alignment, "cudrv::memory_resource::allocate_async");
  return bytes == 0 ? nullptr : do_allocate_async(bytes, alignment, s);
}

void memory_resource::deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment, stream_ref s) noexcept {
  if (ptr != nullptr) {
    do_deallocate_async(ptr, bytes, alignment, s);
  }
}

void* memory_resource::do_allocate_async(std::size_t bytes, std::size_t alignment, stream_ref /*s*/) {
  return do_allocate(bytes, alignment);
}

void memory_resource::do_deallocate_async(void* ptr, std::size_t bytes, std::size_t alignment, stream_ref s) noexcept {
  try {
    s.synchronize();
  } catch (const host_callback_error& e) {
    // The stream did complete; only a host callable on it failed. Report that and free the memory.
    get_destruction_error_handler()(e);
  } catch (const error& e) {
    get_destruction_error_handler()(e);
    return;
  } catch (...) {
    return;
  }
  do_deallocate(ptr, bytes, alignment);
}

bool memory_resource::do_is_equal(const memory_resource& /*other*/) const noexcept { return false; }

}  // namespace cudrv
