// The argument checks and default stream-ordered behaviour of cudrv::memory_resource, and the record
// of the resource_buffer objects allocated from a resource (resource_link.hpp).
#include "cudrv/memory_resource.hpp"

#include <atomic>
#include <new>
#include <string>

#include "cudrv/error.hpp"
#include "memory/resource_link.hpp"

namespace cudrv {

namespace {
void check_alignment(std::size_t alignment, const char* api) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) [[unlikely]] {
    throw invalid_argument_error(api, "the alignment " + std::to_string(alignment) + " is not a power of two");
  }
}
}  // namespace

namespace detail {

static_assert(alignof(resource_link*) >= std::atomic_ref<resource_link*>::required_alignment);

resource_link* acquire_resource_link(memory_resource& mr, resource_link*& slot) {
  std::atomic_ref<resource_link*> shared(slot);
  resource_link* link = shared.load(std::memory_order_acquire);
  if (link == nullptr) {
    // Made once per resource: two threads allocating their first buffers at once agree on one link.
    auto* made = new resource_link(&mr);
    if (shared.compare_exchange_strong(link, made, std::memory_order_acq_rel, std::memory_order_acquire)) {
      link = made;
    } else {
      delete made;  // the other thread's link won; link holds it now
    }
  }
  link->references.fetch_add(1, std::memory_order_relaxed);
  return link;
}

void release_resource_link(resource_link* link) noexcept {
  if (link != nullptr && link->references.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    delete link;
  }
}

}  // namespace detail

memory_resource::~memory_resource() {
  detail::resource_link* link = std::atomic_ref<detail::resource_link*>(link_).load(std::memory_order_acquire);
  if (link == nullptr) {
    return;
  }
  link->resource.store(nullptr, std::memory_order_release);
  // The buffers still allocated from this resource: each holds one reference, the resource the last.
  const std::size_t left = link->references.load(std::memory_order_acquire) - 1;
  detail::release_resource_link(link);
  if (left == 0) {
    return;
  }
  try {
    get_destruction_error_handler()(
        error(error_source::cudrv, CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
              error_description(CUDA_ERROR_ILLEGAL_STATE), "cudrv::memory_resource::~memory_resource",
              "the resource was destroyed while " + std::to_string(left) + " resource_buffer" +
                  (left == 1 ? " allocated from it is" : "s allocated from it are") +
                  " alive; their memory will not be freed through it (destroy buffers before their resource)"));
  } catch (...) {
    // Building the message ran out of memory: nothing more can be said.
  }
}

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
