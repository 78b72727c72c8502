/// @file pinned_buffer.hpp
/// @brief @ref cudrv::pinned_buffer : owning page-locked host memory (cuMemHostAlloc).
///
/// Layer: memory (docs/design.md, "Source layers").
#pragma once

#include <cuda.h>

#include <cstddef>
#include <span>
#include <type_traits>
#include <utility>

#include "cudrv/context.hpp"
#include "cudrv/detail/host_buffer.hpp"
#include "cudrv/device.hpp"
#include "cudrv/memory_location.hpp"
#include "cudrv/span.hpp"

namespace cudrv {

/// @brief Flags for @ref cudrv::pinned_buffer (the `CU_MEMHOSTALLOC_*` values).
enum class pinned_flags : unsigned int {
  none = 0,                             ///< Pinned for the allocating context only.
  portable = CU_MEMHOSTALLOC_PORTABLE,  ///< Pinned for every context (the default).
  mapped = CU_MEMHOSTALLOC_DEVICEMAP,   ///< Mapped into the device address space.
  write_combined =
      CU_MEMHOSTALLOC_WRITECOMBINED,  ///< Write-combined: fast host writes and transfers, very slow host reads.
};

/// @brief Combines pinned-memory flags.
[[nodiscard]] constexpr pinned_flags operator|(pinned_flags a, pinned_flags b) noexcept {
  return static_cast<pinned_flags>(static_cast<unsigned int>(a) | static_cast<unsigned int>(b));
}

/// @brief Owning page-locked host memory for `size()` elements of @p T, freed with cuMemFreeHost.
/// Move-only; a contiguous range of @p T (`view()` gives a `std::span<T>`), and a
/// @ref cudrv::device_span through @ref device_view.
///
/// Pinned memory is what makes host-device copies asynchronous and fast. The elements are not
/// initialised.
/// Host access, shared with the other host-accessible buffer: `data()`, `size()`, `size_bytes()`,
/// `empty()`, `operator[]`, `begin()` / `end()`, `view()` (a `std::span<T>`), `context()`, and
/// `release()`, which hands the memory over to the caller.
/// @code
/// cudrv::pinned_buffer<float> host(dev, n);                    // portable
/// std::fill(host.begin(), host.end(), 1.0f);
/// cudrv::copy(device_buf, host, stream);                       // asynchronous H2D
/// cudrv::pinned_buffer<float> wc(dev, n, cudrv::pinned_flags::portable | cudrv::pinned_flags::write_combined);
/// @endcode
template <class T>
class pinned_buffer : public detail::host_buffer<T, &detail::host_allocation::free_pinned> {
  using base = detail::host_buffer<T, &detail::host_allocation::free_pinned>;

 public:
  /// @brief Allocates @p count elements with @p flags in @p dev's primary context.
  pinned_buffer(const device& dev, std::size_t count, pinned_flags flags = pinned_flags::portable)
      : pinned_buffer(dev.primary_context(), count, flags) {}
  /// @brief Allocates @p count elements with @p flags in @p ctx.
  pinned_buffer(context_ref ctx, std::size_t count, pinned_flags flags = pinned_flags::portable)
      : base(detail::host_allocation::allocate_pinned(ctx.native_handle(), count, sizeof(T),
                                                      static_cast<unsigned int>(flags))) {}

  /// @name Refused forms (deleted: these calls do not compile)
  /// @{

  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  pinned_buffer(cudrv::context&&, std::size_t, pinned_flags = pinned_flags::portable) = delete;
  /// @brief Refused: the temporary owner would be destroyed at the end of the statement, before this object.
  pinned_buffer(cudrv::primary_context&&, std::size_t, pinned_flags = pinned_flags::portable) = delete;
  /// @}
  /// @brief Adopts memory from cuMemHostAlloc made in @p ctx.
  [[nodiscard]] static pinned_buffer from_native_handle(T* pointer, std::size_t count, context_ref ctx) noexcept {
    return pinned_buffer(
        detail::host_allocation{pointer, count * sizeof(T), detail::context_token::of(ctx.native_handle())});
  }
  /// @brief What the memory is (no pointer-attribute query): page-locked host memory of no device,
  /// host-accessible and device-accessible (mapped, as all pinned memory is with unified addressing);
  /// `{-1, false, false}` when the buffer is empty (moved-from or released).
  [[nodiscard]] memory_properties properties() const noexcept {
    if (this->alloc_.pointer == nullptr && this->alloc_.context.handle == nullptr) {
      return {};
    }
    return {-1, true, true};
  }
  /// @brief The device-side view of the memory (cuMemHostGetDevicePointer), for kernels that read
  /// or write host memory directly; needs mapped memory (always the case on 64-bit systems with
  /// unified addressing).
  [[nodiscard]] device_span<T> device_view() {
    return {this->alloc_.device_address("cudrv::pinned_buffer::device_view"), this->size()};
  }
  /// @brief The read-only device-side view of the memory (as the non-const form).
  [[nodiscard]] device_span<const T> device_view() const {
    return {this->alloc_.device_address("cudrv::pinned_buffer::device_view"), this->size()};
  }

 private:
  explicit pinned_buffer(detail::host_allocation alloc) noexcept : base(alloc) {}
};

}  // namespace cudrv
