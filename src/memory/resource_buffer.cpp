// cudrv::resource_buffer: memory from a memory_resource, freed through it (on its stream when it was
// allocated stream-ordered). What it holds of the resource is a counted link (resource_link.hpp),
// which the resource clears when it is destroyed.
#include "cudrv/resource_buffer.hpp"

#include <cstdint>
#include <string>

#include "cudrv/error.hpp"
#include "memory/memory_support.hpp"
#include "memory/resource_link.hpp"
#include "streams/stream_support.hpp"

namespace cudrv {

namespace detail {

void check_resource_buffer_view(const char* api, const void* address, std::size_t bytes, const memory_properties& props,
                                bool host, std::size_t element_size, std::size_t element_alignment) {
  if (address == nullptr) {
    throw invalid_argument_error(api, "the buffer holds no memory (empty, moved-from, released or reset)");
  }
  if (host ? !props.host_accessible : !props.device_accessible) {
    throw invalid_argument_error(api, std::string("the memory is not ") + (host ? "host" : "device") +
                                          "-accessible (its resource describes it as " +
                                          (props.device_accessible ? "device-accessible" : "host-only") + ")");
  }
  if (bytes % element_size != 0) {
    throw invalid_argument_error(api, "the buffer's " + std::to_string(bytes) + " bytes are not a whole number of " +
                                          std::to_string(element_size) + "-byte elements");
  }
  if (reinterpret_cast<std::uintptr_t>(address) % element_alignment != 0) {
    throw invalid_argument_error(api, "the address " + format_address(reinterpret_cast<std::uintptr_t>(address)) +
                                          " is not aligned to the element's " + std::to_string(element_alignment) +
                                          " bytes");
  }
}

}  // namespace detail

namespace {

// A stream a buffer may be freed on later: not moved-from, and not the per-thread default stream,
// which names a different stream on every thread.
void require_buffer_stream(CUstream s, const char* api) {
  detail::require_stream(s, api);
  if (s == CU_STREAM_PER_THREAD) {
    throw invalid_argument_error(api, "a resource_buffer cannot be freed on the per-thread default stream, which is "
                                      "a different stream on every thread; use a cudrv::stream or the legacy "
                                      "default stream");
  }
}

void require_adoptable(const resource_buffer::allocation& memory, const char* api) {
  if ((memory.pointer == nullptr) != (memory.bytes == 0)) {
    throw invalid_argument_error(api,
                                 memory.pointer == nullptr
                                     ? "the allocation has " + std::to_string(memory.bytes) + " bytes but no pointer"
                                     : std::string("the allocation has a pointer but 0 bytes (a resource returns "
                                                   "null for 0 bytes)"));
  }
  if (memory.alignment == 0 || (memory.alignment & (memory.alignment - 1)) != 0) {
    throw invalid_argument_error(api, "the alignment " + std::to_string(memory.alignment) + " is not a power of two");
  }
}

}  // namespace

void resource_buffer::adopt(memory_resource& mr, allocation memory, CUstream s, detail::stream_state* owner) {
  if (memory.pointer == nullptr) {
    return;  // a zero-byte request: the buffer stays empty
  }
  detail::resource_link* link = nullptr;
  try {
    link = detail::acquire_resource_link(mr, mr.link_);
  } catch (...) {
    if (s != nullptr) {
      mr.deallocate_async(memory.pointer, memory.bytes, memory.alignment, stream_ref(s));
    } else {
      mr.deallocate(memory.pointer, memory.bytes, memory.alignment);
    }
    throw;
  }
  memory_ = memory;
  link_ = link;
  stream_ = s;
  if (s != nullptr) {
    detail::retain_stream(owner);
    stream_owner_ = owner;
  }
  properties_ = mr.properties();
}

resource_buffer::resource_buffer(memory_resource& mr, std::size_t bytes, std::size_t alignment) {
  adopt(mr, {mr.allocate(bytes, alignment), bytes, alignment}, nullptr, nullptr);
}

resource_buffer::resource_buffer(memory_resource& mr, std::size_t bytes, std::size_t alignment, stream_ref s) {
  require_buffer_stream(s.native_handle(), "cudrv::resource_buffer");
  adopt(mr, {mr.allocate_async(bytes, alignment, s), bytes, alignment}, s.native_handle(), s.state());
}

resource_buffer resource_buffer::from_native_handle(memory_resource& mr, allocation memory) {
  require_adoptable(memory, "cudrv::resource_buffer::from_native_handle");
  resource_buffer b;
  b.adopt(mr, memory, nullptr, nullptr);
  return b;
}

resource_buffer resource_buffer::from_native_handle(memory_resource& mr, allocation memory, stream_ref s) {
  require_adoptable(memory, "cudrv::resource_buffer::from_native_handle");
  require_buffer_stream(s.native_handle(), "cudrv::resource_buffer::from_native_handle");
  resource_buffer b;
  b.adopt(mr, memory, s.native_handle(), s.state());
  return b;
}

resource_buffer::allocation resource_buffer::release() noexcept {
  const held h = take();
  detail::release_resource_link(h.link);
  detail::release_stream(h.stream_owner);
  return h.memory;
}

// Empties the buffer; what it held, with its references still taken (the caller drops them).
resource_buffer::held resource_buffer::take() noexcept {
  held h{std::exchange(memory_, allocation{nullptr, 0, 0}), std::exchange(link_, nullptr),
         std::exchange(stream_, nullptr), std::exchange(stream_owner_, nullptr)};
  properties_ = {};
  return h;
}

void resource_buffer::reset() noexcept {
  const held h = take();
  if (h.memory.pointer != nullptr) {
    // Null when the resource was destroyed first: its destructor reported the buffers it left.
    memory_resource* mr = h.link->resource.load(std::memory_order_acquire);
    if (mr != nullptr) {
      if (h.stream != nullptr) {
        mr->deallocate_async(h.memory.pointer, h.memory.bytes, h.memory.alignment, stream_ref(h.stream));
      } else {
        mr->deallocate(h.memory.pointer, h.memory.bytes, h.memory.alignment);
      }
    }
  }
  // The references go after the free: the stream and the link stay valid while it is queued.
  detail::release_resource_link(h.link);
  detail::release_stream(h.stream_owner);
}

void resource_buffer::reset(stream_ref s) {
  detail::require_stream(s.native_handle(), "cudrv::resource_buffer::reset");
  const held h = take();
  if (h.memory.pointer != nullptr) {
    memory_resource* mr = h.link->resource.load(std::memory_order_acquire);
    if (mr != nullptr) {
      mr->deallocate_async(h.memory.pointer, h.memory.bytes, h.memory.alignment, s);
    }
  }
  detail::release_resource_link(h.link);
  detail::release_stream(h.stream_owner);
}

memory_resource& resource_buffer::resource() const {
  if (link_ == nullptr) {
    throw invalid_argument_error("cudrv::resource_buffer::resource",
                                 "the buffer holds no memory (empty, moved-from, released or reset)");
  }
  memory_resource* mr = link_->resource.load(std::memory_order_acquire);
  if (mr == nullptr) {
    throw invalid_argument_error("cudrv::resource_buffer::resource",
                                 "the buffer's memory_resource was destroyed before it (its memory will not be freed)");
  }
  return *mr;
}

stream_ref resource_buffer::stream() const {
  if (stream_ == nullptr) {
    throw invalid_argument_error("cudrv::resource_buffer::stream",
                                 memory_.pointer == nullptr
                                     ? "the buffer holds no memory (empty, moved-from, released or reset)"
                                     : "the buffer was allocated synchronously and is freed on no stream");
  }
  return stream_ref(stream_);
}

void resource_buffer::set_stream(stream_ref s) {
  constexpr const char* api = "cudrv::resource_buffer::set_stream";
  (void)stream();  // throws for a synchronous or empty buffer
  require_buffer_stream(s.native_handle(), api);
  if (s.native_handle() == stream_) {
    return;
  }
  // Order the free, which will be queued on s, after the work queued on the previous stream so far.
  s.wait(stream_ref(stream_));
  detail::retain_stream(s.state());
  detail::release_stream(std::exchange(stream_owner_, s.state()));
  stream_ = s.native_handle();
}

}  // namespace cudrv
