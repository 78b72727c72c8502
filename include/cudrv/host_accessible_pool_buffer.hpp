/// @file host_accessible_pool_buffer.hpp
/// @brief @ref cudrv::host_accessible_pool_buffer : owning, stream-ordered, host-accessible memory from
/// a pinned-host, host NUMA or managed @ref cudrv::memory_pool (cuMemAllocFromPoolAsync /
/// cuMemFreeAsync). Memory from a device pool is a @ref cudrv::device_buffer.
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

#include "cudrv/detail/exchange.hpp"
#include "cudrv/device_buffer.hpp"
#include "cudrv/memory_location.hpp"
#include "cudrv/memory_pool.hpp"
#include "cudrv/span.hpp"
#include "cudrv/stream.hpp"

namespace cudrv {

namespace detail {
/// @brief Allocates from a pool whose memory the host can access; refuses other pools (internal).
device_allocation allocate_host_accessible(CUstream stream, stream_state* owner, const memory_pool_base& pool,
                                           std::size_t count, std::size_t element_size);
/// @brief Adopts stream-ordered memory of a pool whose memory the host can access (internal).
device_allocation adopt_host_accessible(CUdeviceptr address, std::size_t bytes, CUstream stream, stream_state* owner,
                                        const memory_pool_base& pool);
}  // namespace detail

/// @brief Owning, stream-ordered memory for `size()` elements of @p T from a pool the host can access:
/// a pinned-host pool (`memory_pool(memory_location::host())`), a host NUMA pool
/// (`memory_pool(memory_location::host_numa(n))`) or a managed pool (`memory_pool::managed()`).
/// Device pools give @ref device_buffer instead. Move-only.
///
/// The lifetime rules are those of a stream-ordered @ref device_buffer : the buffer is allocated on a
/// stream (cuMemAllocFromPoolAsync) and freed on it (cuMemFreeAsync), after the work queued there; a
/// `cudrv::stream` stays alive until then; @ref set_stream moves it to another stream and
/// @ref reset(stream_ref) frees it on a chosen one. Because allocation and free are stream-ordered, the
/// host may touch the memory only after the stream has reached the allocation (synchronise first) and
/// before the free is queued.
///
/// Host access like @ref pinned_buffer : `data()` (a `T*`), `operator[]`, `begin()` / `end()`, `view()`
/// (a `std::span<T>`); `device_view()` gives the same address as a @ref device_span for kernels and
/// copies. The elements are not initialised.
/// @code
/// cudrv::memory_pool staging(cudrv::memory_location::nearest_host_numa(dev));
/// cudrv::host_accessible_pool_buffer<float> h(staging, s, n);       // host memory next to dev, on s
/// s.synchronize();                                   // the allocation has happened
/// std::fill(h.begin(), h.end(), 1.0f);               // written by the host
/// cudrv::copy(device_buf, h, s);                     // read by the GPU; h is freed on s after it
/// @endcode
template <class T>
class host_accessible_pool_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "host_accessible_pool_buffer holds trivially copyable elements");

 public:
  using value_type = T;           ///< The element type.
  using size_type = std::size_t;  ///< Sizes in elements.

  /// @brief Allocates @p count elements on @p s from @p pool. A `cudrv::stream` is kept alive (its
  /// `CUstream`) until the buffer is freed on it.
  /// @throws invalid_argument_error when @p pool or @p s is empty, when @p pool holds device memory
  /// (use @ref device_buffer) or when it is a view of a bare handle whose location is unknown
  host_accessible_pool_buffer(memory_pool_ref pool, stream_ref s, std::size_t count)
      : alloc_(detail::allocate_host_accessible(s.native_handle(), s.state(), pool, count, sizeof(T))) {}
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  host_accessible_pool_buffer(cudrv::memory_pool&&, stream_ref, std::size_t) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  host_accessible_pool_buffer(memory_pool_ref, cudrv::stream&&, std::size_t) = delete;
  host_accessible_pool_buffer(const host_accessible_pool_buffer&) = delete;
  host_accessible_pool_buffer& operator=(const host_accessible_pool_buffer&) = delete;
  /// @}
  /// @brief Takes over @p other's memory; @p other becomes empty.
  host_accessible_pool_buffer(host_accessible_pool_buffer&& other) noexcept
      : alloc_(cudrv::detail::exchange(other.alloc_, {})) {}
  /// @brief Frees the held memory (on its stream), then takes over @p other's.
  host_accessible_pool_buffer& operator=(host_accessible_pool_buffer&& other) noexcept {
    if (this != &other) {
      alloc_.free();
      alloc_ = cudrv::detail::exchange(other.alloc_, {});
    }
    return *this;
  }
  /// @brief Frees the memory on its stream (errors go to the destruction handler).
  ~host_accessible_pool_buffer() { alloc_.free(); }

  /// @brief Adopts @p count elements at @p pointer, allocated from @p pool on @p s; they will be freed
  /// with cuMemFreeAsync on @p s.
  /// @throws invalid_argument_error as the allocating constructor
  [[nodiscard]] static host_accessible_pool_buffer from_native_handle(T* pointer, std::size_t count, stream_ref s,
                                                                      memory_pool_ref pool) {
    return host_accessible_pool_buffer(detail::adopt_host_accessible(reinterpret_cast<CUdeviceptr>(pointer),
                                                                     count * sizeof(T), s.native_handle(), s.state(),
                                                                     pool));
  }
  /// @brief Gives up ownership; the caller must free the returned pointer (cuMemFreeAsync).
  [[nodiscard]] T* release() noexcept { return reinterpret_cast<T*>(alloc_.release()); }
  /// @brief Frees the memory now, on its stream; the buffer becomes empty.
  void reset() noexcept { alloc_.free(); }
  /// @brief Frees the memory now, ordered after the work queued on @p s; the buffer becomes empty.
  /// @throws invalid_argument_error for a moved-from stream
  void reset(stream_ref s) { alloc_.free_on(s.native_handle(), "cudrv::host_accessible_pool_buffer::reset"); }

  /// @brief The memory, as a host pointer (`data()` is the address in the space the memory is used
  /// from: the host can access it).
  [[nodiscard]] T* data() noexcept { return reinterpret_cast<T*>(alloc_.address); }
  /// @brief The memory, as a host pointer to read-only elements.
  [[nodiscard]] const T* data() const noexcept { return reinterpret_cast<const T*>(alloc_.address); }
  /// @brief The typed pointer (here the same as @ref data).
  [[nodiscard]] T* get() noexcept { return data(); }
  /// @brief The typed pointer, to read-only elements.
  [[nodiscard]] const T* get() const noexcept { return data(); }
  /// @brief The number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return alloc_.bytes / sizeof(T); }
  /// @brief The number of bytes.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return alloc_.bytes; }
  /// @brief Whether the buffer holds no element.
  [[nodiscard]] bool empty() const noexcept { return alloc_.bytes == 0; }
  /// @brief Whether the buffer holds memory (false when empty, moved-from or released).
  [[nodiscard]] explicit operator bool() const noexcept { return alloc_.address != 0; }
  /// @brief Element @p i, accessed from the host (unchecked, like `std::vector`).
  [[nodiscard]] T& operator[](std::size_t i) noexcept { return data()[i]; }
  /// @brief Element @p i, read-only.
  [[nodiscard]] const T& operator[](std::size_t i) const noexcept { return data()[i]; }
  /// @brief Iterator to the first element.
  [[nodiscard]] T* begin() noexcept { return data(); }
  /// @brief Iterator to the first element, read-only.
  [[nodiscard]] const T* begin() const noexcept { return data(); }
  /// @brief Iterator past the last element.
  [[nodiscard]] T* end() noexcept { return data() + size(); }
  /// @brief Iterator past the last element, read-only.
  [[nodiscard]] const T* end() const noexcept { return data() + size(); }
  /// @brief A host view of all elements.
  [[nodiscard]] std::span<T> view() noexcept { return {data(), size()}; }
  /// @brief A read-only host view of all elements.
  [[nodiscard]] std::span<const T> view() const noexcept { return {data(), size()}; }
  /// @brief A device view of all elements (the same address), for kernels and copies.
  [[nodiscard]] device_span<T> device_view() noexcept { return {alloc_.address, size()}; }
  /// @brief A read-only device view of all elements (the same address).
  [[nodiscard]] device_span<const T> device_view() const noexcept { return {alloc_.address, size()}; }

  /// @brief The stream the buffer will be freed on.
  /// @throws invalid_argument_error for an empty (moved-from or released) buffer
  [[nodiscard]] stream_ref stream() const {
    alloc_.require_stream_ordered("cudrv::host_accessible_pool_buffer::stream");
    return stream_ref(alloc_.stream);
  }
  /// @brief Makes @p s the stream the buffer is freed on, after making @p s wait for the work queued on
  /// the previous stream so far (as @ref device_buffer::set_stream).
  /// @throws invalid_argument_error for an empty buffer or a moved-from stream
  void set_stream(stream_ref s) {
    alloc_.set_stream(s.native_handle(), s.state(), "cudrv::host_accessible_pool_buffer::set_stream");
  }
  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary stream would be destroyed before the buffer is freed on it.
  void set_stream(cudrv::stream&&) = delete;
  /// @}
  /// @brief What the memory is, from its pool's description (no pointer-attribute query): host- and
  /// device-accessible; the preferred device of a managed pool, else none (-1). An empty buffer gives
  /// `{-1, false, false}`.
  [[nodiscard]] memory_properties properties() const { return alloc_.properties(); }

 private:
  explicit host_accessible_pool_buffer(detail::device_allocation alloc) noexcept : alloc_(alloc) {}
  detail::device_allocation alloc_;
};

/// @brief The former name of @ref host_accessible_pool_buffer, kept for one release (deprecated: the
/// type covers only the pools the host can access, and its name now says so).
template <class T>
using pool_buffer [[deprecated("use cudrv::host_accessible_pool_buffer")]] = host_accessible_pool_buffer<T>;

}  // namespace cudrv
