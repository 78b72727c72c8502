/// @file pinned_buffer.hpp
/// @brief @ref cudax::pinned_buffer : owning page-locked host memory (cuMemHostAlloc).
#pragma once

#include <cuda.h>

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

#include "cudax/context.hpp"
#include "cudax/device.hpp"
#include "cudax/span.hpp"

namespace cudax {

/// @brief Flags for @ref cudax::pinned_buffer (the `CU_MEMHOSTALLOC_*` values).
enum class pinned_flags : unsigned int {
  none = 0,                                          ///< Pinned for the allocating context only.
  portable = CU_MEMHOSTALLOC_PORTABLE,               ///< Pinned for every context (the default).
  mapped = CU_MEMHOSTALLOC_DEVICEMAP,                ///< Mapped into the device address space.
  write_combined = CU_MEMHOSTALLOC_WRITECOMBINED,    ///< Write-combined: fast host writes and transfers, very slow host reads.
};

/// @brief Combines pinned-memory flags.
[[nodiscard]] constexpr pinned_flags operator|(pinned_flags a, pinned_flags b) noexcept {
  return static_cast<pinned_flags>(static_cast<unsigned int>(a) | static_cast<unsigned int>(b));
}

namespace detail {
/// @brief The untyped state of a host allocation or registration (internal).
struct host_allocation {
  void* pointer = nullptr;
  std::size_t bytes = 0;
  CUcontext context = nullptr;

  static host_allocation allocate_pinned(CUcontext ctx, std::size_t count, std::size_t element_size, unsigned int flags);
  static host_allocation allocate_managed(CUcontext ctx, std::size_t count, std::size_t element_size, unsigned int flags);
  static host_allocation register_memory(CUcontext ctx, void* pointer, std::size_t bytes, unsigned int flags);
  void free_pinned() noexcept;
  void free_managed() noexcept;
  void unregister() noexcept;
  CUdeviceptr device_address(const char* api) const;
};
}  // namespace detail

/// @brief Owning page-locked host memory for `size()` elements of @p T, freed with cuMemFreeHost.
/// Move-only; converts to `std::span<T>`, and to @ref device_span through @ref device_view.
///
/// Pinned memory is what makes host-device copies asynchronous and fast. The elements are not
/// initialised.
/// @code
/// cudax::pinned_buffer<float> host(dev, n);                    // portable
/// std::fill(host.begin(), host.end(), 1.0f);
/// cudax::copy(device_buf, host, stream);                       // asynchronous H2D
/// cudax::pinned_buffer<float> wc(dev, n, cudax::pinned_flags::portable | cudax::pinned_flags::write_combined);
/// @endcode
template <class T>
class pinned_buffer {
  static_assert(std::is_trivially_copyable_v<T>, "pinned_buffer holds trivially copyable elements");

 public:
  using value_type = T;           ///< The element type.
  using size_type = std::size_t;  ///< Sizes in elements.

  /// @brief Allocates @p count elements with @p flags in @p dev's primary context.
  pinned_buffer(const device& dev, std::size_t count, pinned_flags flags = pinned_flags::portable)
      : pinned_buffer(dev.primary_context(), count, flags) {}
  /// @brief Allocates @p count elements with @p flags in @p ctx.
  pinned_buffer(context_ref ctx, std::size_t count, pinned_flags flags = pinned_flags::portable)
      : alloc_(detail::host_allocation::allocate_pinned(ctx.native_handle(), count, sizeof(T),
                                                        static_cast<unsigned int>(flags))) {}
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  /// @brief Takes over @p other's memory; @p other becomes empty.
  pinned_buffer(pinned_buffer&& other) noexcept : alloc_(std::exchange(other.alloc_, {})) {}
  /// @brief Frees the held memory, then takes over @p other's.
  pinned_buffer& operator=(pinned_buffer&& other) noexcept {
    if (this != &other) {
      alloc_.free_pinned();
      alloc_ = std::exchange(other.alloc_, {});
    }
    return *this;
  }
  /// @brief Frees the memory (errors go to the destruction handler).
  ~pinned_buffer() { alloc_.free_pinned(); }

  /// @brief Adopts memory from cuMemHostAlloc made in @p ctx.
  [[nodiscard]] static pinned_buffer from_native_handle(T* pointer, std::size_t count, context_ref ctx) noexcept {
    return pinned_buffer(detail::host_allocation{pointer, count * sizeof(T), ctx.native_handle()});
  }
  /// @brief Gives up ownership; the caller must free the returned pointer with cuMemFreeHost.
  [[nodiscard]] T* release() noexcept { return static_cast<T*>(std::exchange(alloc_, {}).pointer); }

  /// @brief The host pointer.
  [[nodiscard]] T* data() const noexcept { return static_cast<T*>(alloc_.pointer); }
  /// @brief The number of elements.
  [[nodiscard]] std::size_t size() const noexcept { return alloc_.bytes / sizeof(T); }
  /// @brief The number of bytes.
  [[nodiscard]] std::size_t size_bytes() const noexcept { return alloc_.bytes; }
  /// @brief Whether the buffer holds no element.
  [[nodiscard]] bool empty() const noexcept { return alloc_.bytes == 0; }
  /// @brief Whether the buffer holds memory (false when empty, moved-from or released).
  [[nodiscard]] explicit operator bool() const noexcept { return alloc_.pointer != nullptr; }
  /// @brief Element @p i (unchecked, like `std::span`).
  [[nodiscard]] T& operator[](std::size_t i) const noexcept { return data()[i]; }
  /// @brief Iterator to the first element.
  [[nodiscard]] T* begin() const noexcept { return data(); }
  /// @brief Iterator past the last element.
  [[nodiscard]] T* end() const noexcept { return data() + size(); }

  /// @brief A host view of all elements.
  [[nodiscard]] std::span<T> view() const noexcept { return {data(), size()}; }
  /// @brief The device-side view of the memory (cuMemHostGetDevicePointer), for kernels that read
  /// or write host memory directly; needs mapped memory (always the case on 64-bit systems with
  /// unified addressing).
  [[nodiscard]] device_span<T> device_view() const {
    return {alloc_.device_address("cudax::pinned_buffer::device_view"), size()};
  }
  /// @brief The context the memory was allocated in.
  [[nodiscard]] context_ref context() const noexcept { return context_ref(alloc_.context); }

 private:
  explicit pinned_buffer(detail::host_allocation alloc) noexcept : alloc_(alloc) {}
  detail::host_allocation alloc_;
};

}  // namespace cudax
