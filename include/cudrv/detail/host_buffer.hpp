/// @file host_buffer.hpp
/// @brief Internal: the state and the common part of the owning host-accessible buffers
/// (@ref cudrv::pinned_buffer and @ref cudrv::managed_buffer).
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

#include "cudrv/context.hpp"
#include "cudrv/detail/exchange.hpp"

namespace cudrv {
namespace detail {
/// @brief The untyped state of a host allocation or registration (internal).
struct host_allocation {
  void* pointer = nullptr;
  std::size_t bytes = 0;
  context_token context{};
  int device = -1;  // managed memory: its context's device (-2 until known); -1 for host memory

  static host_allocation allocate_pinned(CUcontext ctx, std::size_t count, std::size_t element_size,
                                         unsigned int flags);
  static host_allocation allocate_managed(CUcontext ctx, std::size_t count, std::size_t element_size,
                                          unsigned int flags);
  static host_allocation register_memory(CUcontext ctx, void* pointer, std::size_t bytes, unsigned int flags);
  void free_pinned() noexcept;
  void free_managed() noexcept;
  void unregister() noexcept;
  CUdeviceptr device_address(const char* api) const;
  // device, or the device of the context when it was not recorded (-1 for none).
  int resolved_device() const;
};

/// @brief What pinned and managed buffers share: a move-only owner of a host_allocation freed by
/// @p Free, with host access to its elements (internal; documented on the derived types).
template <class T, void (host_allocation::*Free)() noexcept>
class host_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "cudrv buffers hold trivially copyable elements");

 public:
  using value_type = T;           ///< The element type.
  using size_type = std::size_t;  ///< Sizes in elements.

  host_buffer(const host_buffer&) = delete;
  host_buffer& operator=(const host_buffer&) = delete;
  /// @brief Takes over @p other's memory; @p other becomes empty.
  host_buffer(host_buffer&& other) noexcept : alloc_(cudrv::detail::exchange(other.alloc_, {})) {}
  /// @brief Frees the held memory, then takes over @p other's.
  host_buffer& operator=(host_buffer&& other) noexcept {
    if (this != &other) {
      (alloc_.*Free)();
      alloc_ = cudrv::detail::exchange(other.alloc_, {});
    }
    return *this;
  }
  /// @brief Frees the memory (errors go to the destruction handler).
  ~host_buffer() { (alloc_.*Free)(); }

  /// @brief Gives up ownership; the caller must free the returned pointer.
  [[nodiscard]] T* release() noexcept { return static_cast<T*>(cudrv::detail::exchange(alloc_, {}).pointer); }
  /// @brief Frees the memory now; the buffer becomes empty.
  void reset() noexcept { (alloc_.*Free)(); }
  /// @brief The host pointer (`data()` is the address in the space the memory is used from: host memory).
  [[nodiscard]] T* data() noexcept { return static_cast<T*>(alloc_.pointer); }
  /// @brief The host pointer, to read-only elements.
  [[nodiscard]] const T* data() const noexcept { return static_cast<const T*>(alloc_.pointer); }
  /// @brief The typed pointer (for host memory the same as @ref data).
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
  [[nodiscard]] explicit operator bool() const noexcept { return alloc_.pointer != nullptr; }
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
  /// @brief The context the memory was allocated in.
  [[nodiscard]] context_ref context() const noexcept { return context_ref(alloc_.context.handle); }

 protected:
  /// @brief Takes ownership of @p alloc.
  explicit host_buffer(host_allocation alloc) noexcept : alloc_(alloc) {}
  /// @brief The owned allocation.
  host_allocation alloc_;
};

}  // namespace detail
}  // namespace cudrv
