/// @file resource_buffer.hpp
/// @brief @ref cudrv::resource_buffer : memory allocated through any @ref cudrv::memory_resource, owned
/// together with its size, its resource and the stream it is freed on (cuda.core's `Buffer`).
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <span>
#include <utility>

#include "cudrv/detail/exchange.hpp"
#include "cudrv/memory_location.hpp"
#include "cudrv/memory_resource.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

namespace detail {
/// @brief Throws invalid_argument_error unless @p bytes at @p address of memory described by @p props
/// can be viewed as elements of @p element_size bytes aligned to @p element_alignment, by the device
/// (@p host false) or the host (internal).
void check_resource_buffer_view(const char* api, const void* address, std::size_t bytes, const memory_properties& props,
                                bool host, std::size_t element_size, std::size_t element_alignment);
}  // namespace detail

/// @brief Memory from a @ref memory_resource, owned together with its size and alignment, the resource
/// that frees it and, for a stream-ordered allocation, the stream it is freed on. Move-only. What
/// cuda.core's `MemoryResource.allocate` returns; the typed owners (@ref device_buffer, ...) remain the
/// way to allocate when the kind of memory is known at compile time.
///
/// - Allocated synchronously (`resource_buffer(mr, bytes)`: `mr.allocate`), it is freed with
///   `mr.deallocate`; allocated on a stream (`resource_buffer(mr, bytes, s)`: `mr.allocate_async`), it
///   is freed with `mr.deallocate_async` on that stream, after the work queued there. @ref reset(stream_ref)
///   frees early, ordered on another stream; @ref set_stream moves a stream-ordered buffer to another
///   stream.
/// - What the memory is (@ref properties gives its device, device- and host-accessible) is the resource's
///   description, taken when the buffer is allocated: no pointer-attribute query.
/// - @ref as gives a typed @ref device_span of the memory, @ref as_host a `std::span` for memory the
///   host can access; both from lvalues only. `cudrv::to_dlpack(std::move(buf))` (`<cudrv/dlpack.hpp>`)
///   exports it.
///
/// **Lifetimes.** The buffer refers to its resource; it does not own it. The resource must outlive the
/// buffer, as a `std::pmr` container's resource must, so a temporary resource is refused. A resource
/// destroyed first is not called again: the buffer frees nothing when it goes (the resource's
/// destructor has told the destruction handler how many buffers were left, and a resource that frees
/// everything it handed out on destruction, such as @ref virtual_memory_resource, has freed them).
/// A `cudrv::stream` the buffer is freed on is kept alive until then, as for @ref device_buffer; a
/// stream cudrv does not own must outlive the buffer.
///
/// A zero-byte request holds nothing (the resource returns null for it): such a buffer is empty, like a
/// default-constructed one.
/// @code
/// cudrv::memory_pool pool(dev);
/// cudrv::pool_memory_resource mr(pool);
/// cudrv::stream s(dev);
/// cudrv::resource_buffer buf(mr, n * sizeof(float), s);   // cuMemAllocFromPoolAsync on s
/// cudrv::fill(buf.as<float>(), 1.0f, s);
/// kernel_taking_floats(s, buf.as<float>());
/// buf.reset(other);                                        // cuMemFreeAsync, ordered on other
/// @endcode
class resource_buffer {
 public:
  /// @brief What @ref release hands off and @ref from_native_handle adopts: memory from a resource's
  /// `allocate` or `allocate_async`, with the size and alignment it was asked with (what its
  /// `deallocate` needs back).
  struct allocation {
    void* pointer = nullptr;                                     ///< The memory, null for none.
    std::size_t bytes = 0;                                       ///< Its size in bytes.
    std::size_t alignment = memory_resource::default_alignment;  ///< The alignment it was allocated with.
  };

  /// @brief Holds nothing.
  resource_buffer() noexcept = default;
  /// @brief Allocates @p bytes aligned to @p alignment from @p mr synchronously (`mr.allocate`): usable
  /// when the constructor returns, freed with `mr.deallocate`.
  /// @throws invalid_argument_error as `memory_resource::allocate`; whatever @p mr throws
  resource_buffer(memory_resource& mr, std::size_t bytes, std::size_t alignment = memory_resource::default_alignment);
  /// @brief Allocates @p bytes from @p mr on @p s (`mr.allocate_async`), freed with
  /// `mr.deallocate_async` on @p s.
  /// @throws invalid_argument_error for a moved-from stream or the per-thread default stream (a different
  /// stream on every thread); as `memory_resource::allocate_async`; whatever @p mr throws
  resource_buffer(memory_resource& mr, std::size_t bytes, stream_ref s)
      : resource_buffer(mr, bytes, memory_resource::default_alignment, s) {}
  /// @brief As the other stream-ordered form, aligned to @p alignment.
  resource_buffer(memory_resource& mr, std::size_t bytes, std::size_t alignment, stream_ref s);

  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary resource would be destroyed before the memory is freed through it.
  resource_buffer(memory_resource&&, std::size_t, std::size_t = memory_resource::default_alignment) = delete;
  /// @brief Refused: the temporary resource would be destroyed before the memory is freed through it.
  resource_buffer(memory_resource&&, std::size_t, stream_ref) = delete;
  /// @brief Refused: the temporary resource would be destroyed before the memory is freed through it.
  resource_buffer(memory_resource&&, std::size_t, std::size_t, stream_ref) = delete;
  /// @brief Refused: the temporary stream would be destroyed before the memory is freed on it.
  resource_buffer(memory_resource&, std::size_t, cudrv::stream&&) = delete;
  /// @brief Refused: the temporary stream would be destroyed before the memory is freed on it.
  resource_buffer(memory_resource&, std::size_t, std::size_t, cudrv::stream&&) = delete;
  /// @}

  /// @name Refused forms (deleted: these calls do not compile)
  /// @{
  resource_buffer(const resource_buffer&) = delete;
  resource_buffer& operator=(const resource_buffer&) = delete;
  /// @}
  /// @brief Takes over @p other's memory; @p other becomes empty.
  resource_buffer(resource_buffer&& other) noexcept
      : memory_(cudrv::detail::exchange(other.memory_, allocation{nullptr, 0, 0})),
        link_(cudrv::detail::exchange(other.link_, nullptr)),
        stream_(cudrv::detail::exchange(other.stream_, nullptr)),
        stream_owner_(cudrv::detail::exchange(other.stream_owner_, nullptr)),
        properties_(cudrv::detail::exchange(other.properties_, {})) {}
  /// @brief Frees the held memory, then takes over @p other's.
  resource_buffer& operator=(resource_buffer&& other) noexcept {
    if (this != &other) {
      reset();
      memory_ = cudrv::detail::exchange(other.memory_, allocation{nullptr, 0, 0});
      link_ = cudrv::detail::exchange(other.link_, nullptr);
      stream_ = cudrv::detail::exchange(other.stream_, nullptr);
      stream_owner_ = cudrv::detail::exchange(other.stream_owner_, nullptr);
      properties_ = cudrv::detail::exchange(other.properties_, {});
    }
    return *this;
  }
  /// @brief Frees the memory through its resource, on its stream for a stream-ordered buffer (errors go
  /// to the destruction handler; nothing is freed when the resource was destroyed first).
  ~resource_buffer() { reset(); }

  /// @brief Adopts @p memory, allocated synchronously from @p mr (`mr.allocate`); it will be freed with
  /// `mr.deallocate`.
  /// @throws invalid_argument_error when @p memory has a null pointer but bytes, bytes but no pointer, or
  /// an alignment that is not a power of two (the caller keeps the memory); `std::bad_alloc` when the
  /// resource's record of its buffers cannot be made (the memory is freed through @p mr first, as the
  /// constructors free what they allocated)
  [[nodiscard]] static resource_buffer from_native_handle(memory_resource& mr, allocation memory);
  /// @brief Adopts @p memory, allocated from @p mr for work on @p s; it will be freed with
  /// `mr.deallocate_async` on @p s.
  /// @throws invalid_argument_error as the synchronous form, and for a moved-from stream or the
  /// per-thread default stream
  [[nodiscard]] static resource_buffer from_native_handle(memory_resource& mr, allocation memory, stream_ref s);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary resource would be destroyed before the memory is freed through it.
  static resource_buffer from_native_handle(memory_resource&&, allocation) = delete;
  /// @brief Refused: the temporary resource would be destroyed before the memory is freed through it.
  static resource_buffer from_native_handle(memory_resource&&, allocation, stream_ref) = delete;
  /// @brief Refused: the temporary stream would be destroyed before the memory is freed on it.
  static resource_buffer from_native_handle(memory_resource&, allocation, cudrv::stream&&) = delete;
  /// @}

  /// @brief Gives up ownership: the caller frees the returned memory through the resource (with the
  /// returned size and alignment). The buffer becomes empty and drops its references.
  [[nodiscard]] allocation release() noexcept;
  /// @brief Frees the memory now, as destruction would; the buffer becomes empty.
  void reset() noexcept;
  /// @brief Frees the memory now, ordered on @p s (cuda.core's `Buffer.close(stream)`):
  /// `mr.deallocate_async` on @p s, after the work queued there so far, whichever way the memory was
  /// allocated. The buffer becomes empty (also when the resource was destroyed first: nothing is freed).
  /// @throws invalid_argument_error for a moved-from stream (the buffer is left as it was)
  void reset(stream_ref s);

  /// @brief The memory, as the resource returned it: a host pointer for host-accessible memory, else a
  /// device address. Null when empty.
  [[nodiscard]] void* get() const noexcept { return memory_.pointer; }
  /// @brief The address as a `CUdeviceptr` (0 when empty).
  [[nodiscard]] CUdeviceptr data() const noexcept { return reinterpret_cast<CUdeviceptr>(memory_.pointer); }
  /// @brief The number of bytes.
  [[nodiscard]] std::size_t size() const noexcept { return memory_.bytes; }
  /// @brief The number of bytes (as @ref size; the name typed buffers use for it).
  [[nodiscard]] std::size_t size_bytes() const noexcept { return memory_.bytes; }
  /// @brief The alignment the memory was allocated with.
  [[nodiscard]] std::size_t alignment() const noexcept { return memory_.alignment; }
  /// @brief Whether the buffer holds no byte.
  [[nodiscard]] bool empty() const noexcept { return memory_.bytes == 0; }
  /// @brief Whether the buffer holds memory (false when empty, moved-from, released or reset).
  [[nodiscard]] explicit operator bool() const noexcept { return memory_.pointer != nullptr; }

  /// @brief The resource the memory is freed through.
  /// @throws invalid_argument_error for an empty buffer, or when the resource was destroyed
  [[nodiscard]] memory_resource& resource() const;
  /// @brief Whether the memory was allocated (or adopted) for a stream and is freed on one.
  [[nodiscard]] bool is_stream_ordered() const noexcept { return stream_ != nullptr; }
  /// @brief The stream the memory will be freed on.
  /// @throws invalid_argument_error for a synchronously allocated or an empty buffer
  [[nodiscard]] stream_ref stream() const;
  /// @brief Makes @p s the stream the memory is freed on, and makes @p s wait for the work queued on the
  /// previous stream so far, so that the free is ordered after it. A `cudrv::stream` is kept alive until
  /// then; a stream cudrv does not own must outlive the buffer.
  /// @throws invalid_argument_error for a synchronously allocated or empty buffer, a moved-from stream or
  /// the per-thread default stream
  void set_stream(stream_ref s);
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary stream would be destroyed before the memory is freed on it.
  void set_stream(cudrv::stream&&) = delete;
  /// @}
  /// @brief What the memory is, as the resource described it when the buffer was allocated
  /// (`mr.properties()`): its device, and whether kernels and the host may access it. An empty buffer
  /// gives `{-1, false, false}`.
  [[nodiscard]] memory_properties properties() const noexcept { return properties_; }

  /// @brief The memory as `size() / sizeof(T)` elements of @p T, for copies, fills and kernels.
  /// @throws invalid_argument_error when the memory is not device-accessible, its size is not a
  /// multiple of `sizeof(T)`, or its address is not aligned for @p T
  template <class T>
  [[nodiscard]] device_span<T> as() & {
    check_view("cudrv::resource_buffer::as", false, sizeof(T), alignof(T));
    return {data(), memory_.bytes / sizeof(T)};
  }
  /// @brief A read-only typed view (see the other overload).
  template <class T>
  [[nodiscard]] device_span<const T> as() const& {
    check_view("cudrv::resource_buffer::as", false, sizeof(T), alignof(T));
    return {data(), memory_.bytes / sizeof(T)};
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view would outlive the temporary buffer's memory.
  template <class T>
  device_span<const T> as() const&& = delete;
  /// @}
  /// @brief The memory as elements of @p T the host may read and write.
  /// @throws invalid_argument_error when the memory is not host-accessible, or as @ref as
  template <class T>
  [[nodiscard]] std::span<T> as_host() & {
    check_view("cudrv::resource_buffer::as_host", true, sizeof(T), alignof(T));
    return {static_cast<T*>(memory_.pointer), memory_.bytes / sizeof(T)};
  }
  /// @brief A read-only host view (see the other overload).
  template <class T>
  [[nodiscard]] std::span<const T> as_host() const& {
    check_view("cudrv::resource_buffer::as_host", true, sizeof(T), alignof(T));
    return {static_cast<const T*>(memory_.pointer), memory_.bytes / sizeof(T)};
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the view would outlive the temporary buffer's memory.
  template <class T>
  std::span<const T> as_host() const&& = delete;
  /// @}

 private:
  void check_view(const char* api, bool host, std::size_t element_size, std::size_t element_alignment) const {
    detail::check_resource_buffer_view(api, memory_.pointer, memory_.bytes, properties_, host, element_size,
                                       element_alignment);
  }
  // Holds memory from mr (a null pointer: nothing); takes its link, and a reference on s's bookkeeping
  // when s is not null. Frees the memory (on s, or synchronously) and rethrows when that fails.
  void adopt(memory_resource& mr, allocation memory, CUstream s, detail::stream_state* owner);
  // What the buffer held, with its references.
  struct held {
    allocation memory;
    detail::resource_link* link;
    CUstream stream;
    detail::stream_state* stream_owner;
  };
  // Empties the buffer and returns what it held; the caller drops the references.
  held take() noexcept;

  allocation memory_{nullptr, 0, 0};
  detail::resource_link* link_ = nullptr;         // the resource (counted; null when empty)
  CUstream stream_ = nullptr;                     // the stream it is freed on; null when synchronous
  detail::stream_state* stream_owner_ = nullptr;  // that stream's bookkeeping when cudrv owns it (counted)
  memory_properties properties_{};
};

}  // namespace cudrv
