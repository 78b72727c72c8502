/// @file device_buffer.hpp
/// @brief @ref cudrv::device_buffer : owning device memory, allocated synchronously (cuMemAlloc) or
/// stream-ordered from a pool (cuMemAllocAsync / cuMemAllocFromPoolAsync).
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <type_traits>
#include <utility>

#include "cudrv/context.hpp"
#include "cudrv/detail/exchange.hpp"
#include "cudrv/device.hpp"
#include "cudrv/memory_location.hpp"
#include "cudrv/memory_pool.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

namespace detail {
/// @brief A device ordinal not known yet: found from the allocation's context or stream when asked (internal).
inline constexpr int unresolved_device = -2;

/// @brief The untyped state of a device allocation (internal).
struct device_allocation {
  CUdeviceptr address = 0;
  std::size_t bytes = 0;
  context_token context{};         // synchronous allocations, and those on the legacy default stream
  CUstream stream = nullptr;       // stream-ordered allocations: the stream to free on (never null for them)
  stream_state* owner = nullptr;   // that stream's bookkeeping when cudrv owns it (a counted reference)
  int device = unresolved_device;  // the memory's device, -1 for none (host pools), or unresolved_device
  bool host_accessible = false;    // memory of a host or managed pool

  static device_allocation allocate(CUcontext ctx, std::size_t count, std::size_t element_size);
  static device_allocation allocate_async(CUstream stream, stream_state* owner, CUmemoryPool pool, std::size_t count,
                                          std::size_t element_size);
  // As allocate_async, but refuses a null (moved-from) pool instead of using the current pool, and
  // records what the pool's description says about its memory.
  static device_allocation allocate_from_pool(CUstream stream, stream_state* owner, const memory_pool_base& pool,
                                              std::size_t count, std::size_t element_size);
  static device_allocation adopt(CUdeviceptr address, std::size_t bytes, CUcontext ctx);
  static device_allocation adopt_async(CUdeviceptr address, std::size_t bytes, CUstream stream, stream_state* owner);
  // Frees on the allocation's stream or in its context; nothing when its context is gone (reported).
  void free() noexcept;
  // Frees now, ordered after the work queued on s (synchronous allocations: after s completes it).
  void free_on(CUstream s, const char* api);
  // Hands the address over; the stream reference is dropped.
  CUdeviceptr release() noexcept;
  CUcontext owning_context() const;
  void require_stream_ordered(const char* api) const;
  // Checks that the allocation is stream-ordered and that s is not a moved-from stream, then sets it.
  void set_stream(CUstream s, stream_state* owner, const char* api);
  // The memory's device (resolved from the context or stream when it was not recorded) and access;
  // all false and -1 for an empty (moved-from, released or freed) allocation.
  memory_properties properties() const;
};
}  // namespace detail

/// @brief Owning device memory for `size()` elements of @p T, freed when the buffer is destroyed.
/// Move-only; converts to @ref device_span.
///
/// A buffer allocated synchronously is freed with cuMemFree in its context. A stream-ordered buffer
/// belongs to a stream and is freed with cuMemFreeAsync on that stream, so the free is ordered after
/// the work queued there; @ref set_stream moves it to another stream (for instance, the last one
/// that uses it). The elements are not initialised. A zero-element buffer holds no memory.
///
/// Lifetimes are checked, not assumed: a `cudrv::stream` stays alive (as a `CUstream`) until the
/// stream-ordered buffers on it are freed, whatever order the objects are destroyed in; a buffer
/// whose context was destroyed before it (which freed its memory) frees nothing and tells the
/// destruction handler, rather than freeing an address the driver may have handed out again.
/// @code
/// cudrv::device dev(0);
/// cudrv::stream s(dev);
/// cudrv::device_buffer<float> a(dev, n);               // cuMemAlloc in dev's primary context
/// cudrv::device_buffer<float> b(s, n);                 // cuMemAllocAsync on s, from dev's current pool
/// cudrv::copy(b, a, s);
/// cudrv::stream t(dev);
/// b.set_stream(t);                                     // t waits for s; b will be freed on t
/// @endcode
template <class T>
class device_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "device_buffer holds trivially copyable elements");

 public:
  using value_type = T;           ///< The element type.
  using size_type = std::size_t;  ///< Sizes in elements.

  /// @brief Allocates @p count elements synchronously in @p dev's primary context.
  /// @throws out_of_memory_error when the device has too little memory
  device_buffer(const device& dev, std::size_t count)
      : alloc_(detail::device_allocation::allocate(dev.primary_context().native_handle(), count, sizeof(T))) {}
  /// @brief Allocates @p count elements synchronously in @p ctx.
  device_buffer(context_ref ctx, std::size_t count)
      : alloc_(detail::device_allocation::allocate(ctx.native_handle(), count, sizeof(T))) {}
  /// @brief Allocates @p count elements on @p s from the current pool of the stream's device. A
  /// `cudrv::stream` is kept alive (its `CUstream`) until the buffer is freed on it.
  device_buffer(stream_ref s, std::size_t count)
      : alloc_(detail::device_allocation::allocate_async(s.native_handle(), s.state(), nullptr, count, sizeof(T))) {}
  /// @brief Allocates @p count elements on @p s from @p pool.
  /// @throws invalid_argument_error when @p pool or @p s is empty (moved-from)
  device_buffer(memory_pool_ref pool, stream_ref s, std::size_t count)
      : alloc_(detail::device_allocation::allocate_from_pool(s.native_handle(), s.state(), pool, count, sizeof(T))) {}

  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  device_buffer(cudrv::context&&, std::size_t) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  device_buffer(cudrv::primary_context&&, std::size_t) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  device_buffer(cudrv::stream&&, std::size_t) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  device_buffer(cudrv::memory_pool&&, stream_ref, std::size_t) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  device_buffer(memory_pool_ref, cudrv::stream&&, std::size_t) = delete;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  /// @}
  /// @brief Takes over @p other's memory; @p other becomes empty.
  device_buffer(device_buffer&& other) noexcept : alloc_(cudrv::detail::exchange(other.alloc_, {})) {}
  /// @brief Frees the held memory, then takes over @p other's.
  device_buffer& operator=(device_buffer&& other) noexcept {
    if (this != &other) {
      alloc_.free();
      alloc_ = cudrv::detail::exchange(other.alloc_, {});
    }
    return *this;
  }
  /// @brief Frees the memory (errors go to the destruction handler).
  ~device_buffer() { alloc_.free(); }

  /// @brief Adopts memory from cuMemAlloc in @p ctx; it will be freed with cuMemFree.
  [[nodiscard]] static device_buffer from_native_handle(CUdeviceptr address, std::size_t count, context_ref ctx) {
    return device_buffer(detail::device_allocation::adopt(address, count * sizeof(T), ctx.native_handle()));
  }
  /// @brief Adopts stream-ordered memory; it will be freed with cuMemFreeAsync on @p s.
  [[nodiscard]] static device_buffer from_native_handle(CUdeviceptr address, std::size_t count, stream_ref s) {
    return device_buffer(
        detail::device_allocation::adopt_async(address, count * sizeof(T), s.native_handle(), s.state()));
  }
  /// @brief Gives up ownership; the caller must free the returned address.
  [[nodiscard]] CUdeviceptr release() noexcept { return alloc_.release(); }
  /// @brief Frees the memory now (on its stream, for a stream-ordered buffer); the buffer becomes empty.
  void reset() noexcept { alloc_.free(); }
  /// @brief Frees the memory now, ordered on @p s (cuda.core's `Buffer.close(stream)`): after the work
  /// queued on @p s so far; a synchronously allocated buffer waits for @p s to complete it first.
  /// The buffer becomes empty.
  /// @throws invalid_argument_error for a moved-from stream
  void reset(stream_ref s) { alloc_.free_on(s.native_handle(), "cudrv::device_buffer::reset"); }

  /// @brief The device address.
  [[nodiscard]] CUdeviceptr data() const noexcept { return alloc_.address; }
  /// @brief The address as a typed pointer, for kernel arguments.
  [[nodiscard]] T* get() const noexcept { return reinterpret_cast<T*>(alloc_.address); }
  /// @brief The number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return alloc_.bytes / sizeof(T); }
  /// @brief The number of bytes.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return alloc_.bytes; }
  /// @brief Whether the buffer holds no element.
  [[nodiscard]] bool empty() const noexcept { return alloc_.bytes == 0; }
  /// @brief Whether the buffer holds memory (false when empty, moved-from or released).
  [[nodiscard]] explicit operator bool() const noexcept { return alloc_.address != 0; }

  /// @brief A view of all elements.
  [[nodiscard]] device_span<T> view() noexcept { return {alloc_.address, size()}; }
  /// @brief A read-only view of all elements.
  [[nodiscard]] device_span<const T> view() const noexcept { return {alloc_.address, size()}; }
  /// @brief Converts to a view of all elements.
  operator device_span<T>() & noexcept { return view(); }  // NOLINT: implicit on purpose
  /// @brief Converts to a read-only view of all elements.
  operator device_span<const T>() const& noexcept { return view(); }  // NOLINT: implicit on purpose
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: a view of a temporary buffer would outlive its memory.
  operator device_span<T>() && = delete;
  /// @brief Refused: a view of a temporary buffer would outlive its memory.
  operator device_span<const T>() const&& = delete;
  /// @}

  /// @brief Whether the buffer is freed on a stream (allocated stream-ordered).
  [[nodiscard]] bool is_stream_ordered() const noexcept { return alloc_.stream != nullptr; }
  /// @brief The stream the buffer will be freed on.
  /// @throws invalid_argument_error for a synchronously allocated buffer
  [[nodiscard]] stream_ref stream() const {
    alloc_.require_stream_ordered("cudrv::device_buffer::stream");
    return stream_ref(alloc_.stream);
  }
  /// @brief Makes @p s the stream the buffer is freed on, and makes @p s wait for the work queued on
  /// the previous stream so far, so that the free is ordered after it. A `cudrv::stream` is kept alive
  /// until then; a stream cudrv does not own must outlive the buffer.
  /// @throws invalid_argument_error for a synchronously allocated buffer or a moved-from stream
  void set_stream(stream_ref s) { alloc_.set_stream(s.native_handle(), s.state(), "cudrv::device_buffer::set_stream"); }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary stream would be destroyed before the buffer is freed on it.
  void set_stream(cudrv::stream&&) = delete;
  /// @}
  /// @brief The context the memory belongs to.
  [[nodiscard]] context_ref context() const { return context_ref(alloc_.owning_context()); }
  /// @brief What the memory is, from the way it was allocated (no pointer-attribute query): always
  /// device-accessible; host-accessible when it came from a host or managed pool; its device is the
  /// one of its context, its pool or, for memory from a device's current pool or a pool whose handle is
  /// not described, its stream. An empty (moved-from or released) buffer gives `{-1, false, false}`.
  [[nodiscard]] memory_properties properties() const { return alloc_.properties(); }

 private:
  explicit device_buffer(detail::device_allocation alloc) noexcept : alloc_(alloc) {}
  detail::device_allocation alloc_;
};

}  // namespace cudrv
